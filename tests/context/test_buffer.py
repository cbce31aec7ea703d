"""The Redis context buffer: atomic writes with a TTL, rebuilt and caught up from the database, no turn lost."""
from __future__ import annotations

import json
import threading

import pytest
import redis
from django.db import connection

from context import buffer as buf_mod
from context.buffer import (
    buffer_add_facts,
    buffer_add_subgoal,
    buffer_append_messages,
    buffer_compact,
    buffer_complete_subgoal,
    buffer_delete,
    buffer_get,
    buffer_record_tool,
    buffer_set_goal,
    buffer_update_notes,
)
from context.models import SummaryAnchor
from infra.redis_client import Keys, get_redis
from orchestration.messages import messages_append
from sessions.models import Message, Session
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db(transaction=True)


def ids(session) -> dict:
    return {"tenant_id": str(session.tenant_id), "user_id": str(session.user_id), "session_id": str(session.pk)}


def raw_doc(session) -> dict | None:
    raw = get_redis().get(Keys.session_buffer(session.tenant_id, session.user_id, session.pk))
    return json.loads(raw) if raw else None


def say(tenant, session, *texts, role="user"):
    return messages_append(tenant=tenant, session_id=session.pk,
                           items=[NewMessage(role=role, content=t) for t in texts], enqueue_extraction=False)


def covered(doc: dict) -> set[int]:
    seqs = {m["seq"] for m in doc["recent"]} if isinstance(doc["recent"], list) else set()
    for a in doc["anchors"] if isinstance(doc["anchors"], list) else []:
        seqs |= set(range(a["first_seq"], a["last_seq"] + 1))
    return seqs


def test_append_puts_messages_in_the_buffer_with_turns_and_default_goal(alice, alice_session):
    say(alice, alice_session, "Hi there")
    say(alice, alice_session, "I need a flight from SFO to NYC next Tuesday under $400.")
    say(alice, alice_session, "Looking at options now.", role="assistant")
    b = buffer_get(**ids(alice_session))
    assert [m["seq"] for m in b.recent] == [1, 2, 3]
    assert b.turns == 2 and b.seq == 3
    assert b.goal == "I need a flight from SFO to NYC next Tuesday under $400."
    alice_session.refresh_from_db()
    assert alice_session.goal == b.goal  # the goal is kept on the row too, for rebuilds and the bridge


def test_ttl_is_set_after_every_write(alice, alice_session, settings):
    settings.CONTINUUM_BUFFER_TTL_SECONDS = 3600
    key = Keys.session_buffer(alice.pk, alice_session.user_id, alice_session.pk)
    r = get_redis()

    def check():
        ttl = r.pttl(key)
        assert 0 < ttl <= 3600 * 1000, ttl

    say(alice, alice_session, "I want to plan a trip to Lisbon.")
    check()
    writes = [
        lambda: buffer_set_goal(**ids(alice_session), goal="Trip to Lisbon"),
        lambda: buffer_add_subgoal(**ids(alice_session), text="Find flights"),
        lambda: buffer_complete_subgoal(**ids(alice_session), text="Find flights"),
        lambda: buffer_record_tool(**ids(alice_session), tool="search", arguments={"q": "LIS"}, outcome="3 found"),
        lambda: buffer_update_notes(**ids(alice_session), key_findings=["TAP is cheapest"], open_questions=["Dates?"]),
        lambda: buffer_add_facts(**ids(alice_session), facts=[{"id": "f1", "text": "Prefers aisle seats"}]),
        lambda: buffer_compact(**ids(alice_session)),
        lambda: buffer_get(**ids(alice_session)),  # a catch-up after compaction is a write too
    ]
    for write in writes:
        r.persist(key)  # were a write to leave the TTL alone, this would expose it
        write()
        check()
    # a rebuild (key gone) writes with a TTL as well
    buffer_delete(**ids(alice_session))
    buffer_get(**ids(alice_session))
    check()


def test_deleting_the_key_mid_conversation_loses_nothing(alice, alice_session):
    say(alice, alice_session, "I want to fly to Lisbon in May.")
    say(alice, alice_session, "Here are three options.", role="assistant")
    buffer_set_goal(**ids(alice_session), goal="Fly to Lisbon in May")
    buffer_add_subgoal(**ids(alice_session), text="Compare prices")
    buffer_record_tool(**ids(alice_session), tool="search_flights", arguments={"to": "LIS"}, outcome="3 options")
    buffer_update_notes(**ids(alice_session), key_findings=["TAP at $420"], open_questions=["Which day?"])
    before = buffer_get(**ids(alice_session))

    get_redis().delete(Keys.session_buffer(alice.pk, alice_session.user_id, alice_session.pk))
    say(alice, alice_session, "Tuesday works best.")  # append to a missing key rebuilds it first
    get_redis().delete(Keys.session_buffer(alice.pk, alice_session.user_id, alice_session.pk))
    after = buffer_get(**ids(alice_session))

    assert [m["content"] for m in after.recent] == [m["content"] for m in before.recent] + ["Tuesday works best."]
    assert after.goal == "Fly to Lisbon in May"
    assert after.open_subgoals == ["Compare prices"]
    assert [t["tool"] for t in after.tools] == ["search_flights"]
    assert after.notes == {"key_findings": ["TAP at $420"], "open_questions": ["Which day?"]}
    assert after.turns == 2


