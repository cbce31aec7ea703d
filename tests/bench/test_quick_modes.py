"""Every benchmark runs: each bench/*.py in its --quick mode (tiny data shipped in the repository), as its own process
the way a developer starts it, must exit 0 and print its figures. Nothing else imports the benches, so without this
one could stop importing or running unnoticed while docs/benchmarks.md quotes it.

Each run gets a Redis server of its own on a spare port (bulk_import purges its broker) and a scratch PostgreSQL
database (bulk_import and load need one); the benches that default to SQLite keep it. The embedder's ONNX export is
made once for all of them.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import redis

REPO = Path(__file__).resolve().parents[2]
BENCHES = sorted(p.name for p in (REPO / "bench").glob("*.py"))
# What each quick run must print: its figures, as numbers.
FIGURES = {
    "answers.py": [r"answers, locomo set .*: 4 questions", r"answers, product set .*: 4 questions",
                   r"\ncontinuum\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\n",
                   r"\noracle \(evidence turns\)\s+[\d.]+\s+[\d.]+\s+[\d.]+",
                   r"F1 continuum/oracle (?:[\d.]+|n/a), F1 continuum/dense (?:[\d.]+|n/a)"],
    "buffer.py": [r"\n\s+10\s+[\d.]+ms\s+[\d.]+ms", r"at \d+ turns: composed \d+ tokens vs transcript \d+"],
    "bulk_import.py": [r"bulk import figure: 48 messages in [\d.]+ s \([\d.]+ messages/s"],
    "extraction.py": [r'"rules": \{[^}]*"gold_recall": [\d.]+'],
    "load.py": [r"errors\s+0 \(", r"throughput\s+[\d.]+ turns/s", r"non-LLM overhead\s+p50 \d+ ms"],
    "locomo.py": [r"\d+ questions", r"recall@10\s+[\d.]+\s+[\d.]+", r"retrieval p50 / p95 \(ms\)\s+[\d.]+ /"],
    "receipts.py": [r'"receipts_on": \{\s*"p50_ms": [\d.]+', r'"p50_delta_ms": -?[\d.]+'],
    "scale.py": [r"big user\n\s+hybrid \(the store's own fusion, k 10\)\s+p50/p95\s+[\d.]+ /\s+[\d.]+ ms",
                 r"with the query's embedding, as retrieval runs them\s+p50/p95\s+[\d.]+ /\s+[\d.]+ ms.*"
                 r"p95 ratio [\d.]+x"],
    "turn_profile.py": [r"SQL statements per turn [\d.]+", r"LLM calls per turn [\d.]+"],
    "product_set.py": [r'"conversations": \d+, "sessions_min": \d+, "messages": \d+', r'"questions": \d+'],
    "vector_store.py": [r"qdrant-edge\s+dense\s+20\s+[\d.]+", r"p50 ratio local/edge: dense [\d.]+x"],
}
SCRATCH_DATABASE = ("bulk_import.py", "load.py", "turn_profile.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def bench_env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    port = _free_port()
    server = subprocess.Popen([shutil.which("redis-server"), "--bind", "127.0.0.1", "--port", str(port), "--save",
                               "", "--appendonly", "no", "--dir", str(folder)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis.from_url(url, socket_connect_timeout=0.2).ping()
            break
        except redis.exceptions.ConnectionError:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.05)
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/continuum").rsplit("/", 1)[0]
    scratch = f"continuum_quickbench_{port}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{scratch}"')
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}  # each bench picks its own
    env.update({"REDIS_URL": f"{url}/0", "CELERY_BROKER_URL": f"{url}/1", "EMBEDDING_CACHE_DIR": str(folder / "models"),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    try:
        yield env, f"{base}/{scratch}"
    finally:
        server.kill()
        server.wait(timeout=10)
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')


def test_every_bench_has_its_figures_checked():
    assert BENCHES and set(BENCHES) == set(FIGURES), "a new bench needs a --quick mode and its figures named here"


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("bench", BENCHES)
def test_quick_mode_runs_and_prints_its_figures(bench, bench_env):
    env, database_url = bench_env
    argv = [sys.executable, str(REPO / "bench" / bench), "--quick"]
    if bench in SCRATCH_DATABASE:
        argv += ["--database-url", database_url]
    started = time.monotonic()
    run = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=540)
    output = run.stdout + run.stderr
    print(f"\n{bench} --quick: exit {run.returncode} in {time.monotonic() - started:.0f} s\n{run.stdout[-1500:]}")
    assert run.returncode == 0, output[-4000:]
    for figure in FIGURES[bench]:
        assert re.search(figure, run.stdout), f"{bench} --quick did not print {figure!r}:\n{run.stdout[-3000:]}"
