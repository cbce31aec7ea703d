"""Changes a person asks for (the end user, staff or the assistant's tools): edit, delete (one, all, by filter),
restore, approve, reject, expire, and the access counts of what retrieval returned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from infra import clock
from infra.secrets import secrets_redact
from tenants.models import EndUser, Tenant

from ..extraction.candidate import subject_normalize
from ..extraction.rules import resolve_dates
from ..models import MemoryEvent, MemoryRecord, MemoryStatus
from ..selectors import memories_matching
from ..subjects import slot_after_edit
from .records import (
    _locked,
    _refuse,
    _transition,
    content_hash_for,
    memory_change_save,
    memory_history_write,
    memory_snapshot,
    memory_text_clean,
    memory_vectors_enqueue,
    validity_end,
)

log = logging.getLogger(__name__)

Status = MemoryStatus
Action = MemoryEvent.Action


def memory_access_record(*, tenant_id, memory_ids: list[str], at: datetime | None = None) -> int:
    """Count one access for each memory (called off the request path, from a task).

    Idempotent for a given `at`: only rows last accessed before it are counted, and they move to it, so a second
    delivery of the same access (or a late one older than a newer access) changes nothing."""
    if not memory_ids:
        return 0
    at = at or clock.now()
    return (
        MemoryRecord.objects.for_tenant(tenant_id)
        .filter(pk__in=list(memory_ids))
        .filter(Q(last_accessed_at__isnull=True) | Q(last_accessed_at__lt=at))
        .update(access_count=F("access_count") + 1, last_accessed_at=at)
    )


# --- controls over single memories ----------------------------------------------------------------------------


def memory_update_text(
    *,
    tenant: Tenant,
    text: str,
    actor_type: str,
    actor_id: str = "",
    memory_id=None,
    memory: MemoryRecord | None = None,
    user: EndUser | None = None,
    subject: str | None = None,
    value: str | None = None,
) -> MemoryRecord:
    """Replace a memory's text; the outbox re-embeds it. Its subject and value follow the text (read from it as
    extraction reads a message, memory.subjects) unless the caller sets them. Nothing changed writes nothing."""
    text = memory_text_clean(text)
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status == Status.DELETED:
            raise _refuse(record, "edited")
        new_subject, new_value = record.subject, record.value
        if subject is not None or value is not None:
            new_subject = record.subject if subject is None else subject_normalize(subject)
            new_value = record.value if value is None else secrets_redact(" ".join(value.split())).text
        elif record.text != text:
            who = (record.user.display_name or "").strip() or "The user"
            new_subject, new_value = slot_after_edit(text=text, kind=record.kind, who=who, subject=record.subject,
                                                     value=record.value)
        if (record.text, record.subject, record.value) == (text, new_subject, new_value):
            return record
        before = memory_snapshot(record)
        notes = ["text edited"] if record.text != text else []
        if (record.subject, record.value) != (new_subject, new_value):
            notes.append("subject and value set" if subject is not None or value is not None
                         else "subject and value read from the text")
        fields = ["text", "content_hash", "subject", "value", "updated_at"]
        if record.text != text:
            # The dates its words name are read again against when it was said: an edit of "April 15" to "April 30"
            # must not keep showing the old day beside the new words.
            dates = resolve_dates(text, record.created_at) if record.created_at else []
            metadata = {k: v for k, v in (record.metadata or {}).items() if k != "dates"}
            record.metadata = {**metadata, **({"dates": dates} if dates else {})}
            fields.append("metadata")
        record.text, record.subject, record.value = text, new_subject, new_value
        record.content_hash = content_hash_for(text)
        record.save(update_fields=fields)
        memory_history_write(
            record=record,
            action=Action.UPDATED,
            actor_type=actor_type,
            actor_id=actor_id,
            before=before,
            after=memory_snapshot(record),
            note="; ".join(notes),
        )
        memory_vectors_enqueue([record])
    return record


FORGOTTEN = "[forgotten]"


def _snapshot_rewritten(snapshot, rewrite: Callable[[str], str]):
    """A history snapshot with the forgotten words out of its text; its subject and value stay only while the
    rewritten text still says them."""
    if not isinstance(snapshot, dict) or not snapshot.get("text"):
        return snapshot
    text = rewrite(snapshot["text"]).strip() or FORGOTTEN
    out = {**snapshot, "text": text}
    for key in ("subject", "value"):
        if out.get(key) and out[key].lower() not in text.lower():
            out[key] = FORGOTTEN
    return out


def memory_text_forget(
    *,
    tenant: Tenant,
    rewrite: Callable[[str], str],
    actor_type: str,
    actor_id: str = "",
    note: str = "part forgotten",
    memory_id=None,
    memory: MemoryRecord | None = None,
    user: EndUser | None = None,
) -> MemoryRecord:
    """Take part of what a memory says back: its text becomes rewrite(text), and its history loses the same words
    (an edit keeps the old text in its history; a forgotten statement must not stay readable there). A memory left
    with nothing is deleted. Nothing changed writes nothing."""
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status == Status.DELETED:
            return record
        text = rewrite(record.text).strip()
        if text == record.text:
            return record
        if not text:
            return _transition(record, to=Status.DELETED, action=Action.DELETED, actor_type=actor_type,
                               actor_id=actor_id, note=note)
        text = memory_text_clean(text)
        for event in MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid=record.pk):
            before, after = _snapshot_rewritten(event.before, rewrite), _snapshot_rewritten(event.after, rewrite)
            if (before, after) != (event.before, event.after):
                event.before, event.after = before, after
                event.save(update_fields=["before", "after"])
        before = _snapshot_rewritten(memory_snapshot(record), rewrite)
        who = (record.user.display_name or "").strip() or "The user"
        record.subject, record.value = slot_after_edit(text=text, kind=record.kind, who=who, subject=record.subject,
                                                       value=record.value)
        record.text, record.content_hash = text, content_hash_for(text)
        record.save(update_fields=["text", "content_hash", "subject", "value", "updated_at"])
        memory_history_write(record=record, action=Action.UPDATED, actor_type=actor_type, actor_id=actor_id,
                             before=before, after=memory_snapshot(record), note=note)
        memory_vectors_enqueue([record])
    return record


def memory_delete(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Soft delete: the point goes at once, the row waits for the forget job. Deleting twice is a no-op."""
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status == Status.DELETED:
            return record
        return _transition(record, to=Status.DELETED, action=Action.DELETED, actor_type=actor_type, actor_id=actor_id)


