"""The embedded topology's worker (threads of the web process) runs model-bound tasks side by side, so extraction
keeps up with a conversation instead of waiting for each model call in turn. A real child process hosts it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.proof.test_faults import ROOT, _database_url, broker  # noqa: F401  (broker: a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MODEL_SECONDS = 0.4

HOST = """
import sys, time
import django
django.setup()
from django.conf import settings
settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_MAX_RETRIES = sys.argv[1], "m", 0
settings.EMBEDDED_WORKER_CONCURRENCY = int(sys.argv[2])
from config.embedded_worker import start_embedded_worker
start_embedded_worker()
time.sleep(600)
"""


class SlowModel:
    """An OpenAI-compatible endpoint that answers every structured call with nothing after MODEL_SECONDS,
    recording when each call started and ended."""

    def __init__(self):
        self.calls: list[tuple[float, float, str]] = []  # start, end, the schema asked for
        lock = threading.Lock()
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_POST(self):
                t0 = time.monotonic()
                asked = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                schema = ((asked.get("response_format") or {}).get("json_schema") or {}).get("name", "")
                time.sleep(MODEL_SECONDS)
                body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                   "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                       "role": "assistant",
                                       "content": json.dumps({"stated": [], "implied": []})}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                with lock:
                    calls.append((t0, time.monotonic(), schema))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def most_at_once(self) -> int:
        edges = sorted([(t0, 1) for t0, _, _ in self.calls] + [(t1, -1) for _, t1, _ in self.calls])
        running = best = 0
        for _, step in edges:
            running += step
            best = max(best, running)
        return best

    def close(self):
        self.server.shutdown()


def test_embedded_worker_overlaps_the_model_calls_of_extractions(alice, tmp_path, broker, _redis_prefix):  # noqa: F811
    from django.conf import settings

    from orchestration.messages import messages_append
    from orchestration.sessions import session_open
    from sessions.models import Message
    from sessions.services import NewMessage
    from tenants.services import end_user_create

    model = SlowModel()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.proof.fault_settings", "DATABASE_URL": _database_url(),
           "CELERY_BROKER_URL": settings.CELERY_BROKER_URL, "REDIS_URL": settings.REDIS_URL,
           "REDIS_KEY_PREFIX": _redis_prefix, "QDRANT_EDGE_PATH": str(tmp_path / "edge"),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    log = open(tmp_path / "host.log", "w")
    host = subprocess.Popen([sys.executable, "-c", HOST, model.url, "4"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        sent = []
        for n in range(8):
            user = end_user_create(tenant=alice, external_id=f"embedded-{n}")
            session, _ = session_open(tenant=alice, user=user)
            sent += messages_append(tenant=alice, session_id=session.pk, items=[
                NewMessage(role="user", content=f"I am planning a trip to Lisbon with {n + 2} friends.")])
        pending = Message.objects.unscoped().filter(pk__in=[m.pk for m in sent], extracted_at__isnull=True)
        deadline = time.monotonic() + 120
        while pending.exists() and time.monotonic() < deadline and host.poll() is None:
            time.sleep(0.2)
        assert not pending.exists(), Path(tmp_path / "host.log").read_text()[-3000:]
    finally:
        os.killpg(host.pid, signal.SIGKILL)
        host.wait(timeout=10)
        model.close()
    # One extraction call per user message, all made; one task at a time would never have two under way.
    extraction = [name for _, _, name in model.calls if name == "message_memories"]
    assert len(extraction) == 8, (tmp_path / "host.log").read_text()[-3000:]
    assert model.most_at_once() >= 3
