"""Forget job: hard-delete what has been expired, deleted or decayed for longer than the grace period, and what
the tenant's retention says is unused too long. The record and its point go; a tombstone event remains.

The tombstone says what was forgotten and why, never the text; the text is also struck from the memory's earlier
history, so a forgotten memory cannot be read back from the audit trail.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Coalesce

from infra import clock
from tenants.models import Tenant

from ..models import MemoryEvent, MemoryRecord, MemoryStatus
from .runs import JobResult

_REDACTED_KEYS = ("text", "value", "subject")


def _candidates(tenant: Tenant, now) -> Q:
    grace_start = now - timedelta(days=settings.MEMORY_FORGET_GRACE_DAYS)
    cond = Q(status__in=[MemoryStatus.EXPIRED, MemoryStatus.DELETED], status_changed_at__lte=grace_start)
    cond |= Q(status=MemoryStatus.ACTIVE, metadata__decay__below_since__lte=grace_start.timestamp())
    if tenant.retention_days:
        cond |= Q(status=MemoryStatus.ACTIVE, last_used__lte=now - timedelta(days=tenant.retention_days))
    return cond


def _reason(record: MemoryRecord, tenant: Tenant, now) -> str:
    if record.status in (MemoryStatus.EXPIRED, MemoryStatus.DELETED):
        return f"{record.status} past the grace period"
    below = ((record.metadata or {}).get("decay") or {}).get("below_since")
    if below is not None and below <= (now - timedelta(days=settings.MEMORY_FORGET_GRACE_DAYS)).timestamp():
        return "decayed below threshold past the grace period"
    return f"unused for {tenant.retention_days} days (tenant retention)"


def _redact(snapshot):
    if not isinstance(snapshot, dict):
        return snapshot
    return {k: ("[forgotten]" if k in _REDACTED_KEYS and v else v) for k, v in snapshot.items()}


def memories_forget(*, tenant: Tenant, limit: int, cursor: str | None = None) -> JobResult:
    from ..outbox import outbox_enqueue

    now = clock.now()
    base = MemoryRecord.objects.annotate(last_used=Coalesce("last_accessed_at", "created_at"))
    forgotten = 0
    with transaction.atomic():
        records = list(base.select_for_update(skip_locked=True, of=("self",))
                       .filter(Q(tenant=tenant) & _candidates(tenant, now)).order_by("status_changed_at", "pk")[:limit])
        ids = [r.pk for r in records]
        for event in MemoryEvent.objects.filter(tenant=tenant, memory_uuid__in=ids):
            event.before, event.after = _redact(event.before), _redact(event.after)
            event.save(update_fields=["before", "after"])
        MemoryEvent.objects.bulk_create([
            MemoryEvent(tenant=tenant, user_id=r.user_id, memory=None, memory_uuid=r.pk,
                        action=MemoryEvent.Action.FORGOTTEN, actor_type=MemoryEvent.Actor.SYSTEM,
                        actor_id="lifecycle.forget", created_at=now, note=_reason(r, tenant, now)[:255],
                        before={"kind": r.kind, "status": r.status, "source_type": r.source_type,
                                "created_at": r.created_at.isoformat()})
            for r in records])
        if ids:
            outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(i) for i in ids], op="delete")
            forgotten = MemoryRecord.objects.filter(pk__in=ids).delete()[1].get(MemoryRecord._meta.label, 0)
    more = len(records) == limit and base.filter(Q(tenant=tenant) & _candidates(tenant, now)).exists()
    return JobResult(stats={"forgotten": forgotten}, more=more)
