"""GET /api/v1/users/{id}/memories/search: happy path, validation (4xx, never 500), ownership, store down."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest

from infra.vector_store import set_vector_store
from memory.actions import memory_create

pytestmark = pytest.mark.django_db(transaction=True)


def _url(user_id, **params):
    query = urlencode(params)
    return f"/api/v1/users/{user_id}/memories/search" + (f"?{query}" if query else "")


@pytest.fixture
def stored(alice, alice_user):
    return [memory_create(tenant=alice, user=alice_user, kind="preference", text="Ada prefers aisle seats."),
            memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada's home airport is SFO.")]


def test_search_returns_memories_with_provenance(alice_client, alice_user, stored):
    resp = alice_client.get(_url(alice_user.pk, q="which seat do I like?", k=5))
    assert resp.status_code == 200
    body = resp.json()
    assert body["query"] == "which seat do I like?"
    assert body["results"][0]["memory_id"] == str(stored[0].pk)
    first = body["results"][0]
    assert first["text"] == "Ada prefers aisle seats." and first["provenance"].startswith("you said on ")
    assert {"score", "kind", "source_type", "created_at", "token_count", "neighbours"} <= set(first)
    assert len(alice_client.get(_url(alice_user.pk, q="airport", k=1)).json()["results"]) == 1


@pytest.mark.parametrize("params", [
    {"q": ""}, {"q": "   "}, {}, {"q": "seats", "k": 0}, {"q": "seats", "k": 51}, {"q": "seats", "k": "ten"},
    {"q": "seats", "k": -3}, {"q": "x" * 2001}, {"q": "seats", "budget": 10}, {"q": "seats", "budget": "lots"},
])
def test_invalid_parameters_are_400(alice_client, alice_user, stored, params):
    resp = alice_client.get(_url(alice_user.pk, **params))
    assert resp.status_code == 400
    assert set(resp.json()["error"]) >= {"code", "message"}


def test_another_tenants_key_gets_404_and_nothing_leaks(bob_client, alice_user, stored):
    resp = bob_client.get(_url(alice_user.pk, q="aisle seats"))
    assert resp.status_code == 404
    assert "aisle" not in resp.content.decode()


def test_unknown_and_malformed_user_ids_are_404(alice_client):
    assert alice_client.get(_url("00000000-0000-0000-0000-000000000000", q="seats")).status_code == 404
    assert alice_client.get(_url("not-a-uuid", q="seats")).status_code == 404


def test_bob_searching_his_own_user_never_sees_alice(bob, bob_client, stored):
    from tenants.services import end_user_create

    bobs = end_user_create(tenant=bob, external_id="alice-user-1")
    resp = bob_client.get(_url(bobs.pk, q="aisle seats SFO"))
    assert resp.status_code == 200 and resp.json()["results"] == []


def test_without_key_is_refused(client, alice_user):
    assert client.get(_url(alice_user.pk, q="seats")).status_code in (401, 403)


def test_store_down_is_503(alice_client, alice_user, stored):
    class DownStore:
        backend_name = "down"

        def search(self, *args, **kwargs):
            raise ConnectionError("refused")

        search_batch = search

    set_vector_store(DownStore())
    try:
        resp = alice_client.get(_url(alice_user.pk, q="seats"))
    finally:
        set_vector_store(None)
    assert resp.status_code == 503
    assert resp.json()["error"]["code"] in ("service_unavailable", "vector_store_unavailable")