def test_a_failed_redis_append_is_swallowed_and_caught_up_on_read(alice, alice_session, monkeypatch):
    say(alice, alice_session, "first message")
    real = buf_mod.script_run

    def flaky(key, op, payload):
        if op == "append":
            raise redis.exceptions.ConnectionError("redis went away")
        return real(key, op, payload)

    monkeypatch.setattr(buf_mod, "script_run", flaky)
    rows = say(alice, alice_session, "second message")  # the database has it; the append is not an error
    assert rows[0].seq == 2
    assert [m["seq"] for m in raw_doc(alice_session)["recent"]] == [1]
    monkeypatch.setattr(buf_mod, "script_run", real)
    b = buffer_get(**ids(alice_session))
    assert [m["content"] for m in b.recent] == ["first message", "second message"]
    assert raw_doc(alice_session)["seq"] == 2


def test_out_of_order_appends_keep_seq_order_and_a_contiguous_mark(alice, alice_session):
    rows = say(alice, alice_session, "one", "two", "three")
    buffer_delete(**ids(alice_session))
    # Build an empty buffer, then deliver seq 3 before 1 and 2, as racing requests can.
    get_redis().set(Keys.session_buffer(alice.pk, alice_session.user_id, alice_session.pk),
                    json.dumps({"session_id": str(alice_session.pk), "seq": 0, "recent": []}), ex=60)
    r3 = buffer_append_messages(**ids(alice_session), message_ids=[rows[2].pk])
    assert r3.seq == 0  # 1 and 2 are missing: the mark does not move past the gap
    r12 = buffer_append_messages(**ids(alice_session), message_ids=[rows[0].pk, rows[1].pk])
    assert r12.seq == 3
    assert [m["content"] for m in raw_doc(alice_session)["recent"]] == ["one", "two", "three"]


def test_fifty_concurrent_writers_lose_no_update(alice, alice_session):
    errors: list[BaseException] = []
    barrier = threading.Barrier(50)

    def writer(i: int):
        try:
            barrier.wait(timeout=30)
            say(alice, alice_session, f"I need option {i} checked, the budget is ${100 + i}.")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[:3]
    assert Message.objects.unscoped().filter(session=alice_session).count() == 50

    doc = raw_doc(alice_session)  # straight from Redis, before any read could catch it up
    assert covered(doc) == set(range(1, 51))
    assert doc["seq"] == 50 and doc["turns"] == 50
    # Folds raced too: the anchors in the database tile the folded range without overlap.
    spans = list(SummaryAnchor.objects.unscoped().filter(session=alice_session).order_by("first_seq")
                 .values_list("first_seq", "last_seq"))
    assert spans and spans[0][0] == 1
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:]))


def test_fifty_concurrent_state_writers_lose_no_update(alice, alice_session, settings):
    settings.CONTINUUM_BUFFER_MAX_SUBGOALS = 100
    settings.CONTINUUM_BUFFER_TOOL_LEDGER = 100
    say(alice, alice_session, "start")
    errors: list[BaseException] = []
    barrier = threading.Barrier(50)

    def writer(i: int):
        try:
            barrier.wait(timeout=30)
            buffer_add_facts(**ids(alice_session), facts=[{"id": f"fact-{i}", "text": f"fact number {i}"}])
            buffer_add_subgoal(**ids(alice_session), text=f"subgoal {i}")
            buffer_record_tool(**ids(alice_session), tool=f"tool_{i}", arguments={"i": i}, outcome="ok")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[:3]
    doc = raw_doc(alice_session)
    assert {f["id"] for f in doc["facts"]} == {f"fact-{i}" for i in range(50)}
    assert {s["text"] for s in doc["subgoals"]} == {f"subgoal {i}" for i in range(50)}
    assert {t["tool"] for t in doc["tools"]} == {f"tool_{i}" for i in range(50)}
    # The snapshot on the row is the newest one, whatever order the writers' updates landed in.
    session = Session.objects.unscoped().get(pk=alice_session.pk)
    assert session.working_version == doc["v"] or len(session.working_state["tools"]) == 50
    assert {t["tool"] for t in session.working_state["tools"]} == {f"tool_{i}" for i in range(50)}


