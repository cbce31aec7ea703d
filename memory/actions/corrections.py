"""A corrected value reaches every active statement that still says the old one, each with its history."""

from __future__ import annotations

import re
import uuid

from ..extraction.candidate import Candidate, value_normalize
from ..models import MemoryKind, MemoryRecord, MemoryStatus
from ..sources import SourceMessage
from .records import MAX_SOURCE_MESSAGES, MEMORY_NAMESPACE, _initial_status, _new_record


def corrections_apply_locked(
    *,
    tenant,
    user,
    record: MemoryRecord,
    targets: list[MemoryRecord],
    source: SourceMessage | None,
    session_id,
    actor_type: str,
    actor_id: str,
    create,
    supersede,
) -> list[MemoryRecord]:
    """A corrected slot value corrects every other active statement that still says the old value ("Dana needs a
    flight from SFO to NYC" once the destination is Newark): each gets a new version with the new value, superseding
    it, so its history shows the change. Events are the user's words as said and stay as they were.
    create and supersede are the create module's writers (passed in: that module calls this one)."""
    new_value = (record.value or "").strip()
    olds = {
        t.value.strip()
        for t in targets
        if re.search(r"\w", t.value or "") and value_normalize(t.value) != value_normalize(new_value)
    }
    if not new_value or not olds:
        return []
    changed: list[MemoryRecord] = []
    skip = {record.pk, *(t.pk for t in targets)}
    for old_value in sorted(olds):
        pattern = re.compile(rf"(?<!\w){re.escape(old_value)}(?!\w)", re.I)
        rows = (
            MemoryRecord.objects.for_tenant(tenant)
            .select_for_update()
            .filter(user=user, status=MemoryStatus.ACTIVE, text__icontains=old_value)
            .exclude(kind=MemoryKind.EVENT)
            .exclude(pk__in=skip)
            .order_by("created_at")
        )
        for row in rows:
            # A version held for review would leave the row it corrects active: only what stays active is corrected.
            if (
                not pattern.search(row.text)
                or _initial_status(tenant=tenant, source_type=row.source_type) != MemoryStatus.ACTIVE
            ):
                continue
            candidate = Candidate(row.kind, pattern.sub(new_value, row.text), source_type=row.source_type,
                                  subject=row.subject, value=row.value, confidence=row.confidence,
                                  importance=row.importance, extractor="correction",
                                  metadata={**(row.metadata or {}), "corrects": str(row.pk)})
            memory_id = uuid.uuid5(MEMORY_NAMESPACE, f"{record.pk}:corrects:{row.pk}")
            if MemoryRecord.objects.for_tenant(tenant).filter(pk=memory_id).exists():
                continue  # corrected before (a rerun)
            new = _new_record(tenant=tenant, user=user, candidate=candidate, source=source, session_id=session_id,
                              memory_id=memory_id)
            # What it was said in, and what corrected it.
            by = [*new.source_message_ids, *([] if source is not None else record.source_message_ids)]
            new.source_message_ids = list(dict.fromkeys([*row.source_message_ids, *by]))[
                :MAX_SOURCE_MESSAGES
            ]
            create(new, actor_type=actor_type, actor_id=actor_id,
                   note=f"{old_value} corrected to {new_value} (by {record.pk})")
            supersede(old=row, new=new, actor_type=actor_type, actor_id=actor_id,
                      note=f"{old_value} corrected to {new_value} by {record.pk}")
            skip.add(row.pk)
            changed += [new, row]
    return changed


def remainder_versions_locked(
    *,
    tenant,
    user,
    record: MemoryRecord,
    olds: list[tuple[MemoryRecord, str]],
    actor_type: str,
    actor_id: str,
    create,
) -> list[MemoryRecord]:
    """What each superseded memory said besides its replaced value, kept as a memory of its own: a new version with
    the old one's words minus the replaced sentences, said when and where the old one was (its messages, its session,
    its time), so a change of one value retires no other statement of the same message. Call after the supersede,
    inside its transaction; `create` is the create module's writer."""
    changed = []
    for old, text in olds:
        memory_id = uuid.uuid5(MEMORY_NAMESPACE, f"{record.pk}:remains:{old.pk}")
        if not text or MemoryRecord.objects.for_tenant(tenant).filter(pk=memory_id).exists():
            continue  # nothing more was said, or kept before (a rerun)
        candidate = Candidate(
            old.kind,
            text,
            source_type=old.source_type,
            confidence=old.confidence,
            importance=old.importance,
            extractor=old.extractor,
            metadata={**(old.metadata or {}), "remains_of": str(old.pk)},
        )
        new = _new_record(tenant=tenant, user=user, candidate=candidate, session_id=old.session_id,
                          memory_id=memory_id, created_at=old.created_at, learned_at=old.learned_at)
        new.source_message_id = old.source_message_id
        new.source_message_ids = list(old.source_message_ids)
        create(new, actor_type=actor_type, actor_id=actor_id,
               note=f"what {old.pk} says besides the value {record.pk} replaced")
        changed.append(new)
    return changed
