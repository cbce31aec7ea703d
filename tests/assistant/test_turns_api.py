"""POST /api/v1/sessions/{id}/turns: the turn service end to end with a scripted model (respx at HTTP level)."""
from __future__ import annotations

import json

import pytest

from assistant.history import history_problems
from sessions.models import Message

from .scripted_llm import answer, call, tool_step

pytestmark = pytest.mark.django_db

TOOL_NAMES = {"recall", "remember", "forget", "update_notes", "set_goal", "complete_subgoal"}


def turns_url(session_id) -> str:
    return f"/api/v1/sessions/{session_id}/turns"


def history_of(session) -> list[dict]:
    """The session's stored transcript as a chat API would receive it."""
    out = []
    for m in Message.objects.unscoped().filter(session=session).order_by("seq"):
        message = {"role": m.role, "content": m.content}
        if m.role == "assistant" and m.tool_calls:
            message["tool_calls"] = m.tool_calls
        if m.role == "tool":
            message["tool_call_id"] = m.tool_call_id
        out.append(message)
    return out


def assert_valid_history(session):
    history = history_of(session)
    assert history_problems(history) == []
    assert history[-1]["role"] == "assistant" and not history[-1].get("tool_calls")
    return history


def observation(request: dict, call_id: str) -> dict:
    return json.loads(next(m["content"] for m in request["messages"] if m.get("tool_call_id") == call_id))


def make_memory(tenant, user, text, *, kind="preference", source_type="user_stated"):
    from memory.actions import memory_create

    return memory_create(tenant=tenant, user=user, kind=kind, text=text, source_type=source_type)


