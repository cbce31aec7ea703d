"""Expire job: memories whose expires_at has passed become `expired` and leave retrieval."""
from __future__ import annotations

from django.db import transaction

from infra import clock
from tenants.models import Tenant

from ..controls import memory_history_write, memory_snapshot, memory_vectors_enqueue
from ..models import MemoryEvent, MemoryRecord, MemoryStatus
from .runs import JobResult

_LIVE = (MemoryStatus.ACTIVE, MemoryStatus.PENDING_REVIEW)


def memories_expire(*, tenant: Tenant, limit: int, cursor: str | None = None) -> JobResult:
    """No cursor is needed: every expired record leaves the candidate set, so the next pass starts afresh."""
    now = clock.now()
    with transaction.atomic():
        # skip_locked: rows another run (or a user's edit) holds are theirs; the condition is re-checked here,
        # so a record is expired, and its event written, exactly once.
        records = list(MemoryRecord.objects.select_for_update(skip_locked=True)
                       .filter(tenant=tenant, status__in=_LIVE, expires_at__lte=now)
                       .order_by("expires_at", "pk")[:limit])
        for record in records:
            before = memory_snapshot(record)
            record.status, record.status_changed_at = MemoryStatus.EXPIRED, now
            record.save(update_fields=["status", "status_changed_at", "updated_at"])
            memory_history_write(record=record, action=MemoryEvent.Action.EXPIRED, actor_type="system",
                                 actor_id="lifecycle.expire", before=before, after=memory_snapshot(record),
                                 note="expires_at passed")
        if records:
            memory_vectors_enqueue(records)
    more = len(records) == limit and MemoryRecord.objects.filter(
        tenant=tenant, status__in=_LIVE, expires_at__lte=now).exists()
    return JobResult(stats={"expired": len(records)}, more=more)
