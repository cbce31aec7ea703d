"""Session links (same_user, similar_goal, referenced_context), their API, and bridges on the first turn."""
from __future__ import annotations

import pytest

from context.links import reference_in
from context.models import SessionLink
from orchestration.context import turn_context
from orchestration.messages import messages_append
from orchestration.sessions import session_close, session_open
from orchestration.sessions import session_finish as _session_finish
from sessions.models import Session
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _quiet(settings, extract_calls, bridge_calls):
    # The word-hash test embedder scores lower than MiniLM; thresholds scaled to it.
    settings.CONTINUUM_LINK_SIMILARITY_THRESHOLD = 0.3
    settings.CONTINUUM_LINK_REFERENCE_THRESHOLD = 0.2


def chat(tenant, session, *texts):
    for text in texts:
        messages_append(tenant=tenant, session_id=session.pk, enqueue_extraction=False,
                        items=[NewMessage(role="user", content=text)])


def past_session(tenant, user, *texts) -> Session:
    session, _ = session_open(tenant=tenant, user=user)
    chat(tenant, session, *texts)
    session_close(tenant=tenant, session_id=session.pk)
    _session_finish(tenant_id=session.tenant_id, session_id=session.pk)
    return session


@pytest.fixture
def history(alice, alice_user):
    lisbon = past_session(alice, alice_user, "I need a flight to Lisbon in May, under $500.",
                          "Let's go with the TAP flight.")
    tokyo = past_session(alice, alice_user, "I am looking for a quiet hotel in Tokyo near Shinjuku.",
                         "Is breakfast included at the hotel?")
    groceries = past_session(alice, alice_user, "Help me plan a weekly grocery list for a vegetarian diet.")
    return {"lisbon": lisbon, "tokyo": tokyo, "groceries": groceries}


def kinds(session) -> dict[str, str]:
    return {link.kind: str(link.to_session_id) for link in SessionLink.objects.unscoped().filter(from_session=session)}


def test_reference_phrases():
    assert reference_in("Book it like last time") == (True, [])
    hit, words = reference_in("Can you rebook the flight we discussed?")
    assert hit and words == ["flight"]
    assert reference_in("Remember the hotel in Tokyo?")[0]
    assert reference_in("I need a hotel in Paris.") == (False, [])


def test_a_new_session_links_to_the_previous_one(alice, alice_user, history):
    session, _ = session_open(tenant=alice, user=alice_user)
    assert kinds(session) == {"same_user": str(history["groceries"].pk)}


def test_first_message_links_a_similar_goal(alice, alice_user, history):
    session, _ = session_open(tenant=alice, user=alice_user)
    chat(session.tenant, session, "I need a flight to Lisbon in June.")
    links = kinds(session)
    assert links["similar_goal"] == str(history["lisbon"].pk)
    assert "referenced_context" not in links
    # only the first user message looks for links
    chat(session.tenant, session, "Actually, what about a quiet hotel in Tokyo near Shinjuku?")
    assert kinds(session) == links


def test_first_message_links_the_referenced_session(alice, alice_user, history):
    session, _ = session_open(tenant=alice, user=alice_user)
    chat(session.tenant, session, "Can you check again on the hotel we discussed?")
    assert kinds(session)["referenced_context"] == str(history["tokyo"].pk)


def test_like_last_time_refers_to_the_latest_session(alice, alice_user, history):
    session, _ = session_open(tenant=alice, user=alice_user)
    chat(session.tenant, session, "Same as last time please.")
    assert kinds(session)["referenced_context"] == str(history["groceries"].pk)


def test_no_links_to_other_users_or_tenants(alice, alice_user, bob, history):
    from tenants.services import end_user_create

    other = end_user_create(tenant=alice, external_id="someone-else")
    session, _ = session_open(tenant=alice, user=other)
    chat(alice, session, "I need a flight to Lisbon in May, under $500.")
    assert kinds(session) == {}
    bob_user = end_user_create(tenant=bob, external_id="bob-user")
    bob_session, _ = session_open(tenant=bob, user=bob_user)
    chat(bob, bob_session, "I need a flight to Lisbon in May, like last time.")
    assert kinds(bob_session) == {}


def test_the_linked_bridges_are_injected_on_the_first_turn_only(alice, alice_user, history):
    session, _ = session_open(tenant=alice, user=alice_user)
    # asked before the first message is stored: links are worked out on the fly
    ctx = turn_context(tenant=alice, session=session, new_input="Rebook the flight we discussed, to Lisbon",
                          include_memories=False)
    assert ctx.first_turn
    system = ctx.messages[0]["content"]
    assert "## Where earlier sessions left off" in system and "Lisbon" in system
    assert [b.kind for b in ctx.bridges][:1] == ["referenced_context"]
    assert ctx.bridges[0].session_id == str(history["lisbon"].pk)
    assert {b.session_id for b in ctx.bridges} >= {str(history["groceries"].pk)}  # same_user too
    assert ctx.breakdown["bridge"] > 0

    chat(alice, session, "Rebook the flight we discussed, to Lisbon")
    messages_append(tenant=alice, session_id=session.pk, enqueue_extraction=False,
                    items=[NewMessage(role="assistant", content="Sure.")])
    session.refresh_from_db()
    later = turn_context(tenant=alice, session=session, new_input="Thanks", include_memories=False)
    assert not later.first_turn and later.breakdown["bridge"] == 0
    assert "Where earlier sessions left off" not in later.messages[0]["content"]


def test_links_api_lists_links_with_bridges(alice, alice_client, alice_user, history):
    session, _ = session_open(tenant=alice, user=alice_user)
    chat(alice, session, "I need a flight to Lisbon in June.")
    r = alice_client.get(f"/api/v1/sessions/{session.pk}/links")
    assert r.status_code == 200, r.content
    rows = r.json()["links"]
    assert {(x["kind"], x["session_id"], x["direction"]) for x in rows} == {
        ("same_user", str(history["groceries"].pk), "out"), ("similar_goal", str(history["lisbon"].pk), "out")}
    lisbon = next(x for x in rows if x["kind"] == "similar_goal")
    assert lisbon["bridge"]["text"].startswith("Goal: I need a flight to Lisbon")
    # the older session sees the link coming in
    r = alice_client.get(f"/api/v1/sessions/{history['lisbon'].pk}/links")
    assert ("similar_goal", str(session.pk), "in") in {(x["kind"], x["session_id"], x["direction"])
                                                       for x in r.json()["links"]}


def test_links_api_ownership(alice, alice_user, bob_client, history):
    sid = history["tokyo"].pk
    assert bob_client.get(f"/api/v1/sessions/{sid}/links").status_code == 404
    assert bob_client.get("/api/v1/sessions/not-a-uuid/links").status_code == 404
    assert bob_client.get("/api/v1/sessions/6b0c1f4e-0000-4000-8000-000000000000/links").status_code == 404


def test_links_api_needs_a_key(history):
    from rest_framework.test import APIClient

    assert APIClient().get(f"/api/v1/sessions/{history['tokyo'].pk}/links").status_code == 401