def test_subgoals_collapse_and_ledger_counts_repeats(alice, alice_session, settings):
    settings.CONTINUUM_BUFFER_TOOL_LEDGER = 3
    say(alice, alice_session, "hello")
    buffer_add_subgoal(**ids(alice_session), text="Find a hotel near the venue")
    b = buffer_complete_subgoal(**ids(alice_session),
                                text="Find a hotel near the venue\nwith details that run on and on " + "x" * 200)
    assert b.open_subgoals == ["Find a hotel near the venue"]  # a different subgoal: this one is added as done
    b = buffer_complete_subgoal(**ids(alice_session), text="find a hotel near the venue!")
    assert b.open_subgoals == []
    assert all("\n" not in line and len(line) <= 100 for line in b.done_subgoals)
    for _ in range(3):
        b = buffer_record_tool(**ids(alice_session), tool="search", arguments={"q": "hotels"}, outcome="5 results")
    assert len(b.tools) == 1 and b.tools[0]["count"] == 3
    for i in range(5):
        b = buffer_record_tool(**ids(alice_session), tool="lookup", arguments={"id": i}, outcome="found",
                               status="ok")
    assert [t["args"] for t in b.tools] == ['{"id":2}', '{"id":3}', '{"id":4}']
    long = buffer_record_tool(**ids(alice_session), tool="t", arguments={"blob": "y" * 500}, outcome="z" * 500)
    assert len(long.tools[-1]["args"]) < 80 and "#" in long.tools[-1]["args"]
    assert len(long.tools[-1]["outcome"]) <= 160


def test_facts_rebuild_from_memory_records_of_the_session(alice, alice_user, alice_session):
    from memory.models import MemoryRecord

    say(alice, alice_session, "I am allergic to peanuts.")
    rec = MemoryRecord.objects.unscoped().create(tenant=alice, user=alice_user, kind="fact", text="Allergic to peanuts",
                                      session=alice_session)
    MemoryRecord.objects.unscoped().create(tenant=alice, user=alice_user, kind="fact", text="old, superseded",
                                session=alice_session, status="superseded")
    buffer_delete(**ids(alice_session))
    b = buffer_get(**ids(alice_session))
    assert b.facts == [{"id": str(rec.pk), "text": "Allergic to peanuts"}]


def test_compact_keeps_goal_facts_anchors_and_reloads_turns(alice, alice_session, settings):
    settings.CONTINUUM_ANCHOR_EVERY_TURNS = 2
    settings.CONTINUUM_ANCHOR_KEEP_TURNS = 1
    for i in range(4):
        say(alice, alice_session, f"I need item {i} priced under ${i}0.")
        say(alice, alice_session, f"Item {i} costs ${i}5.", role="assistant")
    buffer_add_facts(**ids(alice_session), facts=[{"id": "f", "text": "likes tea"}])
    before = buffer_get(**ids(alice_session))
    assert before.anchors and before.recent
    out = buffer_compact(**ids(alice_session))
    assert out["after_bytes"] < out["before_bytes"]
    doc = raw_doc(alice_session)
    assert doc["recent"] in ([], {}) and doc["seq"] == before.anchored_seq
    assert doc["goal"] == before.goal and doc["facts"] == before.facts
    after = buffer_get(**ids(alice_session))
    assert after.recent == before.recent and after.anchors == before.anchors
    assert buffer_compact(tenant_id=alice.pk, user_id=alice_session.user_id, session_id=alice.pk) is None


def test_an_unreadable_buffer_is_rebuilt(alice, alice_session):
    say(alice, alice_session, "I need a flight to Rome.")
    key = Keys.session_buffer(alice.pk, alice_session.user_id, alice_session.pk)
    get_redis().set(key, b"\xff not json", ex=60)
    say(alice, alice_session, "In June.")  # the script cannot read it either: swallowed, the database has it
    b = buffer_get(**ids(alice_session))
    assert [m["content"] for m in b.recent] == ["I need a flight to Rome.", "In June."]
    assert get_redis().pttl(key) > 0


def test_buffer_get_refuses_a_session_of_another_tenant(alice_session, bob):
    from infra.errors import NotFound

    with pytest.raises(NotFound):
        buffer_get(tenant_id=bob.pk, user_id=alice_session.user_id, session_id=alice_session.pk)


def test_redis_down_on_read_raises_connection_error(alice, alice_session, settings):
    from infra.redis_client import reset_pool

    original = settings.REDIS_URL
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    reset_pool()
    try:
        with pytest.raises(redis.exceptions.ConnectionError):
            buffer_get(**ids(alice_session))
        # ...but an append still stores the message (the database is the truth)
        rows = say(alice, alice_session, "stored while redis is down")
        assert rows[0].seq == 1
    finally:
        settings.REDIS_URL = original
        reset_pool()
    assert [m["content"] for m in buffer_get(**ids(alice_session)).recent] == ["stored while redis is down"]
