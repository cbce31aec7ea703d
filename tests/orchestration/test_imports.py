"""Bulk import through the product's write path: both formats, idempotent by external id, resumable from the job's
cursor, and the paced backlog (bridges, extraction) on the bulk queue."""
from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest
from django.db import OperationalError, connection

from context.models import BridgeSummary, SessionLink
from memory.models import MemoryRecord
from orchestration import imports
from orchestration.imports import (
    IMPORT_CLOSE_REASON,
    import_job_advance,
    import_job_create,
    imports_backlog_pending,
    imports_backlog_work,
)
from orchestration.models import ImportJob
from sessions.models import Message, Session
from tests.orchestration.exports import LOCOMO_SAMPLE, OPENAI_EXPORT, as_bytes, openai_conversation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_backlog(monkeypatch):
    """Record the backlog chain's kicks instead of queueing it on a broker nobody consumes here."""
    kicks = []
    monkeypatch.setattr(imports, "imports_backlog_kick", lambda **kw: kicks.append(kw))
    return kicks


def _import(tenant, user, fmt, data, **kwargs) -> ImportJob:
    """Create the job; with eager tasks its task runs on commit, chunk after chunk, as a worker would run it."""
    job = import_job_create(tenant=tenant, user=user, fmt=fmt, payload=as_bytes(data), **kwargs)
    job.refresh_from_db()
    return job


def _messages(tenant, user):
    return Message.objects.for_tenant(tenant).filter(session__user=user).order_by("created_at", "seq")


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True


@pytest.fixture
def held_on_commit(monkeypatch):
    """The job is not started when it is created; the test runs the task (whose next chunks still run eagerly)."""
    from orchestration.tasks import conversations_import_task

    monkeypatch.setattr(conversations_import_task, "delay", lambda *a: None)


def test_locomo_export_becomes_closed_dated_sessions_with_dia_ids(alice, alice_user, eager, no_backlog):
    job = _import(alice, alice_user, "locomo", [LOCOMO_SAMPLE], speaker="Caroline")
    assert (job.status, job.messages_total, job.position, job.messages_created, job.sessions_created,
            job.messages_skipped) == ("done", 5, 5, 5, 2, 0)
    assert job.payload is None  # the export is not kept once it is stored
    sessions = list(Session.objects.for_tenant(alice).filter(user=alice_user).order_by("opened_at"))
    assert [(s.external_id, s.state, s.close_reason) for s in sessions] == [
        ("mini-1:1", "closed", IMPORT_CLOSE_REASON), ("mini-1:2", "closed", IMPORT_CLOSE_REASON)]
    assert sessions[0].opened_at == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert sessions[1].previous_id == sessions[0].pk
    assert SessionLink.objects.for_tenant(alice).filter(from_session=sessions[1], to_session=sessions[0],
                                                        kind="same_user").exists()
    rows = list(_messages(alice, alice_user).values_list("external_id", "role", "name", "created_at", "content"))
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("D1:1", "user", ""), ("D1:2", "assistant", "Melanie"), ("D1:3", "user", ""), ("D2:1", "assistant", "Melanie"),
        ("D2:2", "user", "")]
    assert rows[2][3] == datetime(2023, 5, 8, 13, 57, tzinfo=timezone.utc)  # 30 s a turn from the session's date
    assert rows[2][4].endswith("[shares an image: a photo of a rainbow flag]")


