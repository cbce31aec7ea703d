"""The extraction pipeline end to end: triage, rules, events with provenance, idempotency, dedup, supersede,
expiry, and the optional two-pass LLM (mocked at HTTP level)."""
from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
import respx

from memory.models import MemoryEvent, MemoryRecord
from orchestration.messages import message_extract
from orchestration.tasks import message_extract_task as memory_extract_task
from sessions.models import Message

from .memory_support import MAY_8, points_of, record_turns

pytestmark = pytest.mark.django_db(transaction=True)

FLIGHT = "I need a flight from SFO to NYC next Tuesday under $400. I prefer aisle seats and I never fly United."


def _mine(tenant, user, **filters):
    return MemoryRecord.objects.unscoped().filter(tenant=tenant, user=user, **filters)


def test_chatter_is_dropped_and_no_llm_call_is_made(alice, alice_user, settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://llm.test/v1", "m"
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post("http://llm.test/v1/chat/completions").mock(return_value=httpx.Response(500))
        _, messages = record_turns(alice, alice_user, [("user", "thanks!"), ("user", "ok"), ("user", "Hey Mel! lol")])
    assert route.call_count == 0
    assert not _mine(alice, alice_user).exists()
    assert all(m.extracted_at is not None for m in Message.objects.unscoped().filter(pk__in=[m.pk for m in messages]))


def test_each_new_memory_text_is_embedded_once_for_the_duplicate_check_and_the_point(alice, alice_user):
    from infra.embedder import get_embedder

    embedder = get_embedder()
    embedder.recent.clear()
    computed: list[str] = []
    inner = embedder._compute
    embedder._compute = lambda texts: computed.extend(texts) or inner(texts)
    try:
        record_turns(alice, alice_user, [("user", FLIGHT)])
    finally:
        del embedder._compute
    texts = list(_mine(alice, alice_user).values_list("text", flat=True))
    assert len(texts) >= 3 and set(texts) <= set(computed)
    assert len(computed) == len(set(computed))  # nothing computed twice
    assert len(points_of(alice, alice_user)) == len(texts)


def test_assistant_statements_are_kept_as_said_by_the_assistant_never_as_facts_about_the_user(alice, alice_user):
    record_turns(alice, alice_user, [("assistant", "Your name is Bob and you love United Airlines."),
                                     ("assistant", "I prefer window seats and my order number is ZX-99812.")])
    mine = _mine(alice, alice_user)
    # Two episodic records, one per message, marked as the assistant's words: no name, preference or slot fact.
    assert sorted(mine.values_list("kind", "source_type", "subject")) == [("event", "assistant", "")] * 2
    assert all(text.lower().startswith("assistant: ") for text in mine.values_list("text", flat=True))


def test_a_tenant_that_keeps_only_users_words_stores_nothing_of_the_assistants(alice, alice_user):
    alice.remember_assistant_turns = False
    alice.save()
    _, messages = record_turns(alice, alice_user, [("assistant", "For the invoices I suggest integer cents."),
                                                   ("user", "I run the billing team at Acme.")])
    assert messages[0].extracted_at is not None  # stored already done: no task was queued for it
    assert set(_mine(alice, alice_user).values_list("source_type", flat=True)) == {"user_stated"}


def test_user_turn_becomes_event_and_rule_memories_with_provenance(alice, alice_user):
    session, (msg,) = record_turns(alice, alice_user, [("user", "Hi! " + FLIGHT)])
    records = list(_mine(alice, alice_user))
    by_kind = {}
    for r in records:
        by_kind.setdefault(r.kind, []).append(r)
    event = by_kind["event"][0]
    assert event.text == f"Ada: {FLIGHT}"  # filler ("Hi!") trimmed, the user's name kept
    assert {r.subject: r.value for r in by_kind["fact"]} == {"origin": "SFO", "destination": "NYC", "budget": "$400"}
    assert {r.text for r in by_kind["preference"]} == {"Ada prefers aisle seats.", "Ada never flies United."}
    assert [r.text for r in by_kind["goal"]] == ["Ada needs a flight from SFO to NYC next Tuesday under $400."]
    for r in records:
        assert r.source_message_id == msg.pk and r.session_id == session.pk
        assert r.source_message_ids == [str(msg.pk)]
        assert r.created_at == msg.created_at
        assert r.source_type == "user_stated"
        assert MemoryEvent.objects.unscoped().filter(memory_uuid=r.pk, action="created").count() == 1
    assert set(points_of(alice, alice_user)) == {str(r.pk) for r in records}


def test_extraction_task_twice_writes_the_same_memories_and_points(alice, alice_user):
    _, (msg,) = record_turns(alice, alice_user, [("user", FLIGHT)], extract=False)
    first = memory_extract_task.apply(args=[str(msg.tenant_id), str(msg.pk)]).get()
    rows = {r.pk: (r.text, r.updated_at) for r in _mine(alice, alice_user)}
    points = points_of(alice, alice_user)
    second = memory_extract_task.apply(args=[str(msg.tenant_id), str(msg.pk)]).get()
    assert first == len(rows) and second == 0
    assert {r.pk: (r.text, r.updated_at) for r in _mine(alice, alice_user)} == rows
    assert points_of(alice, alice_user) == points
    assert MemoryEvent.objects.unscoped().filter(tenant=alice).count() == len(rows)

    # Even a forced rerun (the completion mark lost) lands on the same ids and writes nothing new.
    Message.objects.unscoped().filter(pk=msg.pk).update(extracted_at=None)
    result = message_extract(tenant_id=msg.tenant_id, message_id=msg.pk)
    assert set(result.memory_ids) == {str(pk) for pk in rows}
    assert set(result.outcomes) == {"exists"}
    assert {r.pk: (r.text, r.updated_at) for r in _mine(alice, alice_user)} == rows
    assert points_of(alice, alice_user) == points
    assert MemoryEvent.objects.unscoped().filter(tenant=alice).count() == len(rows)


def test_near_duplicate_reinforces_instead_of_inserting(alice, alice_user):
    record_turns(alice, alice_user, [("user", "I prefer aisle seats.")])
    pref = _mine(alice, alice_user, kind="preference").get()
    _, (second,) = record_turns(alice, alice_user, [("user", "I prefer aisle seats!")], start=MAY_8 + timedelta(days=3))
    pref.refresh_from_db()
    assert _mine(alice, alice_user, kind="preference").count() == 1
    assert pref.reinforcement_count == 1 and pref.confidence > 0.85
    assert str(second.pk) in pref.source_message_ids
    assert MemoryEvent.objects.unscoped().filter(memory_uuid=pref.pk, action="reinforced").count() == 1
    assert points_of(alice, alice_user)[str(pref.pk)]["confidence"] == pytest.approx(pref.confidence)


def test_contradiction_supersedes_the_old_record_and_keeps_history(alice, alice_user):
    record_turns(alice, alice_user, [("user", FLIGHT)])
    old = _mine(alice, alice_user, subject="destination").get()
    record_turns(alice, alice_user, [("user", "Actually, change the destination to Newark.")],
                 start=MAY_8 + timedelta(minutes=5))
    old.refresh_from_db()
    new = _mine(alice, alice_user, subject="destination", status="active").get()
    assert (old.value, new.value) == ("NYC", "Newark")
    assert old.status == "superseded" and old.superseded_by_id == new.pk
    history = list(MemoryEvent.objects.unscoped().filter(memory_uuid=old.pk).values_list("action", flat=True))
    assert history == ["created", "superseded"]
    superseded = MemoryEvent.objects.unscoped().get(memory_uuid=old.pk, action="superseded")
    assert superseded.before["status"] == "active" and superseded.after["superseded_by"] == str(new.pk)
    points = points_of(alice, alice_user)
    assert points[str(old.pk)]["status"] == "superseded" and points[str(new.pk)]["status"] == "active"
    # Other slots of the first message are untouched.
    assert _mine(alice, alice_user, subject="origin", status="active").count() == 1


def test_expiry_by_kind_with_tenant_override(alice, alice_user, settings):
    settings.MEMORY_TTL_DAYS = {"event": 30, "goal": 7, "preference": None, "fact": None, "procedure": None}
    alice.memory_ttl_days = {"goal": 2, "event": None}
    alice.save()
    _, (msg,) = record_turns(alice, alice_user, [("user", "I want to visit Lisbon in June. I love pastel de nata.")])
    goal = _mine(alice, alice_user, kind="goal").get()
    assert goal.created_at == msg.created_at and goal.learned_at >= msg.created_at
    assert goal.expires_at == goal.learned_at + timedelta(days=2)  # the lifetime counts from when it was learned
    assert _mine(alice, alice_user, kind="event").get().expires_at is None  # tenant says never
    assert _mine(alice, alice_user, kind="preference").get().expires_at is None
    payload = points_of(alice, alice_user)[str(goal.pk)]
    assert payload["expires_at"] == pytest.approx(goal.expires_at.timestamp())


def test_import_keeps_dataset_dates_and_provenance_on_every_memory(alice, alice_user):
    from memory.retrieval import memory_retrieve

    alice.memory_ttl_days = {"event": None, "goal": None}
    alice.save()
    session, messages = record_turns(alice, alice_user, [
        ("user", "I went to a LGBTQ support group yesterday and it was so powerful."),
        ("assistant", "That sounds moving. What happened there?"),
        ("user", "My favourite painter is Monet and I want to paint a sunrise this summer."),
        ("user", "Thanks!"),
    ])
    records = list(_mine(alice, alice_user))
    assert records and all(r.source_message_id and r.session_id == session.pk for r in records)
    assert {r.created_at.date().isoformat() for r in records} == {"2023-05-08"}
    event = _mine(alice, alice_user, kind="event", text__contains="support group").get()
    assert event.metadata["dates"] == [{"phrase": "yesterday", "date": "2023-05-07", "granularity": "day"}]
    found = memory_retrieve(tenant=alice, user=alice_user, query="When did Ada go to the support group?")
    assert found and found[0].provenance == 'you said on 8 May 2023 (session 1); "yesterday" = 7 May 2023'
    assert all(" on 8 May 2023" in m.provenance for m in found)


def _llm_answer(stated, implied=()):
    body = {"stated": list(stated), "implied": list(implied)}
    return httpx.Response(200, json={
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": json.dumps(body)}}]})


@pytest.mark.parametrize("review", [False, True])
def test_llm_extracts_stated_and_implied_memories_in_one_call_and_marks_inferences(alice, alice_user, settings,
                                                                                   review):
    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_API_KEY = "http://llm.test/v1", "m", "k"
    settings.LLM_MAX_RETRIES = 0
    alice.review_inferred = review
    alice.save()
    explicit = [{"kind": "fact", "text": "Ada lives in Porto.", "subject": "home city", "value": "Porto",
                 "confidence": 0.95}]
    implicit = [{"kind": "preference", "text": "Ada prefers quiet hotel rooms.", "subject": "", "value": "",
                 "confidence": 0.7}]
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post("http://llm.test/v1/chat/completions").mock(
            side_effect=[_llm_answer(explicit, implicit)])
        record_turns(alice, alice_user, [("user", "The hotel in Porto, where I live, was far too noisy last time.")])
    assert route.call_count == 1  # one background call per message
    (sent,) = (json.loads(c.request.content) for c in route.calls)
    assert sent["response_format"]["type"] == "json_schema" and "noisy" in sent["messages"][1]["content"]
    stated = _mine(alice, alice_user, text="Ada lives in Porto.").get()
    inferred = _mine(alice, alice_user, text="Ada prefers quiet hotel rooms.").get()
    assert (stated.source_type, stated.status, stated.extractor) == ("user_stated", "active", "llm")
    assert inferred.source_type == "inferred" and inferred.confidence <= 0.75
    assert inferred.status == ("pending_review" if review else "active")
    assert _mine(alice, alice_user, kind="event").count() == 1  # the turn itself is kept as well


def test_unreachable_llm_is_retried_then_rules_still_run(alice, alice_user, settings):
    from infra.errors import ServiceUnavailable

    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_MAX_RETRIES = "http://llm.test/v1", "m", 0
    with respx.mock() as mock:
        mock.post("http://llm.test/v1/chat/completions").mock(side_effect=httpx.ConnectError("down"))
        _, (msg,) = record_turns(alice, alice_user, [("user", "I prefer aisle seats.")], extract=False)
        with pytest.raises(ServiceUnavailable):
            message_extract(tenant_id=msg.tenant_id, message_id=msg.pk)
        assert not _mine(alice, alice_user).exists()
        msg.refresh_from_db()
        assert msg.extracted_at is None  # not claimed: the retry does the work
        result = message_extract(tenant_id=msg.tenant_id, message_id=msg.pk, allow_llm_failure=True)
    assert result.status == "done"
    assert _mine(alice, alice_user, kind="preference").get().text == "Ada prefers aisle seats."


def test_an_older_contradiction_extracted_late_does_not_replace_the_newer_value(alice, alice_user):
    # Retries and parallel workers extract messages out of order: the later statement must still win.
    _, (first, second) = record_turns(alice, alice_user, [("user", FLIGHT),
                                                          ("user", "Actually, change the destination to Newark.")],
                                      extract=False)
    assert message_extract(tenant_id=second.tenant_id, message_id=second.pk).status == "done"
    result = message_extract(tenant_id=first.tenant_id, message_id=first.pk)
    assert "outdated" in result.outcomes
    newer = _mine(alice, alice_user, subject="destination", status="active").get()
    older = _mine(alice, alice_user, subject="destination", status="superseded").get()
    assert (newer.value, older.value) == ("Newark", "NYC")
    assert older.superseded_by_id == newer.pk and older.source_message_id == first.pk
    assert list(MemoryEvent.objects.unscoped().filter(memory_uuid=older.pk).values_list("action", flat=True)) == \
        ["created", "superseded"]
    points = points_of(alice, alice_user)
    assert points[str(older.pk)]["status"] == "superseded" and points[str(newer.pk)]["status"] == "active"
    # A rerun of the late message changes nothing.
    assert message_extract(tenant_id=first.tenant_id, message_id=first.pk).status == "already_done"
    assert _mine(alice, alice_user, subject="destination").count() == 2


def _write_while_the_users_lock_is_held(tenant, user, write, *, while_waiting):
    """Start `write` on another thread while this test holds the user's memory-write lock; after 1.5 s the writer
    must still be waiting and `while_waiting` checks that nothing was written. Returns what `write` returned once
    the lock is let go."""
    import threading

    from django.db import connection

    from infra.embedder import get_embedder
    from memory.user_lock import user_memory_lock

    get_embedder().embed(["loaded"])  # a first model load alone outlasts the wait below
    outcome = {}

    def run():
        try:
            outcome["value"] = write()
        finally:
            connection.close()

    with user_memory_lock(tenant_id=tenant.pk, user_id=user.pk):
        writer = threading.Thread(target=run)
        writer.start()
        writer.join(timeout=1.5)
        assert writer.is_alive()
        while_waiting()
    writer.join(timeout=30)
    return outcome.get("value")


def test_extraction_waits_while_another_writer_holds_the_users_memories(alice, alice_user):
    _, (message,) = record_turns(alice, alice_user, [("user", FLIGHT)], extract=False)

    def nothing_written():
        assert not _mine(alice, alice_user).exists()
        assert Message.objects.unscoped().get(pk=message.pk).extracted_at is None  # not even marked extracted

    status = _write_while_the_users_lock_is_held(
        alice, alice_user, lambda: message_extract(tenant_id=message.tenant_id, message_id=message.pk).status,
        while_waiting=nothing_written)
    assert status == "done" and _mine(alice, alice_user, subject="destination").count() == 1


def test_a_writer_that_cannot_get_the_lock_gives_up_without_losing_the_message(alice, alice_user, settings):
    from infra.errors import ServiceUnavailable
    from memory.user_lock import user_memory_lock

    settings.MEMORY_USER_LOCK_WAIT_SECONDS = 0.2
    _, (message,) = record_turns(alice, alice_user, [("user", FLIGHT)], extract=False)
    with user_memory_lock(tenant_id=alice.pk, user_id=alice_user.pk):
        with pytest.raises(ServiceUnavailable):
            message_extract(tenant_id=message.tenant_id, message_id=message.pk)  # the task retries with backoff
    assert Message.objects.unscoped().get(pk=message.pk).extracted_at is None and not _mine(alice, alice_user).exists()
    assert message_extract(tenant_id=message.tenant_id, message_id=message.pk).status == "done"


def test_the_remember_tool_takes_its_turn_with_extraction(alice, alice_user):
    from memory.actions import memory_remember

    def nothing_written():
        assert not _mine(alice, alice_user).exists()

    result = _write_while_the_users_lock_is_held(
        alice, alice_user, lambda: memory_remember(tenant=alice, user=alice_user, kind="preference",
                                                   text="Ada prefers aisle seats.")[1],
        while_waiting=nothing_written)
    assert result == "created" and _mine(alice, alice_user, kind="preference").count() == 1


@pytest.fixture
def lock_store_error(monkeypatch):
    """Every acquire of a Redis lock fails as it does when Redis drops the connection; other commands still work,
    so what is checked is the lock's own failure path, not the extraction claim's."""
    import redis
    from redis.lock import Lock

    def refuse(self, *args, **kwargs):
        raise redis.exceptions.ConnectionError("Connection refused")

    monkeypatch.setattr(Lock, "acquire", refuse)


def test_extraction_without_the_lock_store_waits_for_a_retry_instead_of_writing_unlocked(alice, alice_user,
                                                                                       lock_store_error,
                                                                                       monkeypatch):
    from infra.errors import ServiceUnavailable

    _, (message,) = record_turns(alice, alice_user, [("user", FLIGHT)], extract=False)
    with pytest.raises(ServiceUnavailable) as err:
        message_extract(tenant_id=message.tenant_id, message_id=message.pk)
    assert err.value.retryable and err.value.status == 503  # memory_extract_task retries on it with backoff
    assert Message.objects.unscoped().get(pk=message.pk).extracted_at is None and not _mine(alice, alice_user).exists()
    monkeypatch.undo()  # the lock store is back: the retry writes
    assert message_extract(tenant_id=message.tenant_id, message_id=message.pk).status == "done"
    assert _mine(alice, alice_user, subject="destination").count() == 1


def test_remember_without_the_lock_store_answers_503_with_retry_after(alice, alice_user, lock_store_error):
    from infra.errors import ServiceUnavailable
    from memory.actions import memory_remember

    with pytest.raises(ServiceUnavailable) as err:
        memory_remember(tenant=alice, user=alice_user, kind="preference", text="Ada prefers aisle seats.")
    assert err.value.status == 503 and int(err.value.headers["Retry-After"]) >= 1
    assert not _mine(alice, alice_user).exists()
