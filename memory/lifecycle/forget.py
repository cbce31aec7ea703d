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

from ..actions import memories_forget_records
from ..models import MemoryRecord, MemoryStatus
from .runs import JobResult


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


def memories_forget(*, tenant: Tenant, limit: int, cursor: str | None = None) -> JobResult:
    now = clock.now()
    # Retention counts unused time from the memory's lifetime start, as TTL and decay do.
    start = "created_at" if tenant.memory_lifetime_from == Tenant.LifetimeFrom.SAID else "learned_at"
    base = MemoryRecord.objects.for_tenant(tenant).annotate(last_used=Coalesce("last_accessed_at", start))
    with transaction.atomic():
        records = list(base.select_for_update(skip_locked=True, of=("self",))
                       .filter(_candidates(tenant, now)).order_by("status_changed_at", "pk")[:limit])
        forgotten = memories_forget_records(tenant=tenant, records=records, now=now,
                                    reasons={r.pk: _reason(r, tenant, now) for r in records})
    more = len(records) == limit and base.filter(_candidates(tenant, now)).exists()
    return JobResult(stats={"forgotten": forgotten}, more=more)