def test_openai_export_keeps_ids_and_timestamps_and_leaves_blank_messages_out(alice, alice_user, eager, no_backlog):
    job = _import(alice, alice_user, "openai", OPENAI_EXPORT)
    assert (job.status, job.sessions_total, job.messages_total, job.messages_created) == ("done", 2, 6, 6)
    first = Session.objects.for_tenant(alice).get(user=alice_user, external_id="conversation-1")
    second = Session.objects.for_tenant(alice).get(user=alice_user, external_id="chat-42")
    assert second.title == "Lisbon trip"
    assert list(first.messages.order_by("seq").values_list("external_id", "role")) == [
        ("conversation-1:1", "system"), ("conversation-1:2", "user"), ("conversation-1:3", "assistant")]
    got = list(second.messages.order_by("seq").values_list("external_id", "content", "created_at"))
    assert [g[0] for g in got] == ["m1", "m2", "m4"]
    assert got[0][2] == datetime(2024, 3, 1, 9, 0, 5, tzinfo=timezone.utc)
    assert got[1] == ("m2", "Lovely. For how long?", datetime(2024, 3, 1, 9, 0, 10, tzinfo=timezone.utc))
    # None given: a second after the message before it in the file (the blank one).
    assert got[2][2] == datetime(2024, 3, 1, 9, 0, 12, tzinfo=timezone.utc)
    # The user's and the assistant's words wait for extraction (the roles extraction reads), as for live messages;
    # a tenant that keeps only users' words leaves the assistant's out.
    pending = set(Message.objects.for_tenant(alice).filter(extracted_at__isnull=True).values_list("external_id",
                                                                                                  flat=True))
    assistant = set(Message.objects.for_tenant(alice).filter(role="assistant").values_list("external_id", flat=True))
    assert assistant and pending == {"conversation-1:2", "m1", "m4"} | assistant


def test_reimport_of_the_same_export_writes_nothing_twice(alice, alice_user, eager, no_backlog):
    first = _import(alice, alice_user, "openai", OPENAI_EXPORT)
    before = list(_messages(alice, alice_user).values_list("pk", flat=True))
    again = _import(alice, alice_user, "openai", OPENAI_EXPORT)
    assert (again.status, again.messages_created, again.sessions_created, again.messages_skipped) == ("done", 0, 0, 6)
    assert list(_messages(alice, alice_user).values_list("pk", flat=True)) == before
    assert Session.objects.for_tenant(alice).filter(user=alice_user).count() == first.sessions_created == 2


def test_messages_a_later_export_adds_to_a_stored_conversation_go_to_a_continuation(alice, alice_user, eager,
                                                                                    no_backlog):
    _import(alice, alice_user, "openai", [openai_conversation("c1", 2)])
    job = _import(alice, alice_user, "openai", [openai_conversation("c1", 5)])
    assert (job.messages_created, job.messages_skipped) == (3, 2)
    parts = dict(Session.objects.for_tenant(alice).filter(user=alice_user).values_list("external_id", "message_seq"))
    assert parts == {"c1": 2, "c1#2": 3}
    assert sorted(_messages(alice, alice_user).values_list("external_id", flat=True)) == [f"m{i}" for i in range(1, 6)]
    again = _import(alice, alice_user, "openai", [openai_conversation("c1", 5)])
    assert (again.messages_created, again.messages_skipped) == (0, 5)


def test_sessions_longer_than_a_batch_are_split_into_parts(alice, alice_user, eager, no_backlog, settings):
    settings.CONTINUUM_MAX_BATCH = 4
    job = _import(alice, alice_user, "openai", [openai_conversation("long", 10)])
    assert (job.messages_created, job.sessions_created) == (10, 3)
    parts = list(Session.objects.for_tenant(alice).filter(user=alice_user).order_by("opened_at")
                 .values_list("external_id", "message_seq", "previous__external_id"))
    assert parts == [("long", 4, None), ("long#2", 4, "long"), ("long#3", 2, "long#2")]


