"""Reconcile job: make Qdrant agree with the database, which is the truth.

Two phases per tenant, each bounded and resumable through the cursor ("db:<last id>", "points:<offset>"):
rows → points (a missing point is re-upserted through the outbox; a stale text is re-embedded; other payload
drift is set in place) and points → rows (a point whose row is gone or deleted is an orphan and is removed).
"""
from __future__ import annotations

import logging
import math

from django.db import transaction

from infra.vector_store.base import LAYOUT_KEY
from infra.vector_store.sparse import SPARSE_LAYOUT
from tenants.models import Tenant

from ..models import MemoryRecord, MemoryStatus
from .runs import JobResult

log = logging.getLogger(__name__)


def _same(a, b) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-3)
    return (str(a) if a is not None else None) == (str(b) if b is not None else None)


def payload_drift(expected: dict, actual: dict) -> tuple[dict, bool]:
    """The fields to set, and whether setting them is not enough (text changed, a key must go, or the point's
    keyword terms were written in another layout)."""
    diff = {k: v for k, v in expected.items() if not _same(v, actual.get(k))}
    removed = [k for k in actual if k not in expected and k not in ("memory_id", LAYOUT_KEY)]
    # set_payload never moves a point between tenants or users; such drift is rewritten whole, as is a point whose
    # sparse vector is in an older layout (only an upsert writes vectors).
    return diff, (bool({"text", "tenant_id", "user_id", "memory_id"} & diff.keys()) or bool(removed)
                  or actual.get(LAYOUT_KEY) != SPARSE_LAYOUT)


def _expected_payload(record: MemoryRecord) -> dict:
    from ..points import point_for_record

    return dict(point_for_record(record, []).payload)


def _rows_phase(tenant: Tenant, store, scope, *, limit: int, after: str | None) -> tuple[dict, str | None]:
    from infra.vector_store import Scope

    from ..outbox import outbox_enqueue

    qs = MemoryRecord.objects.for_tenant(tenant).order_by("pk")
    if after:
        qs = qs.filter(pk__gt=after)
    records = list(qs[: limit + 1])
    more, records = len(records) > limit, records[:limit]
    hits = {h.memory_id: h for h in store.retrieve(scope, [str(r.pk) for r in records])} if records else {}
    upsert, stale_deleted, patched = [], [], 0
    for r in records:
        hit = hits.get(str(r.pk))
        if r.status == MemoryStatus.DELETED:
            if hit is not None:
                stale_deleted.append(str(r.pk))
            continue
        if hit is None:
            upsert.append(str(r.pk))
            continue
        diff, needs_upsert = payload_drift(_expected_payload(r), hit.payload)
        if needs_upsert:
            upsert.append(str(r.pk))
        elif diff:
            store.set_payload(Scope(tenant_id=str(tenant.pk), user_id=str(r.user_id)), str(r.pk), diff)
            patched += 1
    if upsert:
        with transaction.atomic():
            outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=upsert, op="upsert")
    if stale_deleted:
        store.delete(scope, stale_deleted)
    stats = {"rows_checked": len(records), "points_reupserted": len(upsert), "payloads_fixed": patched,
             "deleted_rows_points_removed": len(stale_deleted)}
    return stats, (str(records[-1].pk) if more else None)


def orphan_points_delete(tenant: Tenant, store, scope, *, limit: int,
                         offset: str | None) -> tuple[int, int, str | None]:
    """One page of the scope's points: those whose memory is gone or deleted are removed from the store. Returns
    (points checked, points removed, the next page's offset or None at the end)."""
    hits, next_offset = store.scroll(scope, limit=limit, offset=offset)
    ids = [h.memory_id for h in hits]
    live = {str(pk) for pk in MemoryRecord.objects.for_tenant(tenant).filter(pk__in=ids)
            .exclude(status=MemoryStatus.DELETED).values_list("pk", flat=True)}
    orphans = [i for i in ids if i not in live]
    if orphans:
        store.delete(scope, orphans)
    return len(ids), len(orphans), next_offset


def _points_phase(tenant: Tenant, store, scope, *, limit: int, offset: str | None) -> tuple[dict, str | None]:
    checked, deleted, next_offset = orphan_points_delete(tenant, store, scope, limit=limit, offset=offset)
    return {"points_checked": checked, "orphans_deleted": deleted}, next_offset


def vectors_reconcile(*, tenant: Tenant, limit: int, cursor: str | None = None) -> JobResult:
    from infra.vector_store import Scope, get_vector_store

    store = get_vector_store()
    scope = Scope(tenant_id=str(tenant.pk))
    phase, _, position = (cursor or "db:").partition(":")
    if phase == "db":
        stats, after = _rows_phase(tenant, store, scope, limit=limit, after=position or None)
        return JobResult(stats={"phase": "db", **stats}, more=True, cursor=f"db:{after}" if after else "points:")
    stats, offset = _points_phase(tenant, store, scope, limit=limit, offset=position or None)
    return JobResult(stats={"phase": "points", **stats}, more=offset is not None,
                     cursor=f"points:{offset}" if offset is not None else None)
