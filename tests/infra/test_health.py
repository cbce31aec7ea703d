"""Liveness and readiness: status and code for anyone; every dependency reported, a dead one named, with the token."""
from __future__ import annotations

import pytest
from django.test import Client

from infra.redis_client import reset_pool

TOKEN = "operator-token-for-tests-0123"


@pytest.fixture
def client(db):
    return Client()


@pytest.fixture
def operator(db, settings):
    """A client that sends the operator token /readyz shows its detail to."""
    settings.METRICS_TOKEN = TOKEN
    return Client(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")


@pytest.fixture
def dead_redis(settings):
    """REDIS_URL pointing at a port nothing listens on; the live URL and pool are back before other teardowns."""
    live = settings.REDIS_URL
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    reset_pool()
    yield
    settings.REDIS_URL = live
    reset_pool()


def test_healthz_answers_without_touching_dependencies(client, dead_redis):
    resp = client.get("/healthz")
    assert resp.status_code == 200
    assert resp.json() == {"status": "ok"}


def test_readyz_reports_every_component_ok(operator):
    resp = operator.get("/readyz")
    body = resp.json()
    assert resp.status_code == 200, body
    assert body["status"] == "ok"
    assert set(body["components"]) == {"database", "redis", "qdrant", "broker"}
    assert all(c["ok"] for c in body["components"].values())
    assert body["components"]["qdrant"]["backend"] == "edge"
    assert body["components"]["database"]["vendor"] == "postgresql"


def test_readyz_names_a_dead_redis_with_503(operator, dead_redis):
    resp = operator.get("/readyz")
    body = resp.json()
    assert resp.status_code == 503
    assert body["status"] == "degraded"
    assert body["components"]["redis"]["ok"] is False
    assert "error" in body["components"]["redis"]
    assert body["components"]["database"]["ok"] and body["components"]["qdrant"]["ok"]


def test_readyz_names_an_unavailable_vector_store(operator):
    from infra.vector_store import set_vector_store
    from infra.vector_store.base import VectorStoreError

    class Down:
        backend_name = "down"

        def health(self):
            raise VectorStoreError("Qdrant failed: ConnectError")

    set_vector_store(Down())
    resp = operator.get("/readyz")
    set_vector_store(None)
    body = resp.json()
    assert resp.status_code == 503
    assert body["components"]["qdrant"]["ok"] is False and "ConnectError" in body["components"]["qdrant"]["error"]
    assert body["components"]["redis"]["ok"] is True


def test_readyz_tells_the_public_only_the_status(client, dead_redis, settings, caplog):
    for token in ("", TOKEN):  # no token configured, and one configured but not sent (or sent wrong)
        settings.METRICS_TOKEN = token
        for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}):
            resp = client.get("/readyz", **headers)
            assert resp.status_code == 503
            assert resp.json() == {"status": "degraded"}
            assert b"127.0.0.1" not in resp.content and b"Error" not in resp.content
    assert "ConnectionError" in caplog.text  # the reason still reaches the operator, in the log


def test_readyz_public_answer_when_healthy_is_status_only(client):
    resp = client.get("/readyz")
    assert resp.status_code == 200 and resp.json() == {"status": "ok"}