def test_an_import_interrupted_after_its_first_chunk_resumes_with_exact_counts(alice, alice_user, eager, no_backlog,
                                                                                held_on_commit, settings, monkeypatch):
    settings.CONTINUUM_MAX_BATCH = 5
    settings.CONTINUUM_IMPORT_CHUNK_MESSAGES = 5
    export = [openai_conversation("a", 12), openai_conversation("b", 11)]
    job = import_job_create(tenant=alice, user=alice_user, fmt="openai", payload=as_bytes(export))
    first = import_job_advance(tenant_id=alice.pk, job_id=job.pk, max_messages=5)
    assert (first.more, first.job.position, first.job.messages_created) == (True, 5, 5)

    real_record, calls = imports.messages_append, []

    def record_then_crash(**kwargs):
        calls.append(1)
        if len(calls) == 2:  # the worker dies inside the second part of this run
            raise OperationalError("server closed the connection unexpectedly")
        return real_record(**kwargs)

    monkeypatch.setattr(imports, "messages_append", record_then_crash)
    with pytest.raises(OperationalError):
        import_job_advance(tenant_id=alice.pk, job_id=job.pk)
    job.refresh_from_db()
    # The part that was cut off rolled back with its cursor move; the one before it is stored and counted.
    assert (job.status, job.position, job.messages_created) == ("running", 10, 10)
    assert _messages(alice, alice_user).count() == 10

    monkeypatch.setattr(imports, "messages_append", real_record)
    from orchestration.tasks import conversations_import_task

    conversations_import_task.apply(args=[str(alice.pk), str(job.pk)])  # the redelivered task, chunk by chunk
    job.refresh_from_db()
    assert (job.status, job.position, job.messages_created, job.messages_skipped) == ("done", 23, 23, 0)
    ext = list(_messages(alice, alice_user).values_list("session__external_id", "external_id"))
    assert len(ext) == len(set(ext)) == 23
    assert dict(Session.objects.for_tenant(alice).filter(user=alice_user)
                .values_list("external_id", "message_seq")) == {"a": 5, "a#2": 5, "a#3": 2, "b": 5, "b#2": 5,
                                                                "b#3": 1}


def test_an_outage_in_the_task_is_retried_and_the_job_finishes(alice, alice_user, eager, no_backlog, held_on_commit,
                                                                settings, monkeypatch):
    settings.CONTINUUM_MAX_BATCH = 5
    settings.CONTINUUM_IMPORT_CHUNK_MESSAGES = 5
    export = [openai_conversation("a", 12)]
    job = import_job_create(tenant=alice, user=alice_user, fmt="openai", payload=as_bytes(export))
    real_part, calls = imports._part_write, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("the database went away")
        return real_part(*args, **kwargs)

    monkeypatch.setattr(imports, "_part_write", flaky)
    from orchestration.tasks import conversations_import_task

    result = conversations_import_task.apply(args=[str(alice.pk), str(job.pk)], throw=False)  # retried in place
    assert result.successful()
    job.refresh_from_db()
    assert (job.status, job.messages_created, _messages(alice, alice_user).count()) == ("done", 12, 12)


