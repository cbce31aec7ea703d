"""GET /api/v1/sessions/{id}/context: happy path, validation, ownership, and 503 while Redis is down."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from infra.tokens import count_message_tokens
from orchestration.messages import messages_append
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db(transaction=True)


def url(session_id, **params) -> str:
    from urllib.parse import urlencode

    return f"/api/v1/sessions/{session_id}/context" + (f"?{urlencode(params)}" if params else "")


def test_context_returns_messages_breakdown_and_budget(alice, alice_client, alice_session):
    messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False,
                    items=[NewMessage(role="user", content="I need a flight to Oslo on Friday."),
                           NewMessage(role="assistant", content="Found SAS at 9am for $210.")])
    r = alice_client.get(url(alice_session.pk, input="Is there a later one?", budget=2000))
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["session_id"] == str(alice_session.pk)
    assert body["messages"][-1] == {"role": "user", "content": "Is there a later one?"}
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
    assert body["total_tokens"] == count_message_tokens(body["messages"]) <= body["budget"] == 2000
    assert set(body["breakdown"]) == {"system", "profile", "bridge", "anchors", "state", "memories", "recent", "input"}
    assert body["memory_status"] == "ok" and body["first_turn"] is False
    assert body["goal"] == "I need a flight to Oslo on Friday."


def test_context_without_input_and_with_the_default_budget(alice_client, alice_session, settings):
    r = alice_client.get(url(alice_session.pk))
    assert r.status_code == 200
    assert r.json()["budget"] == settings.CONTINUUM_CONTEXT_BUDGET
    assert r.json()["first_turn"] is True


@pytest.mark.parametrize("params", [{"budget": "10"}, {"budget": "lots"}, {"budget": "-5"},
                                    {"budget": "99999999"}, {"input": "x" * 40_000}])
def test_context_validation_is_400(alice_client, alice_session, params):
    r = alice_client.get(url(alice_session.pk, **params))
    assert r.status_code == 400, r.content
    assert set(r.json()["error"]) == {"code", "message", "details"}


def test_unknown_or_repeated_query_parameters_are_400(alice_client, alice_session):
    assert alice_client.get(url(alice_session.pk, input="hi", mystery="1")).status_code == 400
    r = alice_client.get(f"/api/v1/sessions/{alice_session.pk}/context?input=a&input=b")
    assert r.status_code == 400 and r.json()["error"]["details"]["repeated"] == ["input"]
    assert alice_client.get(f"/api/v1/sessions/{alice_session.pk}/links?x=1").status_code == 400


def test_context_ownership(alice_session, bob_client):
    assert bob_client.get(url(alice_session.pk, input="hi")).status_code == 404
    assert bob_client.get(url("not-a-uuid")).status_code == 404
    assert bob_client.get(url("6b0c1f4e-0000-4000-8000-000000000000")).status_code == 404


def test_context_needs_a_key(alice_session):
    assert APIClient().get(url(alice_session.pk)).status_code == 401


def test_context_is_503_while_redis_is_down_and_recovers(alice, alice_client, alice_session, settings):
    from infra.redis_client import reset_pool

    original = settings.REDIS_URL
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    settings.CONTINUUM_QUOTA_FAIL_OPEN = True
    reset_pool()
    try:
        r = alice_client.post(f"/api/v1/sessions/{alice_session.pk}/messages", {"role": "user", "content": "kept"},
                              format="json")
        assert r.status_code == 201  # the database holds the message
        r = alice_client.get(url(alice_session.pk, input="hello"))
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "service_unavailable" and r["Retry-After"]
    finally:
        settings.REDIS_URL = original
        reset_pool()
    r = alice_client.get(url(alice_session.pk, input="hello"))
    assert r.status_code == 200
    assert [m["content"] for m in r.json()["messages"][1:]] == ["kept", "hello"]
