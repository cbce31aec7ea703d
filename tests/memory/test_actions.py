"""memory.actions is the only writer of memory state: every change leaves a history row and an outbox entry."""
from __future__ import annotations

from datetime import timedelta

import pytest

from infra import clock
from memory import actions
from memory.lifecycle.decay import memories_decay
from memory.models import MemoryEvent, MemoryRecord, MemoryStatus, VectorOutbox

pytestmark = pytest.mark.django_db(transaction=True)


def _counts(tenant, record):
    events = MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid=record.pk).count()
    outbox = VectorOutbox.objects.for_tenant(tenant.pk).filter(memory_uuid=record.pk).count()
    return events, outbox


def _changed(tenant, record, change):
    before = _counts(tenant, record)
    change()
    after = _counts(tenant, record)
    return after[0] - before[0], after[1] - before[1]


def _make(tenant, user, text="I prefer aisle seats", **kw):
    return actions.memory_create(tenant=tenant, user=user, kind="preference", text=text, **kw)


def test_create_writes_history_and_outbox(alice, alice_user):
    record = _make(alice, alice_user)
    assert _counts(alice, record) == (1, 1)


@pytest.mark.parametrize("name", ["edit", "delete", "restore", "expire", "approve", "reject", "supersede"])
def test_each_control_writes_history_and_outbox(alice, alice_user, name):
    record = _make(alice, alice_user)
    kw = dict(tenant=alice, memory=record, actor_type="staff", actor_id="ops")
    if name == "restore":
        actions.memory_delete(**kw)
        change = lambda: actions.memory_restore(**kw)  # noqa: E731
    elif name in ("approve", "reject"):
        MemoryRecord.objects.for_tenant(alice).filter(pk=record.pk).update(status=MemoryStatus.PENDING_REVIEW)
        change = lambda: getattr(actions, f"memory_{name}")(**kw)  # noqa: E731
    elif name == "edit":
        change = lambda: actions.memory_update_text(text="I prefer window seats", **kw)  # noqa: E731
    elif name == "supersede":
        newer = _make(alice, alice_user, "I now prefer window seats")

        def change():
            from django.db import transaction

            with transaction.atomic():
                old = MemoryRecord.objects.for_tenant(alice).select_for_update().get(pk=record.pk)
                actions.memory_supersede(old=old, new=newer, actor_type="system")
                actions.memory_vectors_enqueue([old])
    else:
        change = lambda: getattr(actions, f"memory_{name}")(**kw)  # noqa: E731
    events, outbox = _changed(alice, record, change)
    assert events >= 1 and outbox >= 1, (name, events, outbox)


def test_decay_writes_history_and_a_payload_write(alice, alice_user):
    record = _make(alice, alice_user)
    MemoryRecord.objects.for_tenant(alice).filter(pk=record.pk).update(
        learned_at=clock.now() - timedelta(days=400), last_accessed_at=None)
    events, outbox = _changed(alice, record, lambda: memories_decay(tenant=alice, limit=10))
    assert (events, outbox) == (1, 1)
    event = MemoryEvent.objects.for_tenant(alice).filter(memory_uuid=record.pk).latest("id")
    assert event.action == MemoryEvent.Action.DECAYED
    assert event.after["importance"] < event.before["importance"]
    row = VectorOutbox.objects.for_tenant(alice.pk).filter(memory_uuid=record.pk).latest("id")
    assert row.op == VectorOutbox.Op.PAYLOAD
    # A second pass at the same time changes nothing and writes nothing.
    assert _changed(alice, record, lambda: memories_decay(tenant=alice, limit=10)) == (0, 0)


def test_decay_reaches_the_point_payload_without_reembedding(alice, alice_user, monkeypatch):
    from infra.vector_store import Scope, get_vector_store
    from memory.outbox import outbox_apply

    record = _make(alice, alice_user)
    outbox_apply()
    MemoryRecord.objects.for_tenant(alice).filter(pk=record.pk).update(learned_at=clock.now() - timedelta(days=400))
    embedded = []
    import memory.points as points

    monkeypatch.setattr(points, "get_embedder", lambda: embedded.append(1) or (_ for _ in ()).throw(AssertionError))
    memories_decay(tenant=alice, limit=10)
    outbox_apply()
    (hit,) = get_vector_store().retrieve(Scope(tenant_id=str(alice.pk)), [str(record.pk)])
    stored = MemoryRecord.objects.for_tenant(alice).get(pk=record.pk)
    assert abs(hit.payload["importance"] - stored.importance) < 1e-6
    assert embedded == []


def test_forget_leaves_a_tombstone_and_a_delete(alice, alice_user):
    from memory.lifecycle.forget import memories_forget

    record = _make(alice, alice_user)
    actions.memory_delete(tenant=alice, memory=record, actor_type="end_user")
    MemoryRecord.objects.for_tenant(alice).filter(pk=record.pk).update(
        status_changed_at=clock.now() - timedelta(days=365))
    events, outbox = _changed(alice, record, lambda: memories_forget(tenant=alice, limit=10))
    assert events == 1 and outbox == 1
    assert not MemoryRecord.objects.for_tenant(alice).filter(pk=record.pk).exists()
    assert VectorOutbox.objects.for_tenant(alice.pk).filter(memory_uuid=record.pk).latest("id").op == "delete"


def test_a_rerun_reads_the_rows_it_already_wrote_in_one_statement(alice, alice_user):
    """Extraction retries land on rows a first run wrote: they are read at once, not one query per memory."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from memory.extraction.candidate import Candidate
    from memory.extraction.verify import CREATE, Decision

    decisions = [Decision(Candidate("fact", f"Ada owns {n} bikes.", source_type="user_stated"), CREATE, [])
                 for n in range(5)]
    ids = [actions.memory_id_for("message-1", n) for n in range(5)]
    with transaction.atomic():
        first = actions.decisions_apply(tenant=alice, user=alice_user, decisions=decisions, memory_ids=ids)
    assert [outcome for _, outcome in first] == ["created"] * 5
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        again = actions.decisions_apply(tenant=alice, user=alice_user, decisions=decisions, memory_ids=ids)
    assert [(str(r.pk), outcome) for r, outcome in again] == [(str(i), "exists") for i in ids]
    reads = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    assert len(reads) == 1, reads
