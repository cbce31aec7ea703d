"""Shared fixtures: tenants Alice and Bob plus an outsider, API clients, real Redis with a per-test prefix."""
from __future__ import annotations

import os
import uuid

import pytest
from rest_framework.test import APIClient

from tests.live_server import serving

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _redis_prefix(settings):
    """Each test writes under its own Redis prefix and removes what it wrote."""
    from infra.redis_client import get_redis

    prefix = f"t{uuid.uuid4().hex[:12]}"
    settings.REDIS_KEY_PREFIX = prefix
    yield prefix
    r = get_redis()
    keys = list(r.scan_iter(match=f"{prefix}:*", count=500))
    if keys:
        r.delete(*keys)


@pytest.fixture(autouse=True)
def _vector_store_isolation(tmp_path, settings):
    """A fresh Qdrant Edge shard per test, in a temporary folder."""
    from infra.vector_store import reset_vector_store

    settings.QDRANT_EDGE_PATH = tmp_path / "edge"
    reset_vector_store()
    yield
    reset_vector_store()


@pytest.fixture(scope="session")
def asgi_server(django_db_setup):
    """uvicorn serving the deployed ASGI application (config.asgi: Django with /mcp beside it) on a real socket in a
    thread of this process, on the test database. One server for the run: config.asgi builds one application, and
    the SDK's session manager in it can run (its ASGI lifespan) only once."""
    from django.db import connections

    from config.asgi import application

    with serving(application, lifespan="on", start_seconds=30) as url:
        yield url
    # The request threads keep their database connections open (that is their point); close them before the test
    # database is dropped.
    for executor in application._free:
        executor.submit(connections.close_all).result()


@pytest.fixture
def make_tenant(db):
    from tenants.services import apikey_create, tenant_create

    def _make(name: str, **kwargs):
        tenant = tenant_create(name=name, slug=f"{name.lower()}-{uuid.uuid4().hex[:6]}", **kwargs)
        _, key = apikey_create(tenant=tenant, name="test")
        tenant.plain_key = key
        return tenant

    return _make


@pytest.fixture
def alice(make_tenant):
    return make_tenant("Alice")


@pytest.fixture
def bob(make_tenant):
    """The outsider tenant: every ownership test asks Bob for Alice's objects."""
    return make_tenant("Bob")


def client_for(tenant) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant.plain_key}")
    return client


@pytest.fixture
def alice_client(alice):
    return client_for(alice)


@pytest.fixture
def bob_client(bob):
    return client_for(bob)


@pytest.fixture
def alice_user(alice):
    from tenants.services import end_user_create

    return end_user_create(tenant=alice, external_id="alice-user-1", display_name="Ada")


@pytest.fixture
def alice_session(alice, alice_user):
    from orchestration.sessions import session_open

    session, _ = session_open(tenant=alice, user=alice_user)
    return session
