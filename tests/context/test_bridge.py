"""Bridge summaries: written on close through a real Celery worker, exactly once however often the task runs."""
from __future__ import annotations

import json
import re
import threading
import time

import httpx
import pytest
import respx
from django.db import connection

from context import bridge as bridge_mod
from context.bridge import extractive_bridge
from context.buffer import (
    buffer_add_subgoal,
    buffer_complete_subgoal,
    buffer_get,
    buffer_record_tool,
    buffer_update_notes,
)
from context.models import BridgeSummary
from infra.errors import ServiceUnavailable
from orchestration import sessions as tasks_mod  # session_finish lives with the other session services
from orchestration.messages import messages_append
from orchestration.sessions import session_close
from orchestration.sessions import session_finish as _session_finish
from orchestration.tasks import session_finish_task as bridge_write_task
from sessions.models import Session
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db(transaction=True)


def ids(session) -> dict:
    return {"tenant_id": str(session.tenant_id), "user_id": str(session.user_id), "session_id": str(session.pk)}


def flight_chat(tenant, session):
    turns = [("I need a flight from SFO to NYC next Tuesday under $400.", "I found a Delta flight at $350, 7am."),
             ("I prefer aisle seats. Let's go with the Delta flight.", "Booked seat 14C."),
             ("Should I add checked luggage?", "That depends on how long you stay.")]
    for user, assistant in turns:
        messages_append(tenant=tenant, session_id=session.pk, enqueue_extraction=False,
                        items=[NewMessage(role="user", content=user), NewMessage(role="assistant", content=assistant)])


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def worker():
    """A real Celery worker (in a thread) consuming this run's broker db, with the queues purged first."""
    from celery.contrib.testing.worker import start_worker
    from kombu.asynchronous import set_event_loop

    from config.celery import app

    # A worker adopts the process's current event loop; a stopped worker's loop would swallow ETA (retry) tasks.
    set_event_loop(None)
    app.control.purge()
    with start_worker(app, pool="solo", concurrency=1, perform_ping_check=False, loglevel="WARNING",
                      queues=["default", "llm", "maintenance"], shutdown_timeout=30):
        yield app
    set_event_loop(None)
    connection.close()


def test_extractive_bridge_states_goal_found_decided_open(alice, alice_session, extract_calls):
    flight_chat(alice, alice_session)
    session_close(tenant=alice, session_id=alice_session.pk)
    b = _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk)
    assert b.method == "extractive"
    sentences = [s for s in re.split(r"(?<=[.?])\s+(?=[A-Z])", b.text) if s]
    assert 2 <= len(sentences) <= 3, b.text
    assert b.text.startswith("Goal: I need a flight from SFO to NYC next Tuesday under $400.")
    assert "Found: I found a Delta flight at $350, 7am / Booked seat 14C; decided:" in b.text
    assert "decided: Let's go with the Delta flight" in b.text
    assert "Still open: Should I add checked luggage?" in b.text
    assert b.details["goal"].startswith("I need a flight") and b.goal_embedding and len(b.goal_embedding) == 384


def test_bridge_uses_the_buffer_notes_and_subgoals(alice, alice_session, extract_calls):
    flight_chat(alice, alice_session)
    buffer_update_notes(**ids(alice_session), key_findings=["Delta DL123 at $350"], open_questions=["Hotel?"])
    buffer_add_subgoal(**ids(alice_session), text="Pick a seat")
    buffer_complete_subgoal(**ids(alice_session), text="Pick a seat")
    session_close(tenant=alice, session_id=alice_session.pk)
    b = _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk)
    assert "Found: Delta DL123 at $350" in b.text and "Pick a seat" in b.text and "Still open: Hotel?" in b.text


def test_closing_finishes_extraction_and_drops_the_buffer(alice, alice_session, extract_calls):
    from infra.redis_client import Keys, get_redis

    flight_chat(alice, alice_session)
    messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False,
                    items=[NewMessage(role="system", content="Answer briefly.")])
    buffer_get(**ids(alice_session))
    session_close(tenant=alice, session_id=alice_session.pk)
    _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk)
    # The user's and the assistant's messages go to extraction; the others (a system message) are stored already
    # marked extracted, with no task.
    said = alice_session.messages.filter(role__in=("user", "assistant"))
    assert sorted(extract_calls) == sorted(str(m.pk) for m in said)
    others = alice_session.messages.exclude(role__in=("user", "assistant"))
    assert others.exists() and not others.filter(extracted_at__isnull=True).exists()
    assert not get_redis().exists(Keys.session_buffer(alice.pk, alice_session.user_id, alice_session.pk))


def test_no_bridge_for_an_open_or_missing_session(alice_session, extract_calls):
    assert _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk) is None
    assert _session_finish(tenant_id=alice_session.tenant_id, session_id="6b0c1f4e-0000-4000-8000-000000000000") is None
    assert not BridgeSummary.objects.unscoped().exists()


