"""Grounded turns through the service: a booking no tool made is dropped and reported, every turn and its closing
call see the standing profile, recall fills a budget, and the turn says which memories the answer used."""
from __future__ import annotations

import json

import pytest

from sessions.models import Message

from .scripted_llm import answer, call, tool_step

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(django_capture_on_commit_callbacks):
    from memory.actions import memory_create

    def _make(tenant, user, text, *, kind="preference", subject=""):
        with django_capture_on_commit_callbacks(execute=True):
            return memory_create(tenant=tenant, user=user, kind=kind, text=text, subject=subject)

    return _make


def turn(client, session, text):
    resp = client.post(f"/api/v1/sessions/{session.id}/turns", {"input": text}, format="json")
    assert resp.status_code == 200, resp.content
    return resp.json()


def test_a_turn_drops_a_booking_no_tool_made_and_reports_it(llm, alice_client, alice_session):
    llm.add(tool_step(call("set_goal", {"goal": "Fly SFO to Newark"})),
            answer("I booked a flight from SFO to Newark. Your goal is set."))
    body = turn(alice_client, alice_session, "Get me to Newark.")
    assert body["reply"] == "Your goal is set."
    assert body["grounding"] == [{"sentence": "I booked a flight from SFO to Newark.", "replaced_by": ""}]
    assert Message.objects.unscoped().filter(session=alice_session, role="assistant").last().content == \
        "Your goal is set."


def test_every_turn_sees_the_standing_profile(llm, stored, alice, alice_user, alice_client, alice_session):
    stored(alice, alice_user, "Ada prefers aisle seats.")
    llm.add(answer("Hello."))
    turn(alice_client, alice_session, "What's the weather like on Mars?")
    system = "\n".join(m["content"] for m in llm.requests[0]["messages"] if m["role"] == "system")
    assert "standing profile" in system.lower() and "Ada prefers aisle seats." in system


def test_an_answer_left_empty_gets_the_closing_call_with_the_profile(llm, stored, alice, alice_user, alice_client,
                                                                    alice_session):
    stored(alice, alice_user, "Ada never flies United.")
    llm.add(answer("I have booked your flight."), answer("Remember: you never fly United."))
    body = turn(alice_client, alice_session, "Anything I should know?")
    closing = llm.requests[-1]
    assert not closing.get("tools")
    assert "Ada never flies United." in closing["messages"][-1]["content"]
    assert body["reply"] == "Remember: you never fly United."
    assert [m["text"] for m in body["memories_used"]] == ["Ada never flies United."]


def test_when_nothing_survives_the_answer_is_built_from_the_profile(llm, stored, alice, alice_user, alice_client,
                                                                  alice_session):
    stored(alice, alice_user, "Ada prefers aisle seats.")
    llm.add(answer("I booked it."), answer("I have sent the ticket."))
    body = turn(alice_client, alice_session, "What should I know about my seats?")
    assert "booked" not in body["reply"] and "sent" not in body["reply"]
    assert "Ada prefers aisle seats." in body["reply"]


def test_recall_returns_what_fits_its_budget_not_the_k_asked_for(llm, stored, alice, alice_user, alice_client,
                                                               alice_session):
    texts = ["Ada's destination is Newark.", "Ada prefers aisle seats.", "Ada never flies United.",
             "Ada's budget is at most $400.", "Ada's origin is SFO.", "Ada flies next Tuesday."]
    for text in texts:
        stored(alice, alice_user, text, kind="fact")
    llm.add(tool_step(call("recall", {"query": "Ada's flight", "k": 1}, "r")),
            answer("You are flying to Newark. You prefer aisle seats and never fly United."))
    body = turn(alice_client, alice_session, "Which flight, and what should I keep in mind?")
    observed = next(json.loads(m["content"]) for m in llm.requests[1]["messages"] if m.get("tool_call_id") == "r")
    assert {m["text"] for m in observed["memories"]} == set(texts)
    used = {m["text"] for m in body["memories_used"]}
    assert {"Ada's destination is Newark.", "Ada prefers aisle seats.", "Ada never flies United."} <= used
    assert "Ada's budget is at most $400." not in used


def test_the_closing_call_is_told_which_claim_was_removed(llm, alice_client, alice_session):
    llm.add(answer("I changed the destination to Newark."), answer("Understood: Newark instead of NYC."))
    body = turn(alice_client, alice_session, "Actually, change the destination to Newark.")
    note = llm.requests[-1]["messages"][-1]["content"]
    assert '"I changed the destination to Newark."' in note and "do not say it again" in note
    assert body["reply"] == "Understood: Newark instead of NYC."


def test_a_request_whose_only_answer_was_a_false_claim_is_acknowledged(llm, stored, alice, alice_user, alice_client,
                                                                       alice_session):
    stored(alice, alice_user, "Ada's destination is NYC.", kind="fact")
    llm.add(answer("I changed the destination to Newark."), answer("I have updated the destination to Newark."))
    body = turn(alice_client, alice_session, "Actually, change the destination to Newark.")
    assert body["reply"] == "Understood."
