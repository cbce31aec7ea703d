"""Where a turn's CPU goes: an assistant turn profiled by phase, in process, against PostgreSQL, Redis and an LLM stub.

    .venv/bin/python bench/turn_profile.py [--turns 40] [--history 30] [--database-url URL] [--top 10]

Starts its own Redis (data and Celery broker, so no other worker takes its tasks) and the load bench's LLM stub
(every chat completion after --llm-latency-ms), records --history messages of an earlier session of one user and
extracts them, then sends --turns assistant turns (POST /api/v1/sessions/{id}/turns through Django's test client:
routing, authentication, serializers and middleware included) of a new session under cProfile with a CPU-time
timer, then runs the extraction tasks those turns queued, under a second profile.

A query's embedding normally runs on a helper thread beside the request (infra.embedder.embed_soon); here it runs
on the request's thread, so cProfile sees it (the CPU is the same; only the overlap is lost).

Prints, for the request path and for the background work: CPU per turn by phase (each function's own time,
grouped by the module it is in), the ten costliest functions (own time and with what they call), SQL statements
and Redis commands per turn, statements repeated within one turn, and LLM calls per turn.
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (phase, substrings of a function's file or name), first match wins: what a turn's CPU is spent on.
PHASES = [
    ("embedding", ("infra/embedder", "onnxruntime", "tokenizers", "InferenceSession", "encode_batch")),
    ("retrieval", ("memory/retrieval", "infra/vector_store", "qdrant", "memory/rendering", "sessions/turn_reads")),
    ("composition", ("context/composer", "context/budget", "context/memory_section", "orchestration/context",
                     "infra/tokens", "tiktoken")),
    ("buffer", ("context/buffer", "context/anchors", "context/links", "context/compaction")),
    ("extraction", ("memory/extraction", "infra/secrets", "infra/sentences", "dateparser", "stdnum", "/regex/",
                    "memory/actions", "memory/user_lock")),
    ("outbox", ("memory/outbox", "memory/points")),
    ("loop bookkeeping", ("assistant/", "orchestration/messages", "sessions/services")),
    ("LLM client", ("infra/llm", "openai/", "httpx", "httpcore", "h11", "anyio", "pydantic", "respx", "ssl")),
    ("Celery hand-off", ("celery/", "kombu/", "orchestration/tasks")),
    ("Redis", ("redis/", "infra/redis_client")),
    ("ORM and SQL", ("django/db", "psycopg", "sessions/selectors", "memory/selectors", "models.py", "managers")),
    ("request, auth, serializers", ("rest_framework", "django/", "drf_spectacular", "infra/middleware", "tenants/",
                                    "infra/throttling", "infra/quotas", "infra/serializer_fields", "asgiref")),
    ("json", ("json/", "orjson")),
    ("logging", ("logging/",)),
]


def phase_of(filename: str, name: str) -> str:
    where = f"{filename}:{name}"
    for phase, marks in PHASES:
        if any(mark in where for mark in marks):
            return phase
    return "other (interpreter, stdlib)"


def summarise(profile: cProfile.Profile, per: int, top: int) -> dict:
    """CPU per phase: each function's own time goes to the phase of its module; the time of a builtin or standard
    library function (isinstance, copy, re) goes to the phases of its callers, in proportion to their calls' time."""
    stats = pstats.Stats(profile).stats
    resolved: dict = {}

    def phases_of(key, depth=0) -> dict[str, float]:
        if key in resolved:
            return resolved[key]
        filename, _line, name = key
        phase = phase_of(filename, name)
        if not phase.startswith("other") or depth > 30:
            resolved[key] = {phase: 1.0}
            return resolved[key]
        resolved[key] = {phase: 1.0}  # a cycle resolves to itself
        callers = stats[key][4] if key in stats else {}
        weights = {c: v[3] for c, v in callers.items() if c in stats}
        total = sum(weights.values())
        if total > 0:
            mix: dict[str, float] = collections.Counter()
            for caller, weight in weights.items():
                for p, share in phases_of(caller, depth + 1).items():
                    mix[p] += share * weight / total
            resolved[key] = dict(mix)
        return resolved[key]

    phases: dict[str, float] = collections.Counter()
    own, total = [], 0.0
    for key, (_cc, _nc, tt, ct, _callers) in stats.items():
        for p, share in phases_of(key).items():
            phases[p] += tt * share
        total += tt
        own.append((tt, ct, f"{_short(key[0])}:{key[1]}({key[2]})", key[0]))
    ours = [o for o in own if str(REPO) in o[3] and "/.venv/" not in o[3] and "bench/" not in o[3]]
    return {"total_ms": total / per * 1000,
            "phases": sorted(((p, t / per * 1000) for p, t in phases.items()), key=lambda x: -x[1]),
            "top_own": [(tt / per * 1000, label) for tt, _ct, label, _ in sorted(own, reverse=True)[:top]],
            "top_ours_cumulative": [(ct / per * 1000, label) for _tt, ct, label, _ in
                                    sorted(ours, key=lambda o: -o[1])[:top]]}


