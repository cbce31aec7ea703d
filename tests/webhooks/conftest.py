"""Fixtures for the webhook tests: a real HTTP receiver in a thread that verifies signatures with the documented
function, and a queue standing in for the broker, so the tests run the delivery task the way a worker would."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import TestCase

from tests.sessions.conftest import WordHashEmbedder
from webhooks.signing import WebhookVerificationError, webhook_verify


class Receiver:
    """Answers POSTs with the statuses in `script` (then 200), after `delay` seconds, and records each request:
    its headers, its body, and whether the signature verified with `secret` (a bad one is answered 400)."""

    def __init__(self):
        self.requests: list[dict] = []
        self.script: list[int] = []
        self.delay = 0.0
        self.secrets: list[str] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                verified = []
                for secret in receiver.secrets:
                    try:
                        webhook_verify(secret=secret, headers=headers, body=body)
                        verified.append(secret)
                    except WebhookVerificationError:
                        pass
                with receiver.lock:
                    status = receiver.script.pop(0) if receiver.script else 200
                    receiver.requests.append({"headers": headers, "body": body, "verified": verified,
                                              "path": self.path})
                if receiver.delay:
                    time.sleep(receiver.delay)
                if receiver.secrets and not verified:
                    status = 400
                self.send_response(status)
                self.send_header("content-type", "text/plain")
                self.end_headers()
                self.wfile.write(f"answered {status}".encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/continuum"

    def payloads(self) -> list[dict]:
        return [json.loads(r["body"]) for r in self.requests]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class TaskQueue:
    """The broker, in order of due time: what `delay` and `apply_async(countdown=)` queue, run by `run()` with
    the arguments round-tripped through JSON as a worker receives them."""

    def __init__(self, task):
        self.task = task
        self.items: list[tuple[float, tuple]] = []
        self.countdowns: list[float] = []

    def delay(self, *args):
        self.items.append((time.monotonic(), args))

    def apply_async(self, args=(), kwargs=None, countdown=0, **options):
        self.countdowns.append(countdown)
        self.items.append((time.monotonic() + countdown, tuple(args)))

    def run(self, limit: int = 50) -> list[str]:
        results = []
        while self.items and len(results) < limit:
            self.items.sort(key=lambda item: item[0])
            due, args = self.items.pop(0)
            time.sleep(max(0.0, due - time.monotonic()))
            # As in a worker, the task's own transactions commit and their after-commit work runs.
            with TestCase.captureOnCommitCallbacks(execute=True):
                results.append(self.task.apply(args=json.loads(json.dumps(args)), throw=True).get())
        return results


@pytest.fixture(autouse=True)
def word_embedder():
    """Memory writes reach the vector outbox after commit; a small embedder keeps the model out of these tests."""
    from infra.embedder import set_embedder

    set_embedder(WordHashEmbedder())
    yield
    set_embedder(None)


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # the receiver listens on loopback
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def task_queue(monkeypatch, settings):
    from webhooks.tasks import webhook_deliver_task

    settings.WEBHOOK_RETRY_BASE_SECONDS = 0.05  # real backoff, in milliseconds
    settings.WEBHOOK_RETRY_MAX_SECONDS = 0.2
    queue = TaskQueue(webhook_deliver_task)
    monkeypatch.setattr(webhook_deliver_task, "delay", queue.delay)
    monkeypatch.setattr(webhook_deliver_task, "apply_async", queue.apply_async)
    return queue


@pytest.fixture
def endpoint_for(receiver):
    """An endpoint of `tenant` pointed at the receiver, whose secret the receiver verifies with."""
    from webhooks.services import webhook_endpoint_create

    def _make(tenant, **kwargs):
        endpoint, secret = webhook_endpoint_create(tenant=tenant, url=receiver.url, **kwargs)
        receiver.secrets.append(secret)
        endpoint.plain_secret = secret
        return endpoint

    return _make
