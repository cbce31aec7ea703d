"""The vector outbox: applied after commit, kept pending while the store is down, flushed later."""
from __future__ import annotations

import hashlib
import math
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from infra.embedder import set_embedder
from infra.redis_client import Keys, get_redis
from infra.vector_store import Scope, get_vector_store, set_vector_store
from infra.vector_store.base import LAYOUT_KEY, VectorStoreError
from infra.vector_store.sparse import SPARSE_LAYOUT
from memory.models import MemoryRecord, VectorOutbox
from memory.outbox import outbox_apply, outbox_enqueue, outbox_flush_task, outbox_pending_count
from memory.points import point_payload, points_for_records


class HashEmbedder:
    """Deterministic 384-d unit vectors from the words of a text; counts its calls."""

    model_name = "hash"
    dim = 384

    def __init__(self):
        self.calls = []

    def embed(self, texts):
        self.calls.append(list(texts))
        out = []
        for text in texts:
            v = [0.0] * self.dim
            for word in text.lower().split():
                v[int(hashlib.sha1(word.encode()).hexdigest(), 16) % self.dim] += 1.0
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / norm for x in v])
        return out


class DownStore:
    """A vector store whose every call fails as a dead Qdrant would."""

    backend_name = "down"

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise VectorStoreError("Qdrant failed: ConnectionRefusedError")
        return fail


@pytest.fixture(autouse=True)
def embedder():
    e = HashEmbedder()
    set_embedder(e)
    yield e
    set_embedder(None)


@pytest.fixture
def make_memory(alice, alice_user):
    def _make(text, **kwargs):
        kwargs.setdefault("kind", "fact")
        return MemoryRecord.objects.unscoped().create(tenant=alice, user=alice_user, text=text, **kwargs)
    return _make


def _scope(alice, alice_user):
    return Scope(str(alice.id), str(alice_user.id))


def test_points_are_applied_after_commit_not_before(alice, alice_user, make_memory,
                                                    django_capture_on_commit_callbacks):
    store = get_vector_store()
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            memory = make_memory("I fly to Newark on Friday")
            outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id], op="upsert")
            assert store.count(_scope(alice, alice_user)) == 0
            assert outbox_pending_count() == 1
    assert store.count(_scope(alice, alice_user)) == 1
    [hit] = store.retrieve(_scope(alice, alice_user), [str(memory.id)])
    assert hit.payload == {**point_payload(memory), LAYOUT_KEY: SPARSE_LAYOUT}
    assert outbox_pending_count() == 0
    assert VectorOutbox.objects.unscoped().get().done_at is not None


def test_a_rolled_back_transaction_writes_no_point(alice, alice_user, make_memory,
                                                   django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError):
            with transaction.atomic():
                memory = make_memory("never committed")
                outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id])
                raise RuntimeError("rollback")
    assert callbacks == []
    assert get_vector_store().count(_scope(alice, alice_user)) == 0


def test_texts_are_embedded_in_one_batch(alice, make_memory, embedder, django_capture_on_commit_callbacks):
    memories = [make_memory(f"memory number {i}") for i in range(5)]
    with django_capture_on_commit_callbacks(execute=True):
        outbox_enqueue(tenant_id=alice.id, memory_ids=[m.id for m in memories])
    assert len(embedder.calls) == 1 and len(embedder.calls[0]) == 5


def test_a_large_commit_is_applied_in_batches(alice, alice_user, make_memory, embedder, monkeypatch,
                                             django_capture_on_commit_callbacks):
    monkeypatch.setattr("memory.outbox.APPLY_BATCH", 2)
    memories = [make_memory(f"trip note {i}") for i in range(5)]
    with django_capture_on_commit_callbacks(execute=True):
        outbox_enqueue(tenant_id=alice.id, memory_ids=[m.id for m in memories])
    assert [len(c) for c in embedder.calls] == [2, 2, 1]
    assert get_vector_store().count(_scope(alice, alice_user)) == 5 and outbox_pending_count() == 0


def test_store_down_keeps_rows_pending_and_a_later_flush_applies_them(alice, alice_user, make_memory,
                                                                      django_capture_on_commit_callbacks):
    real = get_vector_store()
    set_vector_store(DownStore())
    try:
        with django_capture_on_commit_callbacks(execute=True):
            with transaction.atomic():  # the request that committed sees no error
                memories = [make_memory(f"booking reference {i}") for i in range(3)]
                outbox_enqueue(tenant_id=alice.id, memory_ids=[m.id for m in memories])
        rows = list(VectorOutbox.objects.unscoped().all())
        assert len(rows) == 3
        assert all(r.done_at is None and r.attempts == 1 and "ConnectionRefused" in r.last_error for r in rows)
        assert outbox_flush_task() == 0  # still down: nothing applied, nothing raised
        assert VectorOutbox.objects.unscoped().filter(attempts=2).count() == 3
    finally:
        set_vector_store(real)
    assert real.count(_scope(alice, alice_user)) == 0
    assert outbox_flush_task() == 3
    assert outbox_pending_count() == 0
    db_count = MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user).count()
    assert real.count(_scope(alice, alice_user)) == db_count == 3


