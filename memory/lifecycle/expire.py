"""Expire job: memories whose expires_at has passed become `expired` and leave retrieval."""
from __future__ import annotations

from infra import clock
from tenants.models import Tenant

from ..actions import memories_expire_due
from ..models import MemoryRecord, MemoryStatus
from .runs import JobResult

_LIVE = (MemoryStatus.ACTIVE, MemoryStatus.PENDING_REVIEW)


def memories_expire(*, tenant: Tenant, limit: int, cursor: str | None = None) -> JobResult:
    """No cursor is needed: every expired record leaves the candidate set, so the next pass starts afresh."""
    now = clock.now()
    records = memories_expire_due(tenant=tenant, now=now, limit=limit)
    more = len(records) == limit and MemoryRecord.objects.for_tenant(tenant).filter(
        status__in=_LIVE, expires_at__lte=now).exists()
    return JobResult(stats={"expired": len(records)}, more=more)
