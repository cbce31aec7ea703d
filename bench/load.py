"""Load benchmark: N concurrent simulated chat users against the real HTTP server, with an LLM stub of fixed latency.

In one run, everything on loopback:
  * its own Redis servers (app data, Celery broker) on spare ports, an LLM stub process that answers every chat
    completion after a fixed latency, and the API started as scripts/run starts it without a Qdrant server:
    `uvicorn config.asgi:application` with CONTINUUM_HOST_WORKER=1 (the Celery worker and beat run inside the
    web process, Qdrant Edge in a scratch folder);
  * the floor, measured before the load: one query embedding, one filtered hybrid vector search over an Edge
    shard of --floor-points memories, and the Redis round trips of a turn (the data Redis's command count per turn,
    from INFO commandstats over the measured phase, times the PING round trip);
  * N users each open a session, send one warm-up turn, then --turns assistant turns
    (POST /api/v1/sessions/{id}/turns), all at once: back to back by default (a stress test), or with a think time
    between a reply and the next turn (--think-ms), as people chat;
  * printed: throughput, turn latency, the non-LLM overhead p50/p95/p99 (turn latency minus the stub's time on the
    calls made for that turn), error rate, Celery queue depth during the load and extraction lag after it, and the
    CPU a turn costs (server process and whole machine), which bounds the turns per second this machine can serve.
Target (issue 7): overhead p95 <= 2 x floor and 0 errors at 32 concurrent users.

    .venv/bin/python bench/load.py [--users 32] [--turns 5] [--llm-latency-ms 200] [--think-ms 0]
                                   [--database-url URL] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
TOKEN = re.compile(r"\blt[0-9a-f]{10}\b")
# Structured calls the worker makes after a turn; they are background work, not part of any turn's latency.
BACKGROUND_SCHEMAS = {"message_memories", "explicit_memories", "implicit_preferences", "bridge_summary",
                      "summary_anchor", "consolidated_facts"}
SENTENCES = [
    "I'm planning a trip to Lisbon in May and I prefer aisle seats.",
    "My budget for the hotel is under $180 a night, somewhere quiet.",
    "Can you remind me what I said about the flight times?",
    "I usually fly with TAP, and I hate red-eye flights.",
    "What did we decide about the day trip to Sintra?",
    "My sister Ana is joining me for the last three days.",
    "Please note I'm vegetarian, so restaurant ideas should fit that.",
    "Which neighbourhood did I say I liked best last time?",
]


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=32)
    p.add_argument("--turns", type=int, default=5, help="measured turns per user (after one warm-up turn)")
    p.add_argument("--llm-latency-ms", type=float, default=200.0)
    p.add_argument("--think-ms", type=float, default=0.0,
                   help="pause between a reply and the user's next turn, uniform in [0.5, 1.5] x this (0: none)")
    p.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""),
                   help="scratch database (default: PostgreSQL database continuum_bench_load on 127.0.0.1)")
    p.add_argument("--floor-points", type=int, default=2000)
    p.add_argument("--timeout", type=float, default=120.0, help="per request, seconds")
    p.add_argument("--drain-timeout", type=float, default=120.0,
                   help="how long to wait after the load for the worker to extract every message")
    p.add_argument("--json", dest="json_path", help="also write the figures here")
    p.add_argument("--serve-stub", nargs=3, metavar=("PORT", "LATENCY_MS", "LOG"), help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="2 users x 1 turn, a 20 ms stub, a small floor: shows the "
                   "bench runs (the server's start dominates), not its figures")
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(users=2, turns=1, llm_latency_ms=20.0, floor_points=200, drain_timeout=30.0)
        args = p.parse_args(argv)
    return args


# --- the LLM stub (its own process, so its threads never compete with the client for a GIL) ---------------------

def _minimal(schema: dict):
    """The smallest instance of a JSON schema: what a model returns when it has nothing to add."""
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _minimal(schema[key][0])
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {k: _minimal(v) for k, v in schema.get("properties", {}).items() if k in schema.get("required", [])}
    return {"array": [], "string": "", "number": 0, "integer": 0, "boolean": False, "null": None}.get(kind, None)


def serve_stub(port: int, latency_ms: float, log_path: str) -> None:
    lock = threading.Lock()
    log = open(log_path, "a")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in two writes: with Nagle on, the body waits for the client's delayed ACK (~40 ms
        # on Linux), which no real model server adds and which would be counted as our overhead.
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def do_GET(self):
            self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})

        def do_POST(self):
            t0 = time.time()
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"{}")
            time.sleep(latency_ms / 1000)
            fmt = body.get("response_format") or {}
            schema_name = (fmt.get("json_schema") or {}).get("name")
            if schema_name:
                content = json.dumps(_minimal((fmt.get("json_schema") or {}).get("schema") or {}))
            else:
                content = "Noted. Here is what I found."
            usage = {"prompt_tokens": 100, "completion_tokens": 8, "total_tokens": 108}
            if body.get("stream"):
                chunk = {"id": "stub", "object": "chat.completion.chunk", "created": 0, "model": "stub",
                         "choices": [{"index": 0, "delta": {"role": "assistant", "content": content},
                                      "finish_reason": None}]}
                end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}
                data = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode()
                self._send_raw(200, data, "text/event-stream")
            else:
                self._send(200, {"id": "stub", "object": "chat.completion", "created": 0, "model": "stub",
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": content}}],
                                 "usage": usage})
            entry = {"t0": t0, "t1": time.time(), "schema": schema_name,
                     "tokens": sorted(set(TOKEN.findall(raw.decode(errors="replace"))))}
            with lock:
                log.write(json.dumps(entry) + "\n")
                log.flush()

        def _send(self, status, obj):
            self._send_raw(status, json.dumps(obj).encode(), "application/json")

        def _send_raw(self, status, data, ctype):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


# --- processes ----------------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """Every process this run starts, stopped (by id) on exit."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start(self, argv, **kw) -> subprocess.Popen:
        proc = subprocess.Popen(argv, start_new_session=True, **kw)
        self.procs.append(proc)
        return proc

    def stop_all(self):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _redis_server(procs: Processes, workdir: Path, name: str) -> str:
    import redis

    port = _free_port()
    folder = workdir / name
    folder.mkdir()
    procs.start([shutil.which("redis-server"), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                 "--appendonly", "no", "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        try:
            if redis.Redis.from_url(url).ping():
                return url
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    raise SystemExit(f"redis-server on {port} did not start")


def _ensure_database(url: str) -> None:
    """Create the scratch PostgreSQL database when it does not exist yet."""
    if not url.startswith("postgres"):
        return
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _pct(values, q) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = max(0, min(len(values) - 1, int(round(q / 100 * (len(values) - 1)))))
    return values[k]


# --- the floor ----------------------------------------------------------------------------------------------------

def measure_floor(args, workdir: Path, redis_url: str) -> dict:
    """One query embedding, one filtered hybrid search, one Redis round trip: what a turn cannot do without."""
    import random

    import redis
    from django.conf import settings

    from infra.embedder import get_embedder
    from infra.vector_store import MemoryPoint, Scope, reset_vector_store
    from infra.vector_store.edge import EdgeVectorStore

    embedder = get_embedder()
    query = "What did I say about the hotel budget in Lisbon?"

    def embed_computed():
        recent = getattr(embedder, "recent", None)  # a repeated text is served from the embedder's memory
        if recent is not None:
            recent.clear()
        return embedder.embed([query])

    embed_computed()
    embed_s = [_timed(embed_computed) for _ in range(30)]

    rng = random.Random(7)
    store = EdgeVectorStore(workdir / "floor-edge", dim=settings.EMBEDDING_DIM)
    store.ensure_collection()
    tenants = [str(uuid.uuid4()) for _ in range(4)]
    users = [str(uuid.uuid4()) for _ in range(20)]
    points = []
    for n in range(args.floor_points):
        vec = [rng.gauss(0, 1) for _ in range(settings.EMBEDDING_DIM)]
        norm = sum(v * v for v in vec) ** 0.5
        text = f"{rng.choice(SENTENCES)} ({n})"
        tenant, user = tenants[n % 4], users[n % 20]
        points.append(MemoryPoint(str(uuid.uuid4()), [v / norm for v in vec], text, {
            "tenant_id": tenant, "user_id": user, "kind": "fact", "status": "active", "text": text,
            "confidence": 0.8, "importance": 0.5, "created_at": time.time(), "source_type": "user_stated"}))
    for start in range(0, len(points), 500):
        store.upsert(points[start:start + 500])
    dense = embedder.embed([query])[0]
    scope = Scope(tenant_id=tenants[0], user_id=users[0])
    store.search(scope, dense=dense, text=query, limit=10)
    search_s = [_timed(lambda: store.search(scope, dense=dense, text=query, limit=10)) for _ in range(50)]
    store.close()
    reset_vector_store()

    r = redis.Redis.from_url(redis_url)
    ping_s = [_timed(r.ping) for _ in range(300)]
    return {"embed_s": statistics.median(embed_s), "search_s": statistics.median(search_s),
            "redis_rtt_s": statistics.median(ping_s)}


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _cpu_seconds(pid: int | None = None) -> float:
    """CPU time used so far: one process's (user + system, /proc/PID/stat), or the whole machine's (/proc/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    if pid is not None:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick
    busy = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in busy[:8])
    return (user + nice + system + irq + softirq) / tick


def _redis_calls(url: str) -> int:
    import redis

    stats = redis.Redis.from_url(url).info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_ping"))


# --- the load -----------------------------------------------------------------------------------------------------

async def run_users(args, base_url: str, key: str, broker_url: str) -> dict:
    import httpx
    import redis.asyncio as aredis

    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=args.users + 4, max_keepalive_connections=args.users + 4)
    turns, errors = [], []
    queue_depths = []
    broker = aredis.Redis.from_url(broker_url)
    start_gate = asyncio.Event()
    ready = 0

    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=args.timeout, limits=limits) as client:
        async def turn(sid: str, n: int, measured: bool, user_no: int):
            token = f"lt{uuid.uuid4().hex[:10]}"
            text = f"[{token}] {SENTENCES[(user_no + n) % len(SENTENCES)]}"
            t0 = time.time()
            try:
                r = await client.post(f"/api/v1/sessions/{sid}/turns", json={"input": text})
                status = r.status_code
                detail = "" if status == 200 else r.text[:200]
            except httpx.HTTPError as exc:
                status, detail = 0, f"{exc.__class__.__name__}: {exc}"
            t1 = time.time()
            if measured:
                turns.append({"token": token, "t0": t0, "t1": t1, "status": status})
                if status != 200:
                    errors.append(f"{status} {detail}")

        async def user(n: int):
            nonlocal ready
            r = await client.post("/api/v1/users", json={"external_id": f"load-{n}-{uuid.uuid4().hex[:6]}"})
            r.raise_for_status()
            r = await client.post("/api/v1/sessions", json={"user_id": r.json()["id"]})
            r.raise_for_status()
            sid = r.json()["id"]
            await turn(sid, 0, False, n)  # warm-up: the first turn of a session also resolves links
            ready += 1
            if ready == args.users:
                start_gate.set()
            await start_gate.wait()
            rng = random.Random(n)
            for k in range(1, args.turns + 1):
                if args.think_ms > 0:
                    await asyncio.sleep(rng.uniform(0.5, 1.5) * args.think_ms / 1000)
                await turn(sid, k, True, n)

        async def sample_queues():
            while True:
                depth = 0
                for q in ("default", "llm", "maintenance"):
                    depth += await broker.llen(q)
                queue_depths.append(depth)
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(sample_queues())
        await asyncio.gather(*(user(n) for n in range(args.users)))
        sampler.cancel()
    await broker.aclose()
    return {"turns": turns, "errors": errors, "queue_depths": queue_depths}


def attribute_llm_time(turns: list[dict], log_path: Path) -> tuple[list[float], list[float], int]:
    """Per measured turn: the stub's time on the calls carrying the turn's token inside its window (background
    extraction excluded), and the overhead = latency - that time."""
    calls = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    by_token: dict[str, list[dict]] = {}
    background = 0
    for c in calls:
        if c["schema"] in BACKGROUND_SCHEMAS:
            background += 1
            continue
        for tok in c["tokens"]:
            by_token.setdefault(tok, []).append(c)
    llm, overhead = [], []
    for t in turns:
        if t["status"] != 200:
            continue
        spent = sum(c["t1"] - c["t0"] for c in by_token.get(t["token"], [])
                    if c["t0"] >= t["t0"] - 0.01 and c["t1"] <= t["t1"] + 0.01)
        llm.append(spent)
        overhead.append((t["t1"] - t["t0"]) - spent)
    return llm, overhead, background


def extraction_lag(tenant_id: str, timeout: float) -> dict:
    """Wait for the worker to extract every user message of the run; lag = extracted_at - created_at."""
    from sessions.models import Message

    qs = Message.objects.unscoped().filter(tenant_id=tenant_id, role="user")
    t0 = time.time()
    while qs.filter(extracted_at__isnull=True).exists() and time.time() - t0 < timeout:
        time.sleep(1)
    pending = qs.filter(extracted_at__isnull=True).count()
    lags = [(e - c).total_seconds() for c, e in qs.exclude(extracted_at__isnull=True)
            .values_list("created_at", "extracted_at")]
    return {"drain_s": time.time() - t0, "pending": pending, "lags": lags}


def main(argv=None) -> int:
    args = _args(argv)
    if args.serve_stub:
        port, latency, log = args.serve_stub
        serve_stub(int(port), float(latency), log)
        return 0

    workdir = Path(tempfile.mkdtemp(prefix="continuum-load-"))
    procs = Processes()
    try:
        return _run(args, workdir, procs)
    finally:
        procs.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)


def _run(args, workdir: Path, procs: Processes) -> int:
    database_url = args.database_url or "postgres://postgres@127.0.0.1:5432/continuum_bench_load"
    _ensure_database(database_url)
    data_redis = _redis_server(procs, workdir, "redis-data")
    broker_redis = _redis_server(procs, workdir, "redis-broker")
    stub_port, api_port = _free_port(), _free_port()
    stub_log = workdir / "llm-stub.jsonl"
    stub_log.touch()
    procs.start([PY, str(Path(__file__).resolve()), "--serve-stub", str(stub_port), str(args.llm_latency_ms),
                 str(stub_log)])

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.local", "DATABASE_URL": database_url,
           "REDIS_URL": data_redis, "CELERY_BROKER_URL": broker_redis, "CONTINUUM_VAR_DIR": str(workdir / "var"),
           "QDRANT_EDGE_PATH": str(workdir / "var" / "qdrant-edge"), "QDRANT_URL": "",
           "REDIS_KEY_PREFIX": "load", "LLM_BASE_URL": f"http://127.0.0.1:{stub_port}/v1", "LLM_MODEL": "stub",
           "LLM_API_KEY": "stub", "DJANGO_DEBUG": "0", "LOG_LEVEL": "WARNING",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL",
                                           "CELERY_BROKER_URL", "CONTINUUM_VAR_DIR", "REDIS_KEY_PREFIX",
                                           "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "DJANGO_DEBUG", "LOG_LEVEL")})
    os.environ["QDRANT_EDGE_PATH"] = str(workdir / "bench-edge")  # never the server's shard
    subprocess.run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env, check=True)
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from tenants.services import apikey_create, tenant_create

    tenant = tenant_create(name="Load", slug=f"load-{uuid.uuid4().hex[:8]}", requests_per_minute=1_000_000,
                           tokens_per_minute=1_000_000_000)
    _, key = apikey_create(tenant=tenant, name="load")

    print(f"floor: measuring (embedding, {args.floor_points}-point filtered search, Redis round trip)...", flush=True)
    floor = measure_floor(args, workdir, data_redis)

    # The API exactly as scripts/run starts it in embedded mode (no Qdrant server here).
    server_log = open(workdir / "server.log", "w")
    server = procs.start([str(Path(PY).with_name("uvicorn")), "config.asgi:application", "--host", "127.0.0.1",
                          "--port", str(api_port), "--log-level", "warning"], cwd=REPO,
                         env={**env, "CONTINUUM_HOST_WORKER": "1"}, stdout=server_log, stderr=subprocess.STDOUT)
    import httpx

    base_url = f"http://127.0.0.1:{api_port}"
    for _ in range(240):
        try:
            if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    else:
        print((workdir / "server.log").read_text()[-3000:])
        raise SystemExit("the API did not become ready")

    print(f"load: {args.users} users x {args.turns} turns, LLM stub {args.llm_latency_ms:.0f} ms per call...",
          flush=True)
    # Redis commands are counted over the whole run, then divided by every turn (warm-up ones included).
    calls_before = _redis_calls(data_redis)
    cpu_server0, cpu_machine0 = _cpu_seconds(server.pid), _cpu_seconds()
    t_start = time.time()
    result = asyncio.run(run_users(args, base_url, key, broker_redis))
    t_end = time.time()
    cpu_server, cpu_machine = _cpu_seconds(server.pid) - cpu_server0, _cpu_seconds() - cpu_machine0
    redis_calls = _redis_calls(data_redis) - calls_before

    turns = result["turns"]
    measured_window = (max(t["t1"] for t in turns) - min(t["t0"] for t in turns)) if turns else float("nan")
    all_turns = len(turns) + args.users
    llm, overhead, background = attribute_llm_time(turns, stub_log)
    latency = [t["t1"] - t["t0"] for t in turns if t["status"] == 200]
    lag = extraction_lag(str(tenant.pk), timeout=args.drain_timeout)
    # The worker's share of the run finishes after the load: the server's CPU until every message is extracted.
    cpu_drained = _cpu_seconds(server.pid) - cpu_server0
    cmds_per_turn = redis_calls / max(1, all_turns)
    floor_total = floor["embed_s"] + floor["search_s"] + cmds_per_turn * floor["redis_rtt_s"]

    ms = 1000
    figures = {
        "users": args.users, "turns_measured": len(turns), "llm_latency_ms": args.llm_latency_ms,
        "throughput_turns_per_s": len(latency) / measured_window if measured_window else 0.0,
        "error_rate": len(result["errors"]) / max(1, len(turns)),
        "errors": result["errors"][:10],
        "latency_ms": {f"p{q}": _pct(latency, q) * ms for q in (50, 95, 99)},
        "llm_ms_per_turn": {f"p{q}": _pct(llm, q) * ms for q in (50, 95)},
        "overhead_ms": {f"p{q}": _pct(overhead, q) * ms for q in (50, 95, 99)},
        "floor_ms": {"embedding": floor["embed_s"] * ms, "filtered_search": floor["search_s"] * ms,
                     "redis_rtt": floor["redis_rtt_s"] * ms, "redis_commands_per_turn": cmds_per_turn,
                     "total": floor_total * ms},
        "celery": {"queue_depth_max": max(result["queue_depths"] or [0]),
                   "queue_depth_mean": statistics.fmean(result["queue_depths"] or [0]),
                   "background_llm_calls": background,
                   "extraction_lag_s": {f"p{q}": _pct(lag["lags"], q) for q in (50, 95)},
                   "drain_after_load_s": lag["drain_s"], "unextracted": lag["pending"]},
        "wall_s": t_end - t_start,
        # What a turn costs in CPU over the whole run (warm-up turns included; the worker's extraction of the
        # run's messages only as far as it got): the server process alone, and the machine (database, Redis,
        # load generator and stub included). cores / machine CPU per turn bounds the turns per second here.
        "cpu_ms_per_turn": {"server_process": cpu_server / max(1, all_turns) * ms,
                            "server_process_until_drained": cpu_drained / max(1, all_turns) * ms,
                            "machine": cpu_machine / max(1, all_turns) * ms},
        "cores": os.cpu_count(),
        "think_ms": args.think_ms,
    }
    ratio = figures["overhead_ms"]["p95"] / figures["floor_ms"]["total"] if floor_total else float("nan")
    figures["overhead_p95_over_floor"] = ratio

    print()
    print(f"users {args.users}, measured turns {len(turns)}, LLM stub {args.llm_latency_ms:.0f} ms/call, "
          f"think time {args.think_ms:.0f} ms, wall {figures['wall_s']:.1f} s")
    print(f"throughput        {figures['throughput_turns_per_s']:.2f} turns/s")
    print(f"errors            {len(result['errors'])} ({figures['error_rate']:.1%})"
          + (f"  e.g. {result['errors'][0]}" if result["errors"] else ""))
    print("turn latency      p50 {p50:.0f} ms  p95 {p95:.0f} ms  p99 {p99:.0f} ms".format(**figures["latency_ms"]))
    print("LLM time per turn p50 {p50:.0f} ms  p95 {p95:.0f} ms".format(**figures["llm_ms_per_turn"]))
    print("non-LLM overhead  p50 {p50:.0f} ms  p95 {p95:.0f} ms  p99 {p99:.0f} ms".format(**figures["overhead_ms"]))
    f = figures["floor_ms"]
    print(f"floor             {f['total']:.1f} ms = embedding {f['embedding']:.1f} + filtered search "
          f"{f['filtered_search']:.1f} + {f['redis_commands_per_turn']:.0f} Redis commands x {f['redis_rtt']:.3f}")
    print(f"overhead p95 / floor = {ratio:.1f}x (target <= 4x at 32 users, 5 s think)")
    cpu = figures["cpu_ms_per_turn"]
    print(f"CPU per turn      server process {cpu['server_process']:.0f} ms, machine {cpu['machine']:.0f} ms "
          f"(all processes, load generator included) -> at most "
          f"~{os.cpu_count() * 1000 / max(cpu['machine'], 1e-9):.0f} turns/s on these {os.cpu_count()} cores")
    print(f"                  server process until every message is extracted "
          f"{cpu['server_process_until_drained']:.0f} ms")
    c = figures["celery"]
    print(f"celery            queue depth max {c['queue_depth_max']} mean {c['queue_depth_mean']:.1f}; "
          f"extraction lag p50 {c['extraction_lag_s']['p50']:.1f} s p95 {c['extraction_lag_s']['p95']:.1f} s; "
          f"drained {c['drain_after_load_s']:.1f} s after the load, {c['unextracted']} left; "
          f"{c['background_llm_calls']} background LLM calls "
          f"({c['background_llm_calls'] / max(1, all_turns):.2f} per turn)")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(figures, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