@pytest.fixture
def stored(django_capture_on_commit_callbacks):
    """Create memories with their after-commit work (the vector write) applied, as in production."""

    def _make(*args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            result = make_memory(*args, **kwargs)
        return result[0] if isinstance(result, tuple) else result

    return _make


# --- without an LLM -------------------------------------------------------------------------------------------------

def test_without_an_llm_turns_are_503_and_the_memory_service_still_works(alice_client, alice_session):
    resp = alice_client.post(turns_url(alice_session.id), {"input": "Find me a flight."}, format="json")
    assert resp.status_code == 503
    assert resp.json()["error"]["code"] == "llm_not_configured"
    assert Message.objects.unscoped().filter(session=alice_session).count() == 0  # nothing half-recorded

    resp = alice_client.post(f"/api/v1/sessions/{alice_session.id}/messages",
                             {"role": "user", "content": "Find me a flight."}, format="json")
    assert resp.status_code == 201
    resp = alice_client.get(f"/api/v1/sessions/{alice_session.id}/context", {"input": "Any news?"})
    assert resp.status_code == 200


# --- the loop through the service -----------------------------------------------------------------------------------

def test_a_turn_records_input_and_answer(llm, alice_client, alice_session):
    llm.add(answer("Hello Ada, where to?"))
    resp = alice_client.post(turns_url(alice_session.id), {"input": "Hi, I need a flight."}, format="json")
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["reply"] == "Hello Ada, where to?" and body["stop_reason"] == "answer" and body["steps"] == 1
    assert body["breakdown"]["system"] > 0 and body["total_tokens"] <= body["budget"]
    history = assert_valid_history(alice_session)
    assert [(m["role"], m["content"]) for m in history] == [("user", "Hi, I need a flight."),
                                                            ("assistant", "Hello Ada, where to?")]
    sent = llm.requests[0]
    assert {t["function"]["name"] for t in sent["tools"]} == TOOL_NAMES
    assert sent["messages"][-1] == {"role": "user", "content": "Hi, I need a flight."}
    assert sum(1 for m in sent["messages"] if m["content"] == "Hi, I need a flight.") == 1


def test_a_turn_retried_after_a_model_failure_records_its_input_once(llm, alice_client, alice_session, settings):
    import httpx

    settings.LLM_MAX_RETRIES = 0
    llm.add(httpx.Response(503, json={"error": {"message": "overloaded"}}), answer("Lisbon it is."))
    failed = alice_client.post(turns_url(alice_session.id), {"input": "Book me to Lisbon."}, format="json")
    assert failed.status_code == 503, failed.content
    retried = alice_client.post(turns_url(alice_session.id), {"input": "Book me to Lisbon."}, format="json")
    assert retried.status_code == 200, retried.content
    assert [(m["role"], m["content"]) for m in assert_valid_history(alice_session)] == [
        ("user", "Book me to Lisbon."), ("assistant", "Lisbon it is.")]
    # The model saw the input once, as the new turn; the next turn with the same words after an answer is new.
    assert sum(1 for m in llm.requests[-1]["messages"] if m["content"] == "Book me to Lisbon.") == 1
    llm.add(answer("Again: Lisbon."))
    assert alice_client.post(turns_url(alice_session.id), {"input": "Book me to Lisbon."}, format="json")\
        .status_code == 200
    assert [m["role"] for m in assert_valid_history(alice_session)] == ["user", "assistant", "user", "assistant"]


def test_a_turn_makes_no_query_rewrite_call_while_the_context_endpoint_does(llm, alice_client, alice_session,
                                                                         settings):
    """Assistant mode searches with the input as typed (the model has recall for its own queries): one model round
    trip per answer, not two. The memory-service context endpoint still rewrites when an LLM is configured."""
    settings.MEMORY_QUERY_REWRITE = True
    llm.add(answer("Noted."))
    resp = alice_client.post(turns_url(alice_session.id), {"input": "Book it like last time."}, format="json")
    assert resp.status_code == 200, resp.content
    assert len(llm.requests) == 1
    assert [r for r in llm.structured_requests if r["response_format"]["json_schema"]["name"] == "memory_query"] == []

    resp = alice_client.get(f"/api/v1/sessions/{alice_session.id}/context", {"input": "Which seat did I want?"})
    assert resp.status_code == 200
    rewrites = [r for r in llm.structured_requests if r["response_format"]["json_schema"]["name"] == "memory_query"]
    assert len(rewrites) == 1 and "Which seat did I want?" in rewrites[0]["messages"][-1]["content"]


def test_parallel_tool_calls_in_one_step_all_run_and_land_in_the_buffer(llm, alice, alice_user, alice_client,
                                                                        alice_session):
    from context.buffer import buffer_get

    llm.add(tool_step(call("set_goal", {"goal": "Book SFO to Newark", "subgoals": ["find flights under $400"]}, "g"),
                      call("update_notes", {"key_findings": ["budget is $400"]}, "n"),
                      call("recall", {"query": "seat preference"}, "r")),
            answer("Looking for flights under $400."))
    resp = alice_client.post(turns_url(alice_session.id), {"input": "Book me SFO to Newark under $400."},
                             format="json")
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert [(c["name"], c["status"], c["step"]) for c in body["tool_calls"]] == [
        ("set_goal", "ok", 1), ("update_notes", "ok", 1), ("recall", "ok", 1)]
    second = llm.requests[1]["messages"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == ["g", "n", "r"]
    buffer = buffer_get(tenant_id=alice.pk, user_id=alice_user.pk, session_id=alice_session.pk)
    assert buffer.goal == "Book SFO to Newark"
    assert buffer.open_subgoals == ["find flights under $400"]
    assert buffer.notes["key_findings"] == ["budget is $400"]
    assert {t["tool"] for t in buffer.tools} == {"set_goal", "update_notes", "recall"}
    history = assert_valid_history(alice_session)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "tool", "assistant"]


def test_a_looping_model_is_stopped_by_detection(llm, alice_client, alice_session):
    llm.then = lambda body: (answer("I keep finding the same thing: nothing stored.")
                             if not body.get("tools") else tool_step(call("recall", {"query": "flight"})))
    resp = alice_client.post(turns_url(alice_session.id), {"input": "What did I say about flights?", "max_steps": 10},
                             format="json")
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["stop_reason"] == "loop_detected"
    assert body["reply"] == "I keep finding the same thing: nothing stored."
    assert [c["status"] for c in body["tool_calls"]] == ["ok", "repeated", "repeated"]
    assert len(llm.requests) == 4 and not llm.requests[-1].get("tools")
    assert_valid_history(alice_session)


def test_a_tool_error_becomes_an_observation_the_model_recovers_from(llm, alice_client, alice_session):
    def recover(body):
        assert "error" in observation(body, "bad")
        return tool_step(call("recall", {"query": "United"}, "ok"))

    llm.add(tool_step(call("forget", {"memory_id": "not-an-id"}, "bad")), recover, answer("Nothing to forget."))
    resp = alice_client.post(turns_url(alice_session.id), {"input": "Forget what I said about United."},
                             format="json")
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["stop_reason"] == "answer" and body["reply"] == "Nothing to forget."
    assert [c["status"] for c in body["tool_calls"]] == ["error", "ok"]
    assert_valid_history(alice_session)


def test_max_steps_reached_gives_the_answer_of_a_call_without_tools(llm, alice_client, alice_session):
    queries = iter(["SFO", "NYC", "EWR", "JFK"])
    llm.then = lambda body: (answer("So far: SFO and NYC checked; Newark is still open.")
                             if not body.get("tools") else
                             tool_step(call("recall", {"query": next(queries)})))
    resp = alice_client.post(turns_url(alice_session.id), {"input": "Check all airports.", "max_steps": 2},
                             format="json")
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["stop_reason"] == "answer" and body["steps"] == 2
    assert body["reply"] == "So far: SFO and NYC checked; Newark is still open."
    assert len(llm.requests) == 3
    assert_valid_history(alice_session)


def test_the_next_turn_sees_the_previous_tool_exchange_as_valid_history(llm, alice_client, alice_session):
    llm.add(tool_step(call("set_goal", {"goal": "Fly to Newark"}, "first")), answer("Goal set."),
            answer("Still on it."))
    assert alice_client.post(turns_url(alice_session.id), {"input": "Plan my Newark trip."},
                             format="json").status_code == 200
    assert alice_client.post(turns_url(alice_session.id), {"input": "Any progress?"}, format="json").status_code == 200
    sent = llm.requests[-1]["messages"]
    assert history_problems(sent) == []
    assert any(m.get("tool_call_id") == "first" for m in sent)
    assert "Fly to Newark" in sent[1]["content"]  # the goal stack reached the composed context
    # The system prompt is a message of its own, the same on every call: a model server's prompt cache reuses it
    # (and the tool definitions a chat template puts after it) instead of reading it again each turn.
    first, second = (r["messages"][0] for r in (llm.requests[0], llm.requests[-1]))
    assert first == second and first["role"] == "system" and "Fly to Newark" not in first["content"]


def test_remember_is_user_stated_only_when_the_user_said_it(llm, alice, alice_user, alice_client, alice_session):
    from memory.models import MemoryRecord

    llm.add(tool_step(call("remember", {"text": "Never flies United", "kind": "preference",
                                        "quote": "never fly  United"}, "said"),
                      call("remember", {"text": "Prefers window seats", "kind": "preference",
                                        "quote": "I love window seats"}, "invented"),
                      call("remember", {"text": "Travels for work", "kind": "fact"}, "guessed")),
            answer("Noted."))
    resp = alice_client.post(turns_url(alice_session.id), {"input": "I never fly United, ever."}, format="json")
    assert resp.status_code == 200, resp.content
    user_message = Message.objects.unscoped().get(session=alice_session, role="user")
    by_text = {m.text: m for m in MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user)}
    # Stored as statements about the user: the subject the model left out is the user's name.
    assert by_text["Ada never flies United"].source_type == "user_stated"
    assert by_text["Ada never flies United"].source_message_id == user_message.id
    assert by_text["Ada prefers window seats"].source_type == "inferred"  # a quote the user never said
    assert by_text["Ada travels for work"].source_type == "inferred"
    assert all(m.session_id == alice_session.id for m in by_text.values())


