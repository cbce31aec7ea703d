"""Helpers shared by the lifecycle, controls and admin tests: memories written the way services write them
(row, then the outbox applies the point after commit), and a look into each store."""
from __future__ import annotations

from django.db import transaction

from infra import clock
from infra.vector_store import Scope, get_vector_store
from memory.actions import content_hash_for, memory_history_write, memory_snapshot
from memory.models import MemoryEvent, MemoryRecord


def memory_make(tenant, user, text, *, kind="fact", **fields) -> MemoryRecord:
    """A memory row with its creation event, its point applied through the outbox on commit."""
    from memory.outbox import outbox_enqueue

    with transaction.atomic():
        fields.setdefault("status_changed_at", clock.now())
        record = MemoryRecord.objects.unscoped().create(tenant=tenant, user=user, text=text, kind=kind,
                                             content_hash=content_hash_for(text), **fields)
        memory_history_write(record=record, action=MemoryEvent.Action.CREATED, actor_type="system",
                             after=memory_snapshot(record))
        outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(record.pk)],
                       op="delete" if record.status == "deleted" else "upsert")
    return record


def points_of(tenant, user=None, ids=None) -> dict:
    """memory_id → payload of the points Qdrant holds in this scope."""
    store = get_vector_store()
    scope = Scope(tenant_id=str(tenant.pk), user_id=str(user.pk) if user else None)
    if ids is not None:
        return {h.memory_id: h.payload for h in store.retrieve(scope, [str(i) for i in ids])}
    out, offset = {}, None
    while True:
        hits, offset = store.scroll(scope, limit=256, offset=offset)
        out.update({h.memory_id: h.payload for h in hits})
        if offset is None:
            return out


def search_ids(tenant, user, text, *, statuses=("active",), not_expired_at=None, limit=20) -> list[str]:
    from infra.embedder import get_embedder

    store = get_vector_store()
    hits = store.search(Scope(tenant_id=str(tenant.pk), user_id=str(user.pk)), dense=get_embedder().embed([text])[0],
                        text=text, limit=limit, statuses=list(statuses) if statuses else None,
                        not_expired_at=not_expired_at)
    return [h.memory_id for h in hits]
