"""Liveness and readiness: every dependency reported, and a dead one named with a 503."""
from __future__ import annotations

import pytest
from django.test import Client

from infra.redis_client import reset_pool


@pytest.fixture
def client(db):
    return Client()


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


def test_readyz_reports_every_component_ok(client):
    resp = client.get("/readyz")
    body = resp.json()
    assert resp.status_code == 200, body
    assert body["status"] == "ok"
    assert set(body["components"]) == {"database", "redis", "qdrant", "broker"}
    assert all(c["ok"] for c in body["components"].values())
    assert body["components"]["qdrant"]["backend"] == "edge"
    assert body["components"]["database"]["vendor"] == "postgresql"


def test_readyz_names_a_dead_redis_with_503(client, dead_redis):
    resp = client.get("/readyz")
    body = resp.json()
    assert resp.status_code == 503
    assert body["status"] == "degraded"
    assert body["components"]["redis"]["ok"] is False
    assert "error" in body["components"]["redis"]
    assert body["components"]["database"]["ok"] and body["components"]["qdrant"]["ok"]


def test_readyz_names_an_unavailable_vector_store(client):
    from infra.vector_store import set_vector_store
    from infra.vector_store.base import VectorStoreError

    class Down:
        backend_name = "down"

        def health(self):
            raise VectorStoreError("Qdrant failed: ConnectError")

    set_vector_store(Down())
    resp = client.get("/readyz")
    set_vector_store(None)
    body = resp.json()
    assert resp.status_code == 503
    assert body["components"]["qdrant"]["ok"] is False and "ConnectError" in body["components"]["qdrant"]["error"]
    assert body["components"]["redis"]["ok"] is True