def memory_delete_all(
    *, tenant: Tenant, user: EndUser, actor_type: str, actor_id: str = "", batch_size: int = 500
) -> list[MemoryRecord]:
    """Soft-delete every memory of the user; returns those that changed (forgetting takes their words out of what
    was derived from them). Batched so no lock is held long."""
    changed: list[MemoryRecord] = []
    while True:
        with transaction.atomic():
            records = list(
                MemoryRecord.objects.for_tenant(tenant)
                .select_for_update()
                .filter(user=user)
                .exclude(status=Status.DELETED)
                .order_by("pk")[:batch_size]
            )
            if not records:
                return changed
            now = clock.now()
            for record in records:
                before = memory_snapshot(record)
                record.status, record.status_changed_at = Status.DELETED, now
                memory_change_save(record, before=before, fields=["status", "status_changed_at", "updated_at"],
                                   action=Action.DELETED, actor_type=actor_type, actor_id=actor_id,
                                   note="all memories deleted")
            memory_vectors_enqueue(records)
            changed += records


# --- bulk delete by filter ------------------------------------------------------------------------------------------


BULK_DELETE_SAMPLE = 10


@dataclass(frozen=True)
class BulkDeleteResult:
    matched: int  # matching memories not yet deleted, before this call
    deleted: int
    sample_ids: list[str]  # dry run: the first matches; otherwise the first deleted
    more: bool  # matches remain past this call's bound: call again
    dry_run: bool
    # The records deleted, for the flow that takes their words out of what was derived from them.
    records: list[MemoryRecord] = field(default_factory=list, repr=False, compare=False)


def memories_bulk_delete(
    *,
    tenant: Tenant,
    user: EndUser,
    criteria,
    actor_type: str,
    actor_id: str = "",
    dry_run: bool = False,
    limit: int | None = None,
) -> BulkDeleteResult:
    """Soft-delete the user's memories matching `criteria` (memory.selectors.MemoryCriteria), oldest first, at
    most `limit` (capped by CONTINUUM_BULK_DELETE_MAX) per call, each through the single delete's transition: its
    history event and its outbox row. dry_run counts and samples the matches and changes nothing."""
    cap = settings.CONTINUUM_BULK_DELETE_MAX
    limit = cap if limit is None else max(1, min(int(limit), cap))
    matching = memories_matching(tenant=tenant, user=user, criteria=criteria).order_by("created_at", "pk")
    matched = matching.count()
    if dry_run:
        sample = [str(i) for i in matching.values_list("pk", flat=True)[:BULK_DELETE_SAMPLE]]
        return BulkDeleteResult(matched, 0, sample, False, True)
    with transaction.atomic():
        # Locked rows are re-checked against the filter, so one deleted meanwhile is neither counted nor touched.
        records = list(matching.select_for_update()[:limit])
        for record in records:
            _transition(record, to=Status.DELETED, action=Action.DELETED, actor_type=actor_type, actor_id=actor_id,
                        note="bulk delete")
    return BulkDeleteResult(
        matched, len(records), [str(r.pk) for r in records[:BULK_DELETE_SAMPLE]], matched > len(records), False,
        records,
    )