def test_forget_only_reaches_the_users_own_memories(llm, stored, alice, bob, alice_user, alice_client, alice_session):
    from memory.models import MemoryRecord
    from tenants.services import end_user_create

    other_user = end_user_create(tenant=alice, external_id="someone-else")
    bob_user = end_user_create(tenant=bob, external_id="alice-user-1")
    own = stored(alice, alice_user, "Prefers aisle seats")
    neighbour = stored(alice, other_user, "Prefers aisle seats")
    outsider = stored(bob, bob_user, "Prefers aisle seats")
    llm.add(tool_step(call("forget", {"memory_id": str(neighbour.pk)}, "n"),
                      call("forget", {"memory_id": str(outsider.pk)}, "o"),
                      call("forget", {"memory_id": str(own.pk)}, "own")),
            answer("Forgotten."))
    resp = alice_client.post(turns_url(alice_session.id), {"input": "Forget my seat preference."}, format="json")
    assert resp.status_code == 200, resp.content
    assert [c["status"] for c in resp.json()["tool_calls"]] == ["error", "error", "ok"]
    final = llm.requests[-1]
    assert observation(final, "n") == observation(final, "o") == {"error": "No memory of this user has that id."}
    statuses = dict(MemoryRecord.objects.unscoped().filter(pk__in=[own.pk, neighbour.pk, outsider.pk])
                    .values_list("pk", "status"))
    assert statuses == {own.pk: "deleted", neighbour.pk: "active", outsider.pk: "active"}