def test_a_permanent_error_fails_the_job_and_keeps_what_was_stored(alice, alice_user, eager, no_backlog,
                                                                    held_on_commit, settings, monkeypatch):
    settings.CONTINUUM_MAX_BATCH = 5
    settings.CONTINUUM_IMPORT_CHUNK_MESSAGES = 5
    job = import_job_create(tenant=alice, user=alice_user, fmt="openai",
                            payload=as_bytes([openai_conversation("a", 12)]))
    real_part, calls = imports._part_write, []

    def broken(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("a bug")
        return real_part(*args, **kwargs)

    monkeypatch.setattr(imports, "_part_write", broken)
    from orchestration.tasks import conversations_import_task

    with pytest.raises(ValueError):
        conversations_import_task.apply(args=[str(alice.pk), str(job.pk)], throw=True)
    job.refresh_from_db()
    assert (job.status, job.position, job.error) == ("failed", 5, "ValueError: a bug")
    assert _messages(alice, alice_user).count() == 5
    # The same export again stores the rest and nothing twice.
    monkeypatch.setattr(imports, "_part_write", real_part)
    again = _import(alice, alice_user, "openai", [openai_conversation("a", 12)])
    conversations_import_task.apply(args=[str(alice.pk), str(again.pk)])
    again.refresh_from_db()
    assert (again.messages_created, again.messages_skipped, _messages(alice, alice_user).count()) == (7, 5, 12)


def test_two_runs_of_one_job_at_once_write_every_message_once(alice, alice_user, no_backlog, held_on_commit,
                                                             settings):
    settings.CONTINUUM_MAX_BATCH = 3
    export = [openai_conversation(f"c{i}", 7) for i in range(4)]
    job = import_job_create(tenant=alice, user=alice_user, fmt="openai", payload=as_bytes(export))
    barrier, errors = threading.Barrier(2), []

    def run():
        try:
            barrier.wait()
            import_job_advance(tenant_id=alice.pk, job_id=job.pk)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    job.refresh_from_db()
    assert (job.position, job.messages_created, job.messages_skipped) == (28, 28, 0)
    assert _messages(alice, alice_user).count() == 28


def test_an_import_leaves_the_users_open_session_open(alice, alice_user, alice_session, eager, no_backlog):
    from sessions.selectors import session_open_for_user

    _import(alice, alice_user, "locomo", [LOCOMO_SAMPLE])
    alice_session.refresh_from_db()
    assert alice_session.state == "open"
    assert session_open_for_user(tenant=alice, user=alice_user).pk == alice_session.pk


def test_imported_sessions_get_their_bridges_and_extraction_from_the_paced_backlog(alice, alice_user, eager,
                                                                                   monkeypatch):
    from orchestration.tasks import message_extract_task, session_finish_task

    alice.memory_ttl_days = {"event": None, "goal": None}
    alice.save()
    live_queue = []
    monkeypatch.setattr(message_extract_task, "delay", lambda *a: live_queue.append(a))
    monkeypatch.setattr(session_finish_task, "delay", lambda *a: live_queue.append(a))
    job = _import(alice, alice_user, "locomo", [LOCOMO_SAMPLE], speaker="Caroline")
    assert job.status == "done"
    assert live_queue == []  # nothing of the import went to the queues live turns use
    sessions = Session.objects.for_tenant(alice).filter(user=alice_user)
    assert BridgeSummary.objects.for_tenant(alice).filter(session__in=sessions).count() == 2
    assert imports_backlog_pending(tenant_id=alice.pk, user_id=alice_user.pk) == {"bridges": 0, "extractions": 0}
    memory = MemoryRecord.objects.for_tenant(alice).get(user=alice_user, text__contains="support group",
                                                         kind="event")
    assert memory.source_message.external_id == "D1:3"
    assert memory.created_at == datetime(2023, 5, 8, 13, 57, tzinfo=timezone.utc)
    from infra.redis_client import Keys, get_redis

    assert not get_redis().exists(Keys.import_backlog_flag(alice.pk, alice_user.pk))  # the chain ended


def test_the_backlog_works_in_bounded_batches_oldest_first(alice, alice_user, eager, no_backlog):
    alice.remember_assistant_turns = False  # the users' words alone: six extractions to batch
    alice.save()
    _import(alice, alice_user, "openai", [openai_conversation("b", 6, created_at="2024-02-01T00:00:00Z"),
                                          openai_conversation("a", 6)])
    assert imports_backlog_pending(tenant_id=alice.pk, user_id=alice_user.pk) == {"bridges": 2, "extractions": 6}
    run = imports_backlog_work(tenant_id=alice.pk, user_id=alice_user.pk, limit=3)
    assert (run.bridges, run.extracted, run.more) == (2, 1, True)
    first = Message.objects.for_tenant(alice).filter(extracted_at__isnull=False, role="user")
    assert list(first.values_list("session__external_id", "external_id")) == [("a", "m1")]
    runs = 1
    while run.more:
        run = imports_backlog_work(tenant_id=alice.pk, user_id=alice_user.pk, limit=3)
        runs += 1
    assert runs == 3
    assert imports_backlog_pending(tenant_id=alice.pk, user_id=alice_user.pk) == {"bridges": 0, "extractions": 0}


def test_import_work_is_routed_to_the_bulk_queue():
    from config.celery import app

    for name in ("orchestration.tasks.conversations_import_task", "orchestration.tasks.imports_backlog_task"):
        assert app.amqp.router.route({}, name)["queue"].name == "bulk"
    assert app.amqp.router.route({}, "orchestration.tasks.message_extract_task")["queue"].name == "llm"