def _locked_when(
    allowed: tuple[str, ...], verb: str, *, tenant: Tenant, memory_id, memory: MemoryRecord | None, user: EndUser | None
) -> MemoryRecord:
    """The row, locked, when its status allows the change; the invalid_transition conflict when it does not."""
    record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
    if record.status not in allowed:
        raise _refuse(record, verb)
    return record


def _status_before_removal(record: MemoryRecord) -> str:
    """The status a memory had before it was deleted, rejected or expired (restore returns it there)."""
    event = (
        MemoryEvent.objects.for_tenant(record.tenant_id)
        .filter(memory_uuid=record.pk, action__in=[Action.DELETED, Action.REJECTED, Action.EXPIRED])
        .order_by("-created_at", "-id")
        .first()
    )
    previous = (event.before or {}).get("status") if event else None
    return previous if previous in (Status.ACTIVE, Status.PENDING_REVIEW) else Status.ACTIVE


def memory_restore(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                   memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Bring back a deleted, rejected or expired memory (a past expiry is cleared, or it would expire again)."""
    with transaction.atomic():
        record = _locked_when(
            (Status.DELETED, Status.EXPIRED), "restored", tenant=tenant, memory_id=memory_id, memory=memory, user=user
        )
        changes = {}
        if record.expires_at is not None and record.expires_at <= clock.now():
            changes["expires_at"] = None
        return _transition(
            record,
            to=_status_before_removal(record),
            action=Action.RESTORED,
            actor_type=actor_type,
            actor_id=actor_id,
            **changes,
        )


def _displaced_by(record: MemoryRecord) -> list[MemoryRecord]:
    """What a memory held for review replaces once approved: the active records it contradicts (same subject,
    another value, or the ones its held correction named) and the events it was consolidated from."""
    meta = record.metadata or {}
    cond = Q(pk__in=[str(i) for i in [*meta.get("consolidated_from", []), *meta.get("supersedes", [])]])
    if record.subject:
        cond |= Q(subject=record.subject) & ~Q(value=record.value)
    return list(
        MemoryRecord.objects.for_tenant(record.tenant_id)
        .select_for_update()
        .filter(cond, user_id=record.user_id, status=Status.ACTIVE)
        .exclude(pk=record.pk)
        .order_by("pk")
    )


def memory_approve(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                   memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Make a memory held for review active; what it supersedes (it was held, so did not yet) goes now."""
    with transaction.atomic():
        record = _locked_when(
            (Status.PENDING_REVIEW,), "approved", tenant=tenant, memory_id=memory_id, memory=memory, user=user
        )
        _transition(record, to=Status.ACTIVE, action=Action.APPROVED, actor_type=actor_type, actor_id=actor_id)
        for old in _displaced_by(record):
            _transition(old, to=Status.SUPERSEDED, action=Action.SUPERSEDED, actor_type=actor_type, actor_id=actor_id,
                        note=f"superseded by approved {record.pk}", superseded_by=record,
                        valid_to=validity_end(old=old, new=record))
        return record


def memory_reject(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    with transaction.atomic():
        record = _locked_when(
            (Status.PENDING_REVIEW,), "rejected", tenant=tenant, memory_id=memory_id, memory=memory, user=user
        )
        return _transition(record, to=Status.DELETED, action=Action.REJECTED, actor_type=actor_type, actor_id=actor_id)


def memory_expire(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None, note: str = "") -> MemoryRecord:
    """Expire now (or record that a past expires_at took effect). Expiring an expired memory is a no-op."""
    with transaction.atomic():
        record = _locked_when(
            (Status.ACTIVE, Status.PENDING_REVIEW, Status.EXPIRED),
            "expired",
            tenant=tenant,
            memory_id=memory_id,
            memory=memory,
            user=user,
        )
        if record.status == Status.EXPIRED:
            return record
        now = clock.now()
        expires_at = record.expires_at if record.expires_at and record.expires_at <= now else now
        return _transition(record, to=Status.EXPIRED, action=Action.EXPIRED, actor_type=actor_type, actor_id=actor_id,
                           note=note, expires_at=expires_at)


# --- lifecycle: what the scheduled jobs change ---------------------------------------------------------------------

# Set on events whose consolidated fact waits for review, so they are not proposed again meanwhile.