def test_recall_finds_only_this_users_memories_with_provenance(llm, stored, alice, bob, alice_user, alice_client,
                                                               alice_session):
    from tenants.services import end_user_create

    mine = stored(alice, alice_user, "Prefers aisle seats on long flights")
    stored(alice, end_user_create(tenant=alice, external_id="neighbour"), "Prefers aisle seats on long flights")
    stored(bob, end_user_create(tenant=bob, external_id="alice-user-1"), "Prefers aisle seats on long flights")
    llm.add(tool_step(call("recall", {"query": "aisle seats"}, "r")), answer("You prefer aisle seats."))
    resp = alice_client.post(turns_url(alice_session.id), {"input": "What seats do I like?"}, format="json")
    assert resp.status_code == 200, resp.content
    found = observation(llm.requests[1], "r")["memories"]
    assert [m["id"] for m in found] == [str(mine.pk)]
    assert found[0]["provenance"]
    memories = resp.json()["memories"]
    assert [m["memory_id"] for m in memories] == [str(mine.pk)]
    assert memories[0]["provenance"] and memories[0]["text"] == "Prefers aisle seats on long flights"


def test_a_turns_response_is_the_turn_output_serializers(llm, stored, alice, alice_user, alice_session):
    from api.turns import TurnOutput
    from assistant.turns import turn_run
    from infra.rendering import rendered

    stored(alice, alice_user, "Prefers aisle seats on long flights")
    llm.add(tool_step(call("recall", {"query": "aisle seats"}, "r"), call("set_goal", {"goal": "Book a flight"})),
            answer("I found and booked a flight. You prefer aisle seats."))
    result = turn_run(tenant=alice, session=alice_session, user_input="What seats do I like?")
    expected = TurnOutput(result).data
    assert expected["tool_calls"] and expected["memories"] and expected["grounding"]
    assert rendered(TurnOutput, result) == expected


@pytest.mark.django_db(transaction=True)
def test_no_database_transaction_is_open_while_the_model_runs(llm, alice_client, alice_session):
    from django.db import connection

    seen = []

    def check(body):
        seen.append(connection.in_atomic_block)
        return tool_step(call("set_goal", {"goal": "x"})) if len(seen) == 1 else answer("done")

    llm.then = check
    resp = alice_client.post(turns_url(alice_session.id), {"input": "Go."}, format="json")
    assert resp.status_code == 200, resp.content
    assert seen == [False, False]


# --- validation and ownership ---------------------------------------------------------------------------------------

def test_another_tenants_session_is_not_found(llm, bob_client, alice_session):
    resp = bob_client.post(turns_url(alice_session.id), {"input": "hi"}, format="json")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"
    assert llm.requests == [] and Message.objects.unscoped().filter(session=alice_session).count() == 0


@pytest.mark.parametrize("session_id", ["00000000-0000-0000-0000-000000000000", "not-a-uuid", "%20"])
def test_unknown_session_ids_are_not_found(llm, alice_client, session_id):
    resp = alice_client.post(turns_url(session_id), {"input": "hi"}, format="json")
    assert resp.status_code == 404


@pytest.mark.parametrize("body, code", [
    ({}, "invalid"), ({"input": ""}, "invalid"), ({"input": "   "}, "invalid"), ({"input": 12}, "invalid"),
    ({"input": "hi", "max_steps": 0}, "invalid"), ({"input": "hi", "max_steps": "many"}, "invalid"),
    ({"input": ["hi"]}, "invalid"),
])
def test_invalid_input_is_400(llm, alice_client, alice_session, body, code):
    resp = alice_client.post(turns_url(alice_session.id), body, format="json")
    assert resp.status_code == 400 and resp.json()["error"]["code"] == code
    assert llm.requests == []


def test_input_over_the_tenants_token_limit_is_refused_before_any_model_call(llm, alice, alice_client,
                                                                           alice_session):
    alice.max_input_tokens = 20
    alice.save()
    resp = alice_client.post(turns_url(alice_session.id), {"input": "word " * 50}, format="json")
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "too_many_tokens"
    assert llm.requests == []