def test_delete_op_removes_the_point(alice, alice_user, make_memory, django_capture_on_commit_callbacks):
    memory = make_memory("my locker code is 4512")
    with django_capture_on_commit_callbacks(execute=True):
        outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id])
    assert get_vector_store().count(_scope(alice, alice_user)) == 1
    with django_capture_on_commit_callbacks(execute=True):
        outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id], op="delete")
    assert get_vector_store().count(_scope(alice, alice_user)) == 0


def test_upsert_of_a_record_deleted_since_removes_its_point(alice, alice_user, make_memory,
                                                            django_capture_on_commit_callbacks):
    memory = make_memory("temporary note")
    with django_capture_on_commit_callbacks(execute=True):
        outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id])
    memory_id = memory.id
    memory.delete()
    with django_capture_on_commit_callbacks(execute=True):
        outbox_enqueue(tenant_id=alice.id, memory_ids=[memory_id], op="upsert")
    assert get_vector_store().count(_scope(alice, alice_user)) == 0
    assert outbox_pending_count() == 0


def test_upsert_of_a_record_marked_deleted_removes_its_point(alice, alice_user, make_memory,
                                                            django_capture_on_commit_callbacks):
    memory = make_memory("old address")
    with django_capture_on_commit_callbacks(execute=True):
        outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id])
    MemoryRecord.objects.unscoped().filter(pk=memory.pk).update(status="deleted")
    with django_capture_on_commit_callbacks(execute=True):
        outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id], op="upsert")
    assert get_vector_store().count(_scope(alice, alice_user)) == 0


def test_the_last_op_recorded_for_a_memory_wins(alice, alice_user, make_memory,
                                                django_capture_on_commit_callbacks):
    memory = make_memory("seat 12A")
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id], op="upsert")
            outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id], op="delete")
    assert get_vector_store().count(_scope(alice, alice_user)) == 0
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id], op="delete")
            outbox_enqueue(tenant_id=alice.id, memory_ids=[memory.id], op="upsert")
    assert get_vector_store().count(_scope(alice, alice_user)) == 1


def test_applying_twice_writes_nothing_twice(alice, alice_user, make_memory):
    memories = [make_memory(f"fact {i}") for i in range(3)]
    outbox_enqueue(tenant_id=alice.id, memory_ids=[m.id for m in memories])  # test transaction: not yet applied
    assert outbox_apply() == 3
    VectorOutbox.objects.unscoped().update(done_at=None)  # as if the worker died before recording completion
    assert outbox_apply() == 3
    assert get_vector_store().count(_scope(alice, alice_user)) == 3


def test_another_tenants_memory_is_never_written_under_this_tenant(alice, bob, make_memory):
    memory = make_memory("alice's secret plan")
    outbox_enqueue(tenant_id=bob.id, memory_ids=[memory.id])  # a bug elsewhere names the wrong tenant
    outbox_apply()
    store = get_vector_store()
    assert store.count(Scope(str(bob.id))) == 0
    assert store.count(Scope(str(alice.id))) == 0


def test_payload_follows_the_contract(alice, alice_user, alice_session, make_memory):
    expires = timezone.now() + timedelta(days=3)
    memory = make_memory("I prefer aisle seats", session=alice_session, expires_at=expires, kind="preference")
    [point] = points_for_records([memory])
    assert point.memory_id == str(memory.id) and point.text == memory.text and len(point.dense) == 384
    p = point.payload
    assert p["tenant_id"] == str(alice.id) and p["user_id"] == str(alice_user.id)
    assert p["kind"] == "preference" and p["status"] == "active" and p["session_id"] == str(alice_session.id)
    assert p["created_at"] == memory.created_at.timestamp() and p["expires_at"] == expires.timestamp()
    assert p["source_message_id"] is None
    assert "expires_at" not in point_payload(make_memory("no expiry"))


def test_flush_is_bounded_and_re_enqueues_itself_while_work_remains(alice, make_memory, monkeypatch):
    memories = [make_memory(f"item {i}") for i in range(5)]
    outbox_enqueue(tenant_id=alice.id, memory_ids=[m.id for m in memories])
    enqueued = []
    monkeypatch.setattr(outbox_flush_task, "apply_async", lambda *a, **kw: enqueued.append(kw))
    assert outbox_flush_task(batch_size=2, max_batches=1) == 2
    assert outbox_pending_count() == 3 and len(enqueued) == 1
    assert outbox_flush_task(batch_size=2, max_batches=5) == 3
    assert outbox_pending_count() == 0 and len(enqueued) == 1


def test_flush_does_nothing_while_another_flush_holds_the_lock(alice, make_memory):
    outbox_enqueue(tenant_id=alice.id, memory_ids=[make_memory("x").id])
    get_redis().set(Keys.global_lock("outbox-flush"), "1", ex=30)
    assert outbox_flush_task() == 0
    assert outbox_pending_count() == 1


def test_enqueue_refuses_an_unknown_op(alice):
    with pytest.raises(ValueError):
        outbox_enqueue(tenant_id=alice.id, memory_ids=["x"], op="merge")
    assert outbox_enqueue(tenant_id=alice.id, memory_ids=[]) == []
