"""A turn's messages are extracted together once the turn ends: one task, one embedding call, one transaction."""
from __future__ import annotations

import httpx
import pytest

from memory.models import MemoryKind, MemoryRecord
from sessions.models import Message

from .scripted_llm import answer

pytestmark = pytest.mark.django_db

EXTRACT_ONE, EXTRACT_TURN = "orchestration.tasks.message_extract_task", "orchestration.tasks.messages_extract_task"


@pytest.fixture
def queued(monkeypatch):
    """Every task a request queues, by name and arguments (none runs)."""
    from infra import task_queue
    from orchestration import messages

    seen: list[tuple] = []

    def record(name, *args, **kwargs):
        seen.append((name, args))

    monkeypatch.setattr(task_queue, "task_enqueue", record)
    monkeypatch.setattr(messages, "task_enqueue", record)
    return seen


def turn(client, session, text: str):
    return client.post(f"/api/v1/sessions/{session.id}/turns", {"input": text}, format="json")


def extraction_tasks(queued: list[tuple]) -> list[tuple]:
    return [(name, args) for name, args in queued if name in (EXTRACT_ONE, EXTRACT_TURN)]


def test_a_turn_queues_one_extraction_task_for_its_input_and_answer(llm, alice, alice_client, alice_session, queued,
                                                                    django_capture_on_commit_callbacks):
    llm.add(answer("Aisle seats it is."))
    with django_capture_on_commit_callbacks(execute=True):
        assert turn(alice_client, alice_session, "I prefer aisle seats.").status_code == 200
    ids = [str(m.pk) for m in Message.objects.unscoped().filter(session=alice_session).order_by("seq")]
    assert len(ids) == 2
    assert extraction_tasks(queued) == [(EXTRACT_TURN, (str(alice.pk), ids))]


def test_a_turn_whose_model_fails_still_queues_its_input_for_extraction(llm, alice, alice_client, alice_session,
                                                                         queued, settings,
                                                                         django_capture_on_commit_callbacks):
    settings.LLM_MAX_RETRIES = 0
    llm.add(httpx.Response(503, json={"error": {"message": "overloaded"}}))
    with django_capture_on_commit_callbacks(execute=True):
        assert turn(alice_client, alice_session, "I prefer aisle seats.").status_code == 503
    stored = Message.objects.unscoped().get(session=alice_session)
    assert stored.role == "user"
    assert extraction_tasks(queued) == [(EXTRACT_TURN, (str(alice.pk), [str(stored.pk)]))]


def test_the_turn_task_extracts_the_inputs_facts_and_the_answers_episode_in_one_embedding_call(
        llm, alice, alice_client, alice_session, queued, monkeypatch, settings, django_capture_on_commit_callbacks):
    from memory.actions import extract
    from orchestration.tasks import messages_extract_task

    llm.add(answer("Noted: aisle seats, and never United."))
    with django_capture_on_commit_callbacks(execute=True):
        assert turn(alice_client, alice_session, "I prefer aisle seats, and never United.").status_code == 200
    (_, (tenant_id, ids)), = extraction_tasks(queued)
    settings.LLM_BASE_URL = ""  # the worker extracts with the rules alone: the scripted model answers the turn only

    embedder, calls = extract.get_embedder(), []

    class Counting:
        def embed(self, texts):
            calls.append(list(texts))
            return embedder.embed(texts)

    monkeypatch.setattr(extract, "get_embedder", lambda: Counting())
    with django_capture_on_commit_callbacks(execute=True):
        written = messages_extract_task.apply(args=(tenant_id, ids)).get()
    assert len(calls) == 1  # both messages' candidates in one batch
    user_message, reply = Message.objects.unscoped().filter(session=alice_session).order_by("seq")
    assert user_message.extracted_at is not None and reply.extracted_at is not None
    from_input = MemoryRecord.objects.unscoped().filter(source_message=user_message)
    from_reply = MemoryRecord.objects.unscoped().filter(source_message=reply)
    assert from_input.exclude(kind=MemoryKind.EVENT).exists()  # the rules' preference
    assert list(from_reply.values_list("kind", "source_type")) == [(MemoryKind.EVENT, "assistant")]
    assert written == from_input.count() + from_reply.count()
    # Run again (a redelivered task): every message is claimed already, nothing is written twice.
    assert messages_extract_task.apply(args=(tenant_id, ids)).get() == 0
    assert MemoryRecord.objects.unscoped().filter(source_message__session=alice_session).count() == written


def test_a_batch_holds_at_most_one_message_that_states_facts(alice, alice_user, alice_session):
    from memory.actions import memory_extract_many
    from orchestration.messages import messages_append, messages_extract, source_of
    from sessions.services import NewMessage

    first, second = messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content="My seat preference is aisle."),
        NewMessage(role="user", content="My seat preference is window.")])
    with pytest.raises(ValueError):
        memory_extract_many(tenant=alice, user=alice_user,
                            items=[(source_of(first), lambda: True), (source_of(second), lambda: True)])
    # The service splits them: the second is verified after the first is stored, so it supersedes it.
    results = messages_extract(tenant_id=alice.pk, message_ids=[first.pk, second.pk])
    assert [r.status for r in results] == ["done", "done"]
    seat = MemoryRecord.objects.unscoped().filter(user=alice_user, subject="seat preference")
    assert sorted(seat.values_list("value", "status")) == [("aisle", "superseded"), ("window", "active")]


def test_the_turns_context_receipt_rides_with_its_extraction_task(llm, alice, alice_client, alice_session, queued,
                                                                   django_capture_on_commit_callbacks, monkeypatch):
    """One background task per turn: the receipt of the context the turn composed is handed to the extraction task,
    not queued as a task of its own."""
    from infra import task_queue

    kwargs_seen = []
    monkeypatch.setattr(task_queue, "task_enqueue", lambda name, *a, **kw: (queued.append((name, a)),
                                                                             kwargs_seen.append((name, kw))))
    llm.add(answer("Aisle seats it is."))
    with django_capture_on_commit_callbacks(execute=True):
        assert turn(alice_client, alice_session, "I prefer aisle seats.").status_code == 200
    assert [name for name, _ in queued] == [EXTRACT_TURN]
    (name, kw), = kwargs_seen
    (receipt,) = kw["receipts"]
    assert receipt["session_id"] == str(alice_session.pk) and receipt["surface"] == "assistant"


def test_the_extraction_task_writes_the_turns_receipt_once(llm, alice, alice_client, alice_session, settings,
                                                           django_capture_on_commit_callbacks, monkeypatch):
    from orchestration import tasks
    from orchestration.models import ContextReceipt
    from orchestration.tasks import messages_extract_task

    settings.CELERY_TASK_ALWAYS_EAGER = True
    monkeypatch.setattr(tasks, "messages_extract", lambda **kw: [])  # the receipt is what is looked at here
    llm.add(answer("Aisle seats it is."))
    with django_capture_on_commit_callbacks(execute=True):
        assert turn(alice_client, alice_session, "I prefer aisle seats.").status_code == 200
    receipts = ContextReceipt.objects.for_tenant(alice).filter(session=alice_session)
    assert [r.surface for r in receipts] == ["assistant"]
    # delivered again (a retry, a redelivery): still one receipt
    payload = {"id": str(receipts[0].pk), "tenant_id": str(alice.pk), "user_id": str(alice_session.user_id),
               "session_id": str(alice_session.pk), "surface": "assistant", "created_at": "2026-12-03T10:00:00+00:00",
               "items": []}
    messages_extract_task.delay(str(alice.pk), [], receipts=[payload])
    assert receipts.count() == 1