def _short(filename: str) -> str:
    for marker in ("/site-packages/", str(REPO) + "/", "/lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def report(title: str, summary: dict, extra: list[str]) -> None:
    print(f"\n== {title}: {summary['total_ms']:.1f} ms CPU per turn ==")
    for phase, ms in summary["phases"]:
        if ms >= 0.05:
            print(f"  {phase:<28} {ms:6.1f} ms  {ms / summary['total_ms']:5.1%}")
    print("  costliest functions, own time (ms per turn):")
    for ms, label in summary["top_own"]:
        print(f"    {ms:6.2f}  {label}")
    print("  costliest of Continuum's functions, with what they call (ms per turn):")
    for ms, label in summary["top_ours_cumulative"]:
        print(f"    {ms:6.2f}  {label}")
    for line in extra:
        print("  " + line)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=40)
    p.add_argument("--history", type=int, default=30, help="messages of the user's earlier session")
    p.add_argument("--llm-latency-ms", type=float, default=20.0)
    p.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL",
                                                            "postgres://postgres@127.0.0.1:5432/continuum_bench_profile"))
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--show-sql", action="store_true", help="print the statements of the last profiled turn")
    p.add_argument("--dump", help="write the raw profiles here (pstats format; the background's with .background)")
    p.add_argument("--quick", action="store_true", help="seconds, a few turns: checks the bench still runs")
    args = p.parse_args(argv)
    if args.quick:
        args.turns, args.history = 3, 5

    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "bench"))
    import load  # the load bench's stub, Redis servers and process handling

    workdir = Path(tempfile.mkdtemp(prefix="continuum-profile-"))
    procs = load.Processes()
    try:
        load._ensure_database(args.database_url)
        data_redis = load._redis_server(procs, workdir, "redis-data")
        broker_redis = load._redis_server(procs, workdir, "redis-broker")
        stub_port = load._free_port()
        stub_log = workdir / "llm-stub.jsonl"
        stub_log.touch()
        procs.start([sys.executable, str(REPO / "bench" / "load.py"), "--serve-stub", str(stub_port),
                     str(args.llm_latency_ms), str(stub_log)])
        os.environ.update({
            "DJANGO_SETTINGS_MODULE": "config.settings.local", "DATABASE_URL": args.database_url,
            "REDIS_URL": data_redis, "CELERY_BROKER_URL": broker_redis, "CONTINUUM_VAR_DIR": str(workdir / "var"),
            "QDRANT_EDGE_PATH": str(workdir / "var" / "qdrant-edge"), "QDRANT_URL": "",
            "REDIS_KEY_PREFIX": "profile", "LLM_BASE_URL": f"http://127.0.0.1:{stub_port}/v1", "LLM_MODEL": "stub",
            "LLM_API_KEY": "stub", "DJANGO_DEBUG": "0", "LOG_LEVEL": "WARNING", "CONTINUUM_EMBEDDED_WORKER": "0",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, check=True)
        return _run(args, stub_log, broker_redis, data_redis)
    finally:
        procs.stop_all()
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


def _run(args, stub_log: Path, broker_url: str, data_url: str) -> int:
    import concurrent.futures
    import json

    import django

    django.setup()
    import load
    import redis
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from infra import embedder as embedder_module
    from orchestration.messages import message_extract, messages_append
    from orchestration.sessions import session_close
    from sessions.services import NewMessage
    from tenants.services import apikey_create, tenant_create

    def embed_now(texts):
        done: concurrent.futures.Future = concurrent.futures.Future()
        try:
            done.set_result(embedder_module.get_embedder().embed(texts))
        except Exception as exc:  # noqa: BLE001 - handed to the caller as embed_soon does
            done.set_exception(exc)
        return done

    embedder_module.embed_soon = embed_now
    embedder_module.get_embedder().embed(["warm"])

    tenant = tenant_create(name="Profile", slug=f"profile-{uuid.uuid4().hex[:8]}", requests_per_minute=1_000_000,
                           tokens_per_minute=1_000_000_000)
    _, key = apikey_create(tenant=tenant, name="profile")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    user_id = client.post("/api/v1/users", {"external_id": f"u-{uuid.uuid4().hex[:6]}"},
                          content_type="application/json").json()["id"]

    # The user's history: an earlier session, extracted, closed (retrieval reads other sessions only).
    earlier = client.post("/api/v1/sessions", {"user_id": user_id}, content_type="application/json").json()["id"]
    rows = []
    for n in range(args.history):
        text = f"{load.SENTENCES[n % len(load.SENTENCES)]} (note {n})"
        rows += messages_append(tenant=tenant, session_id=earlier, enqueue_extraction=False,
                                items=[NewMessage(role="user", content=text),
                                       NewMessage(role="assistant", content=f"Noted, {n}.")])
    for row in rows:
        message_extract(tenant_id=tenant.pk, message_id=row.pk)
    session_close(tenant=tenant, session_id=earlier)
    _drain(broker_url)

    sid = client.post("/api/v1/sessions", {"user_id": user_id}, content_type="application/json").json()["id"]

    def turn(n: int):
        r = client.post(f"/api/v1/sessions/{sid}/turns", {"input": load.SENTENCES[n % len(load.SENTENCES)]},
                        content_type="application/json")
        assert r.status_code == 200, r.content[:300]

    for n in range(3):  # warm-up: the first turn of a session resolves links; caches fill
        turn(n)
    _run_queued(broker_url, tenant, message_extract)

    # The same turns without the profiler first: the CPU a turn really costs (cProfile inflates Python-heavy code),
    # the request path and then the background work it queued, each by the process's CPU clock (all its threads).
    cpu = time.process_time()
    for n in range(args.turns):
        turn(n + 3)
    cpu_turns = (time.process_time() - cpu) / args.turns
    cpu = time.process_time()
    _run_queued(broker_url, tenant, message_extract)
    cpu_background = (time.process_time() - cpu) / args.turns
    TASKS_RUN.clear()

    r = redis.Redis.from_url(data_url)
    calls_before = len(stub_log.read_text().splitlines())
    redis_before = _redis_calls(r)
    commands_before = _redis_commands(r)
    repeated = collections.Counter()
    statements = 0
    profile = cProfile.Profile(time.process_time)
    wall = time.perf_counter()
    for n in range(args.turns):
        with CaptureQueriesContext(connection) as queries:
            profile.enable()
            turn(args.turns + n + 3)
            profile.disable()
        statements += len(queries.captured_queries)
        last_statements = [q["sql"] for q in queries.captured_queries]
        seen = collections.Counter(q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper()
                                   .startswith("SELECT"))
        for sql, count in seen.items():
            if count > 1:
                repeated[sql[:150]] += count - 1
    wall = (time.perf_counter() - wall) / args.turns
    redis_turn = (_redis_calls(r) - redis_before) / args.turns
    commands = _redis_commands(r) - commands_before
    turn_calls = len(stub_log.read_text().splitlines()) - calls_before

    queued = _queued(broker_url)
    TASKS_RUN.clear()
    background = cProfile.Profile(time.process_time)
    calls_before = len(stub_log.read_text().splitlines())
    redis_before = _redis_calls(r)
    with CaptureQueriesContext(connection) as queries:
        background.enable()
        _run_queued(broker_url, tenant, message_extract)
        background.disable()
    bg_calls = [json.loads(line).get("schema") for line in stub_log.read_text().splitlines()[calls_before:]]
    redis_bg = (_redis_calls(r) - redis_before) / args.turns

    if args.show_sql:
        print("statements of the last turn:")
        for sql in last_statements:
            print(f"  {sql[:200]}")
        print("background statements per turn, by shape:")
        shapes = collections.Counter(_shape(q["sql"]) for q in queries.captured_queries)
        for shape, count in shapes.most_common(25):
            print(f"  {count / args.turns:5.2f}  {shape[:220]}")
    if args.dump:
        profile.dump_stats(args.dump)
        background.dump_stats(args.dump + ".background")
    print(f"{args.turns} turns after {args.history} messages of history; LLM stub {args.llm_latency_ms:.0f} ms; "
          f"wall {wall * 1000:.0f} ms per turn (stub included)")
    print(f"CPU per turn without the profiler: request path {cpu_turns * 1000:.1f} ms, background work it queued "
          f"{cpu_background * 1000:.1f} ms, together {(cpu_turns + cpu_background) * 1000:.1f} ms")
    report("request path (POST .../turns)", summarise(profile, args.turns, args.top), [
        f"SQL statements per turn {statements / args.turns:.1f}; Redis commands per turn {redis_turn:.1f}; "
        f"LLM calls per turn {turn_calls / args.turns:.2f}",
        "Redis commands per turn: " + ", ".join(f"{k} {v / args.turns:.1f}" for k, v in commands.most_common()),
        "SELECTs repeated within a turn (extra runs per turn):" if repeated else "no SELECT repeated within a turn"]
        + [f"  {c / args.turns:.1f}x  {sql}" for sql, c in repeated.most_common(8)])
    kinds = collections.Counter(bg_calls)
    report(f"background work queued by those turns ({queued} tasks)", summarise(background, args.turns, args.top), [
        f"SQL statements per turn {len(queries.captured_queries) / args.turns:.1f}; Redis commands per turn "
        f"{redis_bg:.1f}; LLM calls per turn {len(bg_calls) / args.turns:.2f} ({dict(kinds)})",
        f"tasks: {dict(TASKS_RUN)}"])
    return 0


def _shape(sql: str) -> str:
    """A statement with its literals and id lists elided, so repeats of one query count together."""
    sql = re.sub(r"'[^']*'", "?", sql)
    sql = re.sub(r"\b\d+(\.\d+)?\b", "?", sql)
    return re.sub(r"\((\?, )+\?\)", "(...)", sql)


def _redis_calls(r) -> int:
    return sum(_redis_commands(r).values())


def _redis_commands(r) -> collections.Counter:
    stats = r.info("commandstats")
    return collections.Counter({k[8:]: v["calls"] for k, v in stats.items()
                                if k not in ("cmdstat_info", "cmdstat_ping")})


def _queued(broker_url: str) -> int:
    import redis

    r = redis.Redis.from_url(broker_url)
    return sum(r.llen(q) for q in ("default", "llm", "maintenance", "celery"))


def _drain(broker_url: str) -> None:
    import redis

    r = redis.Redis.from_url(broker_url)
    for q in ("default", "llm", "maintenance", "celery"):
        r.delete(q)


TASKS_RUN: collections.Counter = collections.Counter()


def _run_queued(broker_url: str, tenant, message_extract) -> None:
    """Run what the turns queued, as a worker would: the tasks' own functions, in process, in order."""
    import base64
    import json

    import redis
    from celery import current_app

    r = redis.Redis.from_url(broker_url)
    for q in ("default", "llm", "maintenance", "celery"):
        while (raw := r.lpop(q)) is not None:
            envelope = json.loads(raw)
            name = envelope["headers"]["task"]
            body = json.loads(base64.b64decode(envelope["body"]))
            task_args, task_kwargs = body[0], body[1]
            TASKS_RUN[name.rsplit(".", 1)[-1]] += 1
            current_app.tasks[name](*task_args, **task_kwargs)


if __name__ == "__main__":
    sys.exit(main())
