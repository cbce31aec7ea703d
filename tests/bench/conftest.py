"""What the bench tests share: a Redis server and a scratch PostgreSQL database for the benches they run."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import psycopg
import pytest
import redis


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
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
