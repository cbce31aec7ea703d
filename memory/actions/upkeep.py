"""Changes the lifecycle jobs make (memory/lifecycle/ decides what is due; this writes it): fold near-duplicates,
consolidate events into a fact, decay, expire what is due, forget (hard delete with a tombstone) and erase a user's
memories.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from infra import clock
from tenants.models import Tenant

from ..models import MemoryEvent, MemoryRecord, MemoryStatus, VectorOutbox
from ..outbox import outbox_enqueue
from ..sources import SourceMessage
from ..webhook_events import memory_webhooks_emit
from .create import memory_create, memory_supersede
from .records import (
    _transition,
    content_hash_for,
    memory_change_save,
    memory_history_write,
    memory_snapshot,
    memory_vectors_enqueue,
)

log = logging.getLogger(__name__)

Status = MemoryStatus
Action = MemoryEvent.Action


# Set on events whose consolidated fact waits for review, so they are not proposed again meanwhile.
PENDING_MARK = "consolidation_pending"


def memories_fold(
    *, tenant: Tenant, keeper_id, other_ids: list, actor_id: str, note: str, actor_type: str = MemoryEvent.Actor.SYSTEM
) -> int:
    """Supersede the others by the keeper, which absorbs their support. Returns how many were folded (the merge
    job, or a reviewer merging near-duplicates: actor_type says which).

    Locks every row and re-checks it is still active: a concurrent run or a user's delete that got there
    first wins, and nothing is applied twice."""
    with transaction.atomic():
        rows = {
            r.pk: r
            for r in MemoryRecord.objects.for_tenant(tenant)
            .select_for_update()
            .filter(pk__in=[keeper_id, *other_ids], status=MemoryStatus.ACTIVE)
            .order_by("pk")
        }
        keeper = rows.get(keeper_id)
        others = [rows[i] for i in other_ids if i in rows]
        if keeper is None or not others:
            return 0
        before = memory_snapshot(keeper)
        sources = list(keeper.source_message_ids or [])
        for other in others:
            for mid in [
                *(other.source_message_ids or []),
                *([str(other.source_message_id)] if other.source_message_id else []),
            ]:
                if mid not in sources:
                    sources.append(mid)
            keeper.reinforcement_count += other.reinforcement_count + 1
            keeper.access_count += other.access_count
            keeper.confidence = max(keeper.confidence, other.confidence)
            keeper.importance = max(keeper.importance, other.importance)
            if other.last_accessed_at and (
                not keeper.last_accessed_at or other.last_accessed_at > keeper.last_accessed_at
            ):
                keeper.last_accessed_at = other.last_accessed_at
        keeper.source_message_ids = sources
        memory_change_save(keeper, before=before,
                           fields=["reinforcement_count", "access_count", "confidence", "importance",
                                   "last_accessed_at", "source_message_ids", "updated_at"],
                           action=MemoryEvent.Action.REINFORCED, actor_type=actor_type, actor_id=actor_id,
                           note=f"{note}: absorbed {len(others)}")
        for other in others:
            memory_supersede(
                old=other, new=keeper, actor_type=actor_type, actor_id=actor_id, note=f"{note} into {keeper.pk}"
            )
        memory_vectors_enqueue([keeper, *others])
    return len(others)


def fact_from_events(
    *, tenant: Tenant, text: str, kind: str, confidence: float, source_type: str, event_ids: list, actor_id: str
) -> MemoryRecord | None:
    """Write the fact (or reinforce an identical one) and supersede the events by it, in one transaction.

    Returns None, changing nothing, when any event is no longer active (another run won). A fact held for
    review (an inferred one, where the tenant reviews those) does not displace the events until approved;
    they are marked so the next pass does not propose it again."""
    with transaction.atomic():
        events = list(
            MemoryRecord.objects.for_tenant(tenant)
            .select_for_update()
            .filter(pk__in=event_ids, status=MemoryStatus.ACTIVE)
            .order_by("created_at", "pk")
        )
        if len(events) != len(set(event_ids)):
            return None
        latest = events[-1]
        sources = []
        for e in events:
            for mid in [*([str(e.source_message_id)] if e.source_message_id else []), *(e.source_message_ids or [])]:
                if mid not in sources:
                    sources.append(mid)
        fact = (
            MemoryRecord.objects.for_tenant(tenant)
            .select_for_update()
            .filter(
                user_id=latest.user_id,
                kind=kind,
                content_hash=content_hash_for(text),
                status__in=[MemoryStatus.ACTIVE, MemoryStatus.PENDING_REVIEW],
            )
            .first()
        )
        if fact is None:
            fact = memory_create(
                tenant=tenant,
                user=latest.user,
                kind=kind,
                text=text,
                source_type=source_type,
                confidence=confidence,
                importance=max(e.importance for e in events),
                source=SourceMessage(
                    id=str(latest.source_message_id), session_id=latest.session_id, created_at=latest.created_at
                )
                if latest.source_message_id
                else None,
                session_id=latest.session_id,
                actor_type="system",
                actor_id=actor_id,
                extractor="consolidate",
                created_at=latest.created_at,
                metadata={"consolidated_from": [str(e.pk) for e in events]},
            )
            # Born with its events' support: part of its creation, which the outbox already carries.
            fact.reinforcement_count = len(events) - 1
            fact.source_message_ids = sources
            fact.save(update_fields=["reinforcement_count", "source_message_ids", "updated_at"])
        else:
            before = memory_snapshot(fact)
            fact.reinforcement_count += len(events)
            fact.source_message_ids = [
                *fact.source_message_ids,
                *(s for s in sources if s not in fact.source_message_ids),
            ]
            memory_change_save(fact, before=before, fields=["reinforcement_count", "source_message_ids", "updated_at"],
                               action=MemoryEvent.Action.REINFORCED, actor_type="system", actor_id=actor_id,
                               note=f"reinforced by {len(events)} repeated events")
            memory_vectors_enqueue([fact])
        if fact.status != MemoryStatus.ACTIVE:
            for e in events:
                before = memory_snapshot(e)
                e.metadata = {**(e.metadata or {}), PENDING_MARK: str(fact.pk)}
                memory_change_save(e, before=before, fields=["metadata", "updated_at"],
                                   action=MemoryEvent.Action.UPDATED, actor_type="system", actor_id=actor_id,
                                   note=f"consolidation into {fact.pk} awaits review")
            memory_vectors_enqueue(events, op=VectorOutbox.Op.PAYLOAD)
            return fact
        for e in events:
            memory_supersede(
                old=e, new=fact, actor_type="system", actor_id=actor_id, note=f"consolidated into {fact.pk}"
            )
        memory_vectors_enqueue(events)
    return fact


def memory_decay(*, record: MemoryRecord, importance: float, state: dict) -> bool:
    """Set a memory's effective importance (and the decay state it was computed from), with its history event and
    a payload write; a row no longer active is left alone. Call inside a transaction. Returns whether it changed."""
    before = memory_snapshot(record)
    metadata = {**(record.metadata or {}), "decay": state}
    # Conditional on the row still being active: a record deleted meanwhile is left as it is.
    if (
        not MemoryRecord.objects.for_tenant(record.tenant_id)
        .filter(pk=record.pk, status=Status.ACTIVE)
        .update(importance=importance, metadata=metadata, updated_at=clock.now())
    ):
        return False
    record.importance, record.metadata = importance, metadata
    memory_history_write(
        record=record,
        action=Action.DECAYED,
        actor_type="system",
        actor_id="lifecycle.decay",
        before=before,
        after=memory_snapshot(record),
        note=f"importance {before['importance']:.4f} -> {importance:.4f}",
    )
    memory_vectors_enqueue([record], op=VectorOutbox.Op.PAYLOAD)
    return True


_LIVE = (Status.ACTIVE, Status.PENDING_REVIEW)


def memories_expire_due(*, tenant: Tenant, now: datetime, limit: int) -> list[MemoryRecord]:
    """Expire the memories whose expires_at has passed (up to `limit`), each with its history event."""
    with transaction.atomic():
        # skip_locked: rows another run (or a user's edit) holds are theirs; the condition is re-checked here,
        # so a record is expired, and its event written, exactly once.
        records = list(
            MemoryRecord.objects.for_tenant(tenant)
            .select_for_update(skip_locked=True)
            .filter(status__in=_LIVE, expires_at__lte=now)
            .order_by("expires_at", "pk")[:limit]
        )
        for record in records:
            _transition(
                record,
                to=Status.EXPIRED,
                action=Action.EXPIRED,
                actor_type="system",
                actor_id="lifecycle.expire",
                note="expires_at passed",
            )
    return records


_FORGOTTEN_KEYS = ("text", "value", "subject")


def _struck(snapshot):
    if not isinstance(snapshot, dict):
        return snapshot
    return {k: ("[forgotten]" if k in _FORGOTTEN_KEYS and v else v) for k, v in snapshot.items()}


def memories_forget_records(*, tenant: Tenant, records: list[MemoryRecord], reasons: dict, now: datetime) -> int:
    """Hard-delete these (locked) records: a tombstone event each, their text struck from their earlier history,
    their points deleted through the outbox. Call inside the transaction that locked them."""
    ids = [r.pk for r in records]
    if not ids:
        return 0
    for event in MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid__in=ids):
        event.before, event.after = _struck(event.before), _struck(event.after)
        event.save(update_fields=["before", "after"])
    MemoryEvent.objects.bulk_create(
        [
            MemoryEvent(
                tenant=tenant,
                user_id=r.user_id,
                memory=None,
                memory_uuid=r.pk,
                action=Action.FORGOTTEN,
                actor_type=MemoryEvent.Actor.SYSTEM,
                actor_id="lifecycle.forget",
                created_at=now,
                note=reasons.get(r.pk, "")[:255],
                before={
                    "kind": r.kind,
                    "status": r.status,
                    "source_type": r.source_type,
                    "created_at": r.created_at.isoformat(),
                },
            )
            for r in records
        ]
    )
    memory_webhooks_emit(records=records, action=Action.FORGOTTEN, actor_type=MemoryEvent.Actor.SYSTEM, at=now)
    outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(i) for i in ids], op=VectorOutbox.Op.DELETE)
    return MemoryRecord.objects.for_tenant(tenant).filter(pk__in=ids).delete()[1].get(MemoryRecord._meta.label, 0)


def memories_erase_user(*, tenant: Tenant, user_id) -> dict:
    """Remove every memory row of one user with its history and pending vector writes: erasure keeps no
    tombstone, by design. Call inside the erasure's transaction; the caller deletes the user's points."""
    memory_ids = list(MemoryRecord.objects.for_tenant(tenant).filter(user_id=user_id).values_list("pk", flat=True))
    events = MemoryEvent.objects.for_tenant(tenant).filter(user_id=user_id).delete()[0]
    # Tombstones of forgotten memories keep the user id but no longer point at a record.
    events += MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid__in=memory_ids).delete()[0]
    outbox = VectorOutbox.objects.for_tenant(tenant.pk).filter(memory_uuid__in=memory_ids)
    pending = outbox.filter(done_at__isnull=True).count()
    outbox_rows = outbox.delete()[0]
    MemoryRecord.objects.for_tenant(tenant).filter(user_id=user_id).delete()
    return {"memories": len(memory_ids), "events": events, "outbox_rows": outbox_rows, "outbox_pending": pending}