def test_racing_writers_leave_one_bridge(alice, alice_session, extract_calls, monkeypatch):
    flight_chat(alice, alice_session)
    session_close(tenant=alice, session_id=alice_session.pk)
    barrier = threading.Barrier(4)
    real = bridge_mod._compose

    def slow_compose(session):
        out = real(session)
        barrier.wait(timeout=20)  # every writer has composed before any inserts
        return out

    monkeypatch.setattr(bridge_mod, "_compose", slow_compose)
    results, errors = [], []

    def run():
        try:
            results.append(_session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk).pk)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and len(set(results)) == 1
    assert BridgeSummary.objects.unscoped().filter(session=alice_session).count() == 1


def test_the_task_run_twice_writes_one_bridge(alice, alice_session, extract_calls):
    flight_chat(alice, alice_session)
    session_close(tenant=alice, session_id=alice_session.pk)
    first = bridge_write_task.apply(args=[str(alice_session.tenant_id), str(alice_session.pk)]).get()
    second = bridge_write_task.apply(args=[str(alice_session.tenant_id), str(alice_session.pk)]).get()
    assert first == second
    assert BridgeSummary.objects.unscoped().filter(session=alice_session).count() == 1


def _model_answers(answer: dict):
    """The model at LLM_BASE_URL answers every chat call with this structured answer."""
    return respx.post("http://llm.test/v1/chat/completions").mock(return_value=httpx.Response(200, json={
        "id": "x", "object": "chat.completion", "created": 0, "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": json.dumps(answer)}}]}))


@respx.mock
def test_abstractive_bridge_with_an_llm(alice, alice_session, extract_calls, settings):
    settings.LLM_BASE_URL = "http://llm.test/v1"
    settings.LLM_MODEL = "test-model"
    answer = {"goal": "Fly SFO to NYC next Tuesday under $400", "found": "Delta at $350", "decided": "Delta, aisle 14C",
              "open": "checked luggage",
              "summary": "The user wanted a flight from SFO to NYC under $400. They booked Delta at $350 in aisle "
                         "seat 14C. Checked luggage is still open."}
    route = _model_answers(answer)
    flight_chat(alice, alice_session)
    session_close(tenant=alice, session_id=alice_session.pk)
    b = _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk)
    assert b.method == "abstractive" and b.text == answer["summary"]
    assert b.goal == "Fly SFO to NYC next Tuesday under $400" and b.details["decided"] == "Delta, aisle 14C"
    sent = json.loads(route.calls[0].request.content)
    assert sent["response_format"]["json_schema"]["name"] == "bridge_summary"


def test_extractive_bridge_without_anything_found():
    text = extractive_bridge({"goal": "", "found": "", "decided": "", "open": ""})
    assert text == "No clear goal was stated. Nothing was found or decided yet. Nothing was left open."


# --- through a real worker -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_close_writes_the_bridge_through_a_real_worker(alice, alice_client, alice_session, extract_calls, worker):
    flight_chat(alice, alice_session)
    r = alice_client.post(f"/api/v1/sessions/{alice_session.pk}/close")
    assert r.status_code == 200 and r.json()["state"] == "closed"
    assert wait_for(lambda: BridgeSummary.objects.unscoped().filter(session_id=alice_session.pk).exists())
    bridge = BridgeSummary.objects.unscoped().get(session_id=alice_session.pk)
    assert bridge.text.startswith("Goal: I need a flight from SFO to NYC")
    assert wait_for(lambda: len(extract_calls) == 6)  # the user's three messages and the assistant's three
    # closing again is idempotent and enqueues nothing new
    assert alice_client.post(f"/api/v1/sessions/{alice_session.pk}/close").status_code == 200
    time.sleep(0.5)
    assert BridgeSummary.objects.unscoped().filter(session_id=alice_session.pk).count() == 1


@pytest.mark.slow
def test_the_task_delivered_twice_to_a_worker_writes_one_bridge(alice, alice_session, extract_calls, worker,
                                                               monkeypatch):
    runs = []
    real = tasks_mod.buffer_delete
    monkeypatch.setattr(tasks_mod, "buffer_delete", lambda **kw: (real(**kw), runs.append(1)))
    flight_chat(alice, alice_session)
    session_close(tenant=alice, session_id=alice_session.pk)  # enqueues one on commit
    bridge_write_task.delay(str(alice_session.tenant_id), str(alice_session.pk))
    bridge_write_task.delay(str(alice_session.tenant_id), str(alice_session.pk))
    assert wait_for(lambda: len(runs) == 3), runs
    assert BridgeSummary.objects.unscoped().filter(session_id=alice_session.pk).count() == 1


