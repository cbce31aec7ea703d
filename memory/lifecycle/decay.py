"""Decay job: effective importance falls with time since last access (or, never accessed, since its lifetime
started: when Continuum learned it, unless the tenant counts from when it was said) and rises with how often a
memory is used.

The record's `importance` holds the effective value (what retrieval ranks by); the value it decays from is kept
in metadata["decay"]["base"]. When something else changed `importance` since the last pass (a reinforcement, a
staff edit), that new value becomes the base. Recomputing from base and clock makes a second run a no-op.
"""
from __future__ import annotations

import math
from datetime import datetime

from django.conf import settings
from django.db import transaction

from infra import clock
from tenants.models import Tenant

from ..actions import memory_decay, memory_lifetime_start
from ..models import MemoryRecord, MemoryStatus
from .runs import JobResult


def half_life_days(kind: str) -> float:
    table = settings.MEMORY_DECAY_HALF_LIFE_DAYS
    return float(table.get(kind, table.get("default", 180)))


def effective_importance(*, base: float, last_used: datetime, uses: int, kind: str, now: datetime) -> float:
    idle_days = max(0.0, (now - last_used).total_seconds() / 86400)
    value = base * 0.5 ** (idle_days / half_life_days(kind))
    value *= 1 + settings.MEMORY_DECAY_ACCESS_BOOST * math.log1p(max(0, uses))
    return round(min(1.0, max(0.0, value)), 4)


def _base_of(record: MemoryRecord) -> float:
    state = (record.metadata or {}).get("decay") or {}
    if "base" in state and math.isclose(state.get("applied", -1), record.importance, abs_tol=1e-6):
        return float(state["base"])
    return float(record.importance)


def memories_decay(*, tenant: Tenant, limit: int, cursor: str | None = None) -> JobResult:
    now = clock.now()
    qs = MemoryRecord.objects.for_tenant(tenant).filter(status=MemoryStatus.ACTIVE).order_by("pk")
    if cursor:
        qs = qs.filter(pk__gt=cursor)
    records = list(qs[: limit + 1])
    more, records = len(records) > limit, records[:limit]
    changed, below = 0, 0
    threshold = settings.MEMORY_FORGET_THRESHOLD
    with transaction.atomic():
        for record in records:
            base = _base_of(record)
            last_used = record.last_accessed_at or memory_lifetime_start(
                tenant=tenant, said_at=record.created_at, learned_at=record.learned_at)
            value = effective_importance(base=base, last_used=last_used,
                                         uses=record.access_count + record.reinforcement_count, kind=record.kind,
                                         now=now)
            state = dict((record.metadata or {}).get("decay") or {})
            state.update(base=base, applied=value)
            if value < threshold:
                below += 1
                state.setdefault("below_since", now.timestamp())
            else:
                state.pop("below_since", None)
            if (record.metadata or {}).get("decay") == state and math.isclose(value, record.importance, abs_tol=1e-4):
                continue
            changed += memory_decay(record=record, importance=value, state=state)
    return JobResult(stats={"checked": len(records), "changed": changed, "below_threshold": below},
                     more=more, cursor=str(records[-1].pk) if more else None)
