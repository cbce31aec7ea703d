"""The verified decisions of an extraction (or of the remember tool) written: a new memory, a reinforcement of the
one it repeats, a supersede of the value it replaces (or held for review when doubtful), or an older value kept as
history; then the corrections those supersedes make to the same message's other statements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tenants.models import EndUser, Tenant

from ..extraction.verify import CREATE, OUTDATED, REINFORCE, SKIP, SUPERSEDE
from ..models import MemoryEvent, MemoryRecord, MemoryStatus
from ..outbox import outbox_enqueue
from ..sources import SourceMessage
from ..webhook_events import memory_webhooks_read_once
from .corrections import corrections_apply_locked, remainder_versions_locked
from .create import _create_locked, memory_supersede
from .records import (
    MAX_SOURCE_MESSAGES,
    _new_record,
    history_rows_together,
    memory_change_save,
    memory_snapshot,
)


def _extracted_by(record: MemoryRecord) -> list[str]:
    return [record.extractor, *(record.metadata or {}).get("also_extracted_by", [])]


def _note_extractor(record: MemoryRecord, extractor: str) -> bool:
    """Count another extractor as a source of the memory; False when it already was one."""
    if not extractor or extractor in _extracted_by(record):
        return False
    record.metadata = {
        **(record.metadata or {}),
        "also_extracted_by": [*(record.metadata or {}).get("also_extracted_by", []), extractor],
    }
    return True


def _also_from_locked(record: MemoryRecord, *, extractor: str, actor_type: str, actor_id: str) -> MemoryRecord:
    """The same words, read by a second extractor (the remember tool and the rules on one message): one memory with
    both sources. Not a confirmation: the user said it once, so confidence stays."""
    before = memory_snapshot(record)
    _note_extractor(record, extractor)
    memory_change_save(record, before=before, fields=["metadata", "updated_at"], action=MemoryEvent.Action.REINFORCED,
                       actor_type=actor_type, actor_id=actor_id, note=f"also extracted by {extractor}")
    return record


def _reinforce_locked(
    record: MemoryRecord,
    *,
    source: SourceMessage | None = None,
    actor_type: str,
    actor_id: str,
    similarity: float | None,
    extractor: str = "",
) -> MemoryRecord:
    before = memory_snapshot(record)
    record.reinforcement_count += 1
    # Each confirmation closes a fifth of the remaining doubt.
    record.confidence = round(min(0.99, record.confidence + (1 - record.confidence) * 0.2), 4)
    if source is not None and str(source.id) not in record.source_message_ids:
        record.source_message_ids = (record.source_message_ids + [str(source.id)])[:MAX_SOURCE_MESSAGES]
    _note_extractor(record, extractor)
    memory_change_save(record, before=before,
                       fields=["reinforcement_count", "confidence", "source_message_ids", "metadata", "updated_at"],
                       action=MemoryEvent.Action.REINFORCED, actor_type=actor_type, actor_id=actor_id,
                       note=f"similarity {similarity:.3f}" if similarity is not None else "")
    return record


def _held_for_review(tenant: Tenant, record: MemoryRecord) -> bool:
    return record.status == MemoryStatus.ACTIVE and record.confidence < tenant.review_supersede_below


def decisions_apply(
    *,
    tenant: Tenant,
    user: EndUser,
    decisions,
    source: SourceMessage | None = None,
    session_id=None,
    memory_ids: list | None = None,
    actor_type: str = MemoryEvent.Actor.SYSTEM,
    actor_id: str = "",
    first_run: bool = False,
    vector_writes: list | None = None,
) -> list[tuple[MemoryRecord | None, str]]:
    """Persist verified decisions; call inside a transaction. Returns (record, outcome) per decision.

    memory_ids gives each decision's id for a new row (deterministic in extraction); an id that already
    exists means this work was done before, and the existing row is returned untouched. first_run: the caller
    has proved in this transaction that no earlier run wrote these ids (extraction's claim of its message), so
    they are not looked up. vector_writes: a list that receives the ids of the rows whose points must be written,
    for a caller that applies several calls' decisions in one transaction and queues their points at once;
    without it they are queued here.
    """
    writes = _Writes(tenant=tenant, user=user, source=source, session_id=session_id, actor_type=actor_type,
                     actor_id=actor_id)
    results: list[tuple[MemoryRecord | None, str]] = []
    done_before = {} if first_run else _done_before(tenant, memory_ids)
    # Each write announces itself (the endpoints are read for the first only) and adds a history row (all inserted
    # at the end).
    with memory_webhooks_read_once(), history_rows_together():
        for i, decision in enumerate(decisions):
            mid = memory_ids[i] if memory_ids else None
            if decision.action == SKIP:
                results.append((None, "duplicate_in_message"))
                continue
            existing = done_before.get(str(mid)) if mid is not None else None
            if existing is not None:
                results.append((existing, "exists"))
                continue
            results.append(writes.decision_apply(decision, memory_id=mid))
        writes.corrections_apply()
    changed = [str(r.pk) for r in writes.changed]
    if vector_writes is not None:
        vector_writes += changed
    elif changed:
        outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=changed)
    return results


def _done_before(tenant: Tenant, memory_ids: list | None) -> dict[str, MemoryRecord]:
    """The rows a previous run of this work already wrote, read at once (one statement, not one per decision)."""
    if not memory_ids:
        return {}
    return {
        str(r.pk): r
        for r in MemoryRecord.objects.for_tenant(tenant).filter(pk__in=[m for m in memory_ids if m is not None])
    }


@dataclass
class _Writes:
    """One decisions_apply: who writes for which message, the rows it changed (their vectors are written after), and
    the corrections its supersedes owe the message's other statements."""

    tenant: Tenant
    user: EndUser
    source: SourceMessage | None
    session_id: Any
    actor_type: str
    actor_id: str
    changed: list[MemoryRecord] = field(default_factory=list)
    # (the row with the current value, rows with old values, source, session)
    corrections: list[tuple] = field(default_factory=list)

    def decision_apply(self, decision, *, memory_id) -> tuple[MemoryRecord, str]:
        targets = (
            list(
                MemoryRecord.objects.for_tenant(self.tenant)
                .select_for_update()
                .filter(user=self.user, pk__in=decision.target_ids, status=MemoryStatus.ACTIVE)
            )
            if decision.target_ids
            else []
        )
        action = decision.action
        if action in (REINFORCE, SUPERSEDE, OUTDATED) and not targets:
            action = CREATE  # the target changed since verification: store the candidate as new
        if action == REINFORCE:
            return self._reinforce(targets[0], decision)
        return self._store(decision, action=action, targets=targets, memory_id=memory_id)

    def _reinforce(self, target: MemoryRecord, decision) -> tuple[MemoryRecord, str]:
        extractor = decision.candidate.extractor
        if self.source is not None and str(self.source.id) in target.source_message_ids:
            if extractor in _extracted_by(target):
                return target, "exists"  # this message already reinforced it: a rerun changes nothing
            _also_from_locked(target, extractor=extractor, actor_type=self.actor_type, actor_id=self.actor_id)
            self.changed.append(target)
            return target, "reinforced"
        record = _reinforce_locked(
            target,
            source=self.source,
            actor_type=self.actor_type,
            actor_id=self.actor_id,
            similarity=decision.similarity,
            extractor=extractor,
        )
        self.changed.append(record)
        return record, "reinforced"

    def _store(self, decision, *, action: str, targets: list[MemoryRecord], memory_id) -> tuple[MemoryRecord, str]:
        """A new row: created, superseding the targets (or held for review), or outdated by the first target."""
        record = _new_record(
            tenant=self.tenant,
            user=self.user,
            candidate=decision.candidate,
            source=self.source,
            session_id=self.session_id,
            memory_id=memory_id,
        )
        if action == SUPERSEDE and _held_for_review(self.tenant, record):
            # A doubtful correction waits for a reviewer; the value in use stays until it is approved.
            record.status = MemoryStatus.PENDING_REVIEW
            record.metadata = {**record.metadata, "supersedes": [str(t.pk) for t in targets]}
        _create_locked(
            record,
            actor_type=self.actor_type,
            actor_id=self.actor_id,
            note=f"supersedes {', '.join(str(t.pk) for t in targets)}" if action == SUPERSEDE else "",
        )
        self.changed.append(record)
        if action == OUTDATED:
            # Said before the slot's current value: kept in the history, born superseded by what was said later.
            memory_supersede(
                old=record,
                new=targets[0],
                actor_type=self.actor_type,
                actor_id=self.actor_id,
                note=f"stated before {targets[0].pk}, which it does not replace",
            )
            # The newer value corrects what this message says with the old one (its goal is written after this).
            self.corrections.append((targets[0], [record], None, targets[0].session_id))
            return record, "outdated"
        if action != SUPERSEDE:
            return record, "created"
        if record.status != MemoryStatus.ACTIVE:
            # A memory held for review does not displace an active one until it is approved.
            return record, "held_for_review"
        for old in targets:
            memory_supersede(old=old, new=record, actor_type=self.actor_type, actor_id=self.actor_id)
            self.changed.append(old)
        remainders = decision.remainders
        self.changed += remainder_versions_locked(
            tenant=self.tenant, user=self.user, record=record,
            olds=[(old, remainders[str(old.pk)]) for old in targets if remainders.get(str(old.pk))],
            actor_type=self.actor_type, actor_id=self.actor_id, create=_create_locked)
        self.corrections.append((record, targets, self.source, self.session_id))
        return record, "superseded"

    def corrections_apply(self) -> None:
        """After every decision: a statement of this same message that says an old value is written by then."""
        for current, olds, by_source, by_session in self.corrections:
            self.changed += corrections_apply_locked(
                tenant=self.tenant, user=self.user, record=current, targets=olds, source=by_source,
                session_id=by_session, actor_type=self.actor_type, actor_id=self.actor_id, create=_create_locked,
                supersede=memory_supersede)
