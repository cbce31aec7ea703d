"""The vector outbox: writes to Qdrant recorded in the database transaction, applied after it commits.

A service that changes MemoryRecord rows calls `outbox_enqueue()` inside its transaction. After commit the
rows are applied at once (embed + upsert, or delete). If the vector store is down they stay pending, with
the error recorded, and `outbox_flush_task` applies them later. Applying is idempotent: point ids are
deterministic and an upsert always writes the record's current state, so running a row twice is harmless.
"""
from __future__ import annotations

import functools
import logging
from collections import defaultdict

from django.db import DatabaseError, transaction
from django.db.models import F
from redis.exceptions import RedisError

from infra.clock import now
from infra.redis_client import Keys, held_lock
from infra.task_retry import RETRY_ON, service_task
from infra.vector_store import Scope, get_vector_store
from infra.vector_store.base import SCOPE_KEYS

from .models import MemoryRecord, MemoryStatus, VectorOutbox
from .points import point_payload, points_for_records

log = logging.getLogger(__name__)

APPLY_BATCH = 200  # memories embedded and written per round trip
FLUSH_LOCK_SECONDS = 240  # longer than a bounded flush run, shorter than the beat interval's worst case


def outbox_enqueue(*, tenant_id, memory_ids, op: str = VectorOutbox.Op.UPSERT) -> list[int]:
    """Record pending vector writes in the caller's transaction; they are applied after it commits."""
    if op not in VectorOutbox.Op.values:
        raise ValueError(f"Unknown outbox op {op!r}.")
    unique = list(dict.fromkeys(str(m) for m in memory_ids))
    if not unique:
        return []
    rows = VectorOutbox.objects.bulk_create(
        [VectorOutbox(tenant_id_value=tenant_id, memory_uuid=memory_id, op=op) for memory_id in unique]
    )
    row_ids = [row.id for row in rows]
    # robust: a failure after commit must never surface in the request that committed.
    transaction.on_commit(functools.partial(_apply_after_commit, row_ids), robust=True)
    return row_ids


def _apply_after_commit(row_ids: list[int]) -> None:
    for start in range(0, len(row_ids), APPLY_BATCH):
        if not outbox_apply(ids=row_ids[start:start + APPLY_BATCH], limit=APPLY_BATCH):
            return  # the store is down: the rest waits for the flush task instead of failing chunk by chunk


def outbox_apply(*, ids: list[int] | None = None, limit: int = APPLY_BATCH) -> int:
    """Apply pending rows (those of `ids`, or the oldest `limit`); returns how many rows were marked done.

    Never raises for a vector-store or embedder failure: the rows stay pending with attempts and last_error.
    """
    # The outbox drains for every tenant at once (one flush task, one store).
    pending = VectorOutbox.objects.unscoped().filter(done_at__isnull=True)
    batch = pending.filter(id__in=ids) if ids is not None else pending
    # Rows that keep failing go to the back, so one bad memory cannot starve the rest.
    batch_memories = batch.order_by("attempts", "id").values("memory_uuid")[:limit]
    # Every pending row of these memories (one statement with the batch's as a subquery), in order. A delete
    # recorded last wins; otherwise any pending upsert (the text may have changed) covers the payload writes beside
    # it; payload writes alone only set the payload.
    rows = list(pending.filter(memory_uuid__in=batch_memories).order_by("id"))
    if not rows:
        return 0
    final_op: dict = {}
    for row in rows:
        key = (row.tenant_id_value, row.memory_uuid)
        if row.op == VectorOutbox.Op.PAYLOAD and final_op.get(key) == VectorOutbox.Op.UPSERT:
            continue
        final_op[key] = row.op

    write_keys = [key for key, op in final_op.items() if op != VectorOutbox.Op.DELETE]
    # A record gone since, or marked deleted, has no point: its upsert becomes a delete. Rows of several tenants are
    # applied together (the outbox drains for all), each looked up under its own tenant.
    records = {}
    for tenant_id in {t for t, _ in write_keys}:
        records.update({(r.tenant_id, r.id): r for r in MemoryRecord.objects.for_tenant(tenant_id)
                        .filter(id__in=[mid for t, mid in write_keys if t == tenant_id])
                        .exclude(status=MemoryStatus.DELETED)})
    to_upsert = [records[k] for k in write_keys if k in records and final_op[k] == VectorOutbox.Op.UPSERT]
    to_patch = [records[k] for k in write_keys if k in records and final_op[k] == VectorOutbox.Op.PAYLOAD]
    to_delete: dict = defaultdict(list)
    for key, op in final_op.items():
        if op == VectorOutbox.Op.DELETE or key not in records:
            to_delete[key[0]].append(str(key[1]))

    row_ids = [row.id for row in rows]
    try:
        points = points_for_records(to_upsert)
        store = get_vector_store()
        store.upsert(points)
        for record in to_patch:
            # The scope keys never change (a point stays with its tenant and user), and the text is what it was.
            payload = {k: v for k, v in point_payload(record).items() if k not in SCOPE_KEYS and k != "text"}
            store.set_payload(Scope(tenant_id=str(record.tenant_id), user_id=str(record.user_id)), str(record.pk),
                              payload)
        for tenant_id, memory_ids in to_delete.items():
            store.delete(Scope(tenant_id=str(tenant_id)), memory_ids)
    except Exception as exc:  # the store or the embedder is down: keep the rows for the flush task
        log.warning("vector outbox: %d rows left pending: %s", len(row_ids), exc)
        pending.filter(id__in=row_ids).update(attempts=F("attempts") + 1,
                                                           last_error=f"{exc.__class__.__name__}: {exc}"[:2000])
        return 0
    return pending.filter(id__in=row_ids).update(done_at=now())


def outbox_discard_tenant(*, tenant_id) -> int:
    """Drop every outbox row of a tenant that is being erased (its points go with its whole scope)."""
    deleted, _ = VectorOutbox.objects.for_tenant(tenant_id).delete()
    return deleted


def outbox_pending_count(*, tenant_id=None) -> int:
    pending = VectorOutbox.objects.unscoped() if tenant_id is None else VectorOutbox.objects.for_tenant(tenant_id)
    return pending.filter(done_at__isnull=True).count()


@service_task(retry_on=(DatabaseError, RedisError, *RETRY_ON))
def outbox_flush_task(self, batch_size: int = APPLY_BATCH, max_batches: int = 10) -> int:
    """Apply pending outbox rows, bounded per run; re-enqueues itself while work remains and progress is made."""
    applied = last = 0
    with held_lock(Keys.global_lock("outbox-flush"), timeout=FLUSH_LOCK_SECONDS) as held:
        if not held:
            return 0  # another flush is running; it re-enqueues itself if it leaves work behind
        for _ in range(max_batches):
            last = outbox_apply(limit=batch_size)
            applied += last
            if last == 0:  # nothing pending, or the store is still down: the next beat tick tries again
                break
    if last and outbox_pending_count():
        outbox_flush_task.apply_async(kwargs={"batch_size": batch_size, "max_batches": max_batches}, countdown=1)
    if applied:
        log.info("vector outbox: applied %d rows", applied)
    return applied