@pytest.mark.slow
def test_a_task_failing_after_partial_work_is_retried_into_one_bridge(alice, alice_session, extract_calls, worker,
                                                                     monkeypatch):
    attempts = []
    real = tasks_mod.messages_pending_extraction

    def crash_once(**kw):
        attempts.append(BridgeSummary.objects.unscoped().filter(session_id=kw["session_id"]).count())
        if len(attempts) == 1:  # an outage after the bridge was written: worth a retry
            raise ServiceUnavailable("the database went away after the bridge was written")
        return real(**kw)

    monkeypatch.setattr(tasks_mod, "messages_pending_extraction", crash_once)
    flight_chat(alice, alice_session)
    session_close(tenant=alice, session_id=alice_session.pk)
    # the user's and the assistant's messages
    assert wait_for(lambda: len(attempts) >= 2 and len(extract_calls) == 6, timeout=40), attempts
    assert attempts[:2] == [1, 1]  # the bridge existed when the first attempt died, and the retry reused it
    assert BridgeSummary.objects.unscoped().filter(session_id=alice_session.pk).count() == 1
    assert Session.objects.unscoped().get(pk=alice_session.pk).state == "closed"


@respx.mock
def test_an_abstractive_bridge_that_runs_on_keeps_its_first_distinct_sentences(alice, alice_session, extract_calls,
                                                                                   settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://llm.test/v1", "test-model"
    looping = ("The user asked for a flight from SFO to NYC. The user changed the destination to Newark. "
               + "The assistant still has the goal of finding a flight, but the destination changed. " * 4
               + "The assistant still has the goal of finding a fl")
    answer = {"summary": looping, "goal": "Fly to Newark", "found": "", "decided": "Newark", "open": ""}
    _model_answers(answer)
    flight_chat(alice, alice_session)
    messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False,
                    items=[NewMessage(role="user", content="Change the destination to Newark."),
                           NewMessage(role="assistant", content="Done: the goal is still a flight; the destination "
                                                                "changed to Newark.")])
    session_close(tenant=alice, session_id=alice_session.pk)
    b = _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk)
    assert b.method == "abstractive"
    assert b.text == ("The user asked for a flight from SFO to NYC. The user changed the destination to Newark. "
                      "The assistant still has the goal of finding a flight, but the destination changed.")


@respx.mock
def test_an_abstractive_bridge_keeps_only_what_the_session_supports(alice, alice_session, extract_calls, settings):
    """A sentence nothing in the session says, or one claiming an action no tool of the session did, is dropped."""
    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://llm.test/v1", "test-model"
    flight_chat(alice, alice_session)
    summary = ("The user needs a flight from SFO to NYC next Tuesday under $400. "
               "The assistant searched every airline for cheaper options. "
               "The user also wants a hotel near Central Park with a gym.")
    _model_answers({"summary": summary, "goal": "Fly SFO to NYC", "found": "", "decided": "",
                    "open": "A hotel near Central Park"})
    session_close(tenant=alice, session_id=alice_session.pk)
    b = _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk)
    assert b.method == "abstractive"
    assert b.text == "The user needs a flight from SFO to NYC next Tuesday under $400."
    assert b.details["open"] != "A hotel near Central Park"  # an unsupported part falls back to the extractive one


@respx.mock
def test_an_abstractive_bridge_drops_an_action_done_on_something_else(alice, alice_session, extract_calls, settings):
    """The ledger shows the goal set to NYC; a bridge saying the assistant set it to Newark claims what no call did,
    though the session did change the destination to Newark and set_goal did run."""
    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://llm.test/v1", "test-model"
    flight_chat(alice, alice_session)
    goal = {"goal": "A flight from SFO to NYC next Tuesday under $400"}
    buffer_record_tool(**ids(alice_session), tool="set_goal", arguments=goal, outcome=goal)
    messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False,
                    items=[NewMessage(role="user", content="Change the destination to Newark."),
                           NewMessage(role="assistant", content="Newark it is.")])
    kept = ("The user needs a flight from SFO to NYC next Tuesday under $400. "
            "The user changed the destination to Newark.")
    _model_answers({"summary": f"{kept} The assistant updated the goal to a flight to Newark.", "goal": "",
                    "found": "", "decided": "", "open": ""})
    session_close(tenant=alice, session_id=alice_session.pk)
    b = _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk)
    assert b.method == "abstractive"
    assert b.text == kept


@respx.mock
def test_an_abstractive_bridge_with_nothing_supported_is_written_extractively(alice, alice_session, extract_calls,
                                                                             settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://llm.test/v1", "test-model"
    flight_chat(alice, alice_session)
    _model_answers({"summary": "The assistant found a flight to Newark, but the user still wants other options.",
                    "goal": "", "found": "", "decided": "", "open": ""})
    session_close(tenant=alice, session_id=alice_session.pk)
    b = _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk)
    assert b.method == "extractive" and b.text.startswith("Goal: I need a flight from SFO to NYC")