def test_a_closed_session_is_409(llm, alice, alice_client, alice_session):
    from orchestration.sessions import session_close

    session_close(tenant=alice, session_id=alice_session.id)
    resp = alice_client.post(turns_url(alice_session.id), {"input": "hi"}, format="json")
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "session_closed"
    assert llm.requests == []


def test_missing_key_is_401(client, alice_session):
    resp = client.post(turns_url(alice_session.id), {"input": "hi"}, content_type="application/json")
    assert resp.status_code == 401


def test_the_token_quota_is_checked_before_anything_is_recorded_or_sent(llm, alice, alice_client, alice_session):
    from infra.quotas import quota_charge_tokens

    alice.tokens_per_minute = 5_000
    alice.save()
    quota_charge_tokens(tenant=alice, tokens=4_990)
    resp = alice_client.post(turns_url(alice_session.id), {"input": "hi"}, format="json")
    assert resp.status_code == 429 and resp.json()["error"]["code"] == "rate_limited"
    assert int(resp["Retry-After"]) >= 1
    assert llm.requests == [] and not Message.objects.unscoped().filter(session=alice_session).exists()


def test_background_model_work_waits_for_the_whole_turn_not_each_call(llm, alice_client, alice_session, settings,
                                                                     monkeypatch):
    """Between the loop's calls (while a tool runs) the turn still holds the model: extraction waits until it ends."""
    from assistant import turns
    from infra import llm as infra_llm

    settings.LLM_BACKGROUND_CONCURRENCY = 1
    redis, foreground, _ = infra_llm._gate_redis()
    held_during_tools = []
    execute = turns.tool_execute

    def observed(ctx, name, arguments):
        held_during_tools.append(redis.zcard(foreground))
        return execute(ctx, name, arguments)

    monkeypatch.setattr(turns, "tool_execute", observed)
    llm.add(tool_step(call("set_goal", {"goal": "Fly to Newark"})), answer("Goal set."))
    assert alice_client.post(turns_url(alice_session.id), {"input": "Plan my Newark trip."},
                             format="json").status_code == 200
    assert held_during_tools == [1]  # no model call was in flight, and yet the turn was marked
    assert redis.zcard(foreground) == 0  # and the mark is gone once the turn has ended


def test_remember_replaces_a_subjects_value_only_when_the_memory_states_it(llm, alice, alice_user, alice_client,
                                                                          alice_session):
    """A slot value the memory does not state (a small model copies one from elsewhere) must not supersede."""
    from memory.models import MemoryRecord

    llm.add(tool_step(call("remember", {"text": "Ada flies to Lisbon.", "kind": "fact", "subject": "destination",
                                        "value": "Lisbon"}, "first")), answer("Noted."),
            tool_step(call("remember", {"text": "Ada prefers aisle seats.", "kind": "preference",
                                        "subject": "destination", "value": "Porto"}, "copied")), answer("Noted."),
            tool_step(call("remember", {"text": "Ada flies to Porto now.", "kind": "fact", "subject": "destination",
                                        "value": "Porto"}, "changed")), answer("Noted."))
    for line in ("I fly to Lisbon.", "I like aisle seats.", "Make it Porto."):
        assert alice_client.post(turns_url(alice_session.id), {"input": line}, format="json").status_code == 200
    by_text = {m.text: m for m in MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user)}
    assert by_text["Ada prefers aisle seats."].status == "active" and by_text["Ada prefers aisle seats."].subject == ""
    assert by_text["Ada flies to Lisbon."].status == "superseded"  # by the memory that does state Porto
    assert by_text["Ada flies to Porto now."].status == "active"


def test_a_recall_for_one_memory_still_shows_the_later_correction(llm, stored, alice, alice_user, alice_client,
                                                                   alice_session):
    first = stored(alice, alice_user, "Dana wants a flight from SFO to NYC next Tuesday")
    later = stored(alice, alice_user, "Dana changed the flight's destination from NYC to Newark")
    stored(alice, alice_user, "Dana has a cat called Miso")
    llm.add(tool_step(call("recall", {"query": "Dana's flight from SFO to NYC", "k": 1}, "r")), answer("Newark."))
    resp = alice_client.post(turns_url(alice_session.id), {"input": "Which flight was it?"}, format="json")
    assert resp.status_code == 200, resp.content
    found = {m["id"] for m in observation(llm.requests[1], "r")["memories"]}
    assert {str(first.pk), str(later.pk)} <= found
