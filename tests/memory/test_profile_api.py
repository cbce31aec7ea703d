"""GET /api/v1/users/{id}/profile: the standing profile with provenance, validation (4xx), ownership."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memory.actions import memory_create

pytestmark = pytest.mark.django_db


def _url(user_id, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/api/v1/users/{user_id}/profile" + (f"?{query}" if query else "")


@pytest.fixture
def stored(alice, alice_user):
    at = datetime(2024, 3, 1, tzinfo=timezone.utc)
    return [memory_create(tenant=alice, user=alice_user, kind="procedure", source_type="user_stated", created_at=at,
                          text="Ada asked the assistant: Always answer in metric units."),
            memory_create(tenant=alice, user=alice_user, kind="preference", source_type="user_stated", created_at=at,
                          text="Ada prefers aisle seats."),
            memory_create(tenant=alice, user=alice_user, kind="event", source_type="user_stated", created_at=at,
                          text="Ada: I went to the dentist.")]


def test_profile_lists_instructions_and_preferences_with_provenance(alice_client, alice_user, stored):
    resp = alice_client.get(_url(alice_user.pk))
    assert resp.status_code == 200, resp.content
    entries = resp.json()["entries"]
    assert [e["text"] for e in entries] == ["Ada asked the assistant: Always answer in metric units.",
                                            "Ada prefers aisle seats."]
    assert entries[0]["memory_id"] == str(stored[0].pk) and entries[0]["kind"] == "procedure"
    assert entries[0]["provenance"] == "you said on 1 March 2024"
    assert len(alice_client.get(_url(alice_user.pk, limit=1)).json()["entries"]) == 1


@pytest.mark.parametrize("limit", ["0", "101", "many", "-1"])
def test_invalid_limit_is_400(alice_client, alice_user, stored, limit):
    resp = alice_client.get(_url(alice_user.pk, limit=limit))
    assert resp.status_code == 400
    assert set(resp.json()["error"]) >= {"code", "message"}


def test_another_tenants_key_gets_404_and_nothing_leaks(bob_client, alice_user, stored):
    resp = bob_client.get(_url(alice_user.pk))
    assert resp.status_code == 404
    assert "metric" not in resp.content.decode()


def test_unknown_user_is_404(alice_client, stored):
    assert alice_client.get(_url("00000000-0000-0000-0000-000000000000")).status_code == 404
