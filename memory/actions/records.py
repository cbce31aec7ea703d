"""How every memory change is written: deterministic ids, expiry, the snapshot and history row of a change, the
locked read, the status transition and its outbox entry. The other modules of the package build on these.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import re
import uuid
from datetime import datetime, timedelta

from django.conf import settings

from infra import clock
from infra.errors import Conflict, NotFound, ValidationFailed
from infra.secrets import secrets_redact
from tenants.models import EndUser, Tenant
from tenants.selectors import parse_uuid

from ..extraction.candidate import Candidate, subject_normalize
from ..models import MemoryEvent, MemoryKind, MemoryRecord, MemoryStatus, SourceType
from ..outbox import outbox_enqueue
from ..sources import SourceMessage
from ..webhook_events import memory_webhook_emit

log = logging.getLogger(__name__)

Status = MemoryStatus
Action = MemoryEvent.Action


MEMORY_TEXT_MAX_CHARS = 4000

# Memory ids derived from (message, position): a retried extraction writes the same rows and the same points.


# Memory ids derived from (message, position): a retried extraction writes the same rows and the same points.
MEMORY_NAMESPACE = uuid.UUID("0b8f7c1e-5d2a-4b7e-9f3c-2a6d8e4b1c90")


MAX_SOURCE_MESSAGES = 20


def memory_id_for(message_id, index: int) -> uuid.UUID:
    return uuid.uuid5(MEMORY_NAMESPACE, f"{message_id}:{index}")


def memory_ttl_days(*, tenant: Tenant, kind: str) -> float | None:
    """The kind's TTL in days; the tenant's per-kind override wins (None or 0 there: never expires)."""
    overrides = tenant.memory_ttl_days or {}
    days = overrides[kind] if kind in overrides else settings.MEMORY_TTL_DAYS.get(kind)
    return float(days) if days else None


def memory_lifetime_start(*, tenant: Tenant, said_at: datetime, learned_at: datetime) -> datetime:
    """Where a memory's lifetime (TTL, decay, retention) starts: when Continuum learned it, unless the tenant counts
    from when it was said. Imported history said years ago is thus not old on arrival."""
    return said_at if tenant.memory_lifetime_from == Tenant.LifetimeFrom.SAID else learned_at


def memory_expiry(*, tenant: Tenant, kind: str, said_at: datetime, learned_at: datetime) -> datetime | None:
    """The lifetime's start + the kind's TTL; None when the kind never expires."""
    days = memory_ttl_days(tenant=tenant, kind=kind)
    if days is None:
        return None
    return memory_lifetime_start(tenant=tenant, said_at=said_at, learned_at=learned_at) + timedelta(days=days)


def validity_end(*, old: MemoryRecord, new: MemoryRecord) -> datetime:
    """When a superseded memory stopped holding: when its replacement was said; never before it began itself (a
    correction of the same moment, or an older statement learned later, leaves the old one an empty interval)."""
    end = new.valid_from or new.created_at or clock.now()
    start = old.valid_from or old.created_at
    return max(end, start) if start else end


def memory_snapshot(record: MemoryRecord) -> dict:
    return {
        "text": record.text,
        "kind": record.kind,
        "status": record.status,
        "subject": record.subject,
        "value": record.value,
        "confidence": record.confidence,
        "importance": record.importance,
        "reinforcement_count": record.reinforcement_count,
        "expires_at": record.expires_at.isoformat() if record.expires_at else None,
        "superseded_by": str(record.superseded_by_id) if record.superseded_by_id else None,
        "valid_from": record.valid_from.isoformat() if record.valid_from else None,
        "valid_to": record.valid_to.isoformat() if record.valid_to else None,
    }


# Inside history_rows_together(): the history rows written so far, inserted at once when the scope ends.
_pending_history: contextvars.ContextVar[list | None] = contextvars.ContextVar("memory_history_pending", default=None)


@contextlib.contextmanager
def history_rows_together():
    """Within the block (inside one transaction), the history rows of every change are inserted in one statement
    when it ends, not one each: for a caller that writes many changes at once (an extraction's decisions). A scope
    inside another adds to the outer one's rows. Nothing reads a change's history back within such a block."""
    if _pending_history.get() is not None:
        yield
        return
    rows: list[MemoryEvent] = []
    token = _pending_history.set(rows)
    try:
        yield
        if rows:
            MemoryEvent.objects.bulk_create(rows)
    finally:
        _pending_history.reset(token)


def memory_history_write(
    *,
    record: MemoryRecord,
    action: str,
    actor_type: str = MemoryEvent.Actor.SYSTEM,
    actor_id: str = "",
    before: dict | None = None,
    after: dict | None = None,
    note: str = "",
) -> None:
    """Append one history entry; it outlives the record (memory_uuid stays when the row is gone). The tenant's
    webhooks hear of the change in the same transaction."""
    event = MemoryEvent(
        tenant_id=record.tenant_id,
        user_id=record.user_id,
        memory=record,
        memory_uuid=record.pk,
        action=action,
        actor_type=actor_type,
        actor_id=str(actor_id or "")[:255],
        before=before,
        after=after,
        note=note[:255],
        created_at=clock.now(),
    )
    pending = _pending_history.get()
    if pending is None:
        event.save(force_insert=True)
    else:
        pending.append(event)
    memory_webhook_emit(record=record, action=action, actor_type=actor_type, at=event.created_at)


def _initial_status(*, tenant: Tenant, source_type: str) -> str:
    if source_type == SourceType.INFERRED and tenant.review_inferred:
        return MemoryStatus.PENDING_REVIEW
    return MemoryStatus.ACTIVE


def _validated(kind: str, source_type: str, text: str) -> str:
    if kind not in MemoryKind.values:
        raise ValidationFailed(f"Unknown memory kind '{kind}'.", details={"kinds": MemoryKind.values})
    if source_type not in SourceType.values:
        raise ValidationFailed(f"Unknown source type '{source_type}'.")
    if source_type == SourceType.ASSISTANT and kind != MemoryKind.EVENT:
        # DESIGN: what the assistant said is never a fact, preference or goal of the user's.
        raise ValidationFailed("What the assistant said is kept as an event only.")
    text = (text or "").strip()
    if not text:
        raise ValidationFailed("A memory needs text.")
    if len(text) > 4000:
        raise ValidationFailed("A memory's text is at most 4,000 characters.")
    return text


def _new_record(
    *,
    tenant,
    user,
    candidate: Candidate,
    source: SourceMessage | None = None,
    session_id=None,
    memory_id=None,
    created_at: datetime | None = None,
    learned_at: datetime | None = None,
) -> MemoryRecord:
    learned = learned_at or clock.now()
    created = created_at or (source.created_at if source is not None else None) or learned
    sources = [str(source.id)] if source is not None else []
    return MemoryRecord(
        id=memory_id or uuid.uuid4(),
        tenant=tenant,
        user=user,
        kind=candidate.kind,
        text=candidate.text,
        subject=subject_normalize(candidate.subject),
        value=candidate.value[:2000],
        confidence=round(float(candidate.confidence), 4),
        importance=round(float(candidate.importance), 4),
        source_type=candidate.source_type,
        source_message_id=source.id if source is not None else None,
        source_message_ids=sources,
        session_id=session_id if session_id is not None else (source.session_id if source is not None else None),
        created_at=created,
        learned_at=learned,
        valid_from=created,
        status=_initial_status(tenant=tenant, source_type=candidate.source_type),
        status_changed_at=clock.now(),
        expires_at=memory_expiry(tenant=tenant, kind=candidate.kind, said_at=created, learned_at=learned),
        content_hash=content_hash_for(candidate.text),
        extractor=candidate.extractor[:40],
        extractor_version=str(candidate.metadata.get("extractor_version", "1")),
        metadata={k: v for k, v in candidate.metadata.items() if k != "extractor_version"},
    )


def vector_op_for(record: MemoryRecord) -> str:
    """A deleted record has no point; every other status keeps one whose payload mirrors the row."""
    return "delete" if record.status == Status.DELETED else "upsert"


def memory_vectors_enqueue(records: list[MemoryRecord], *, op: str | None = None) -> None:
    """Record the vector writes these changed rows need; call inside the transaction that changed them.

    op="payload" for a change that leaves the text alone (importance, status marks): the point's payload is set
    again from the row without embedding the text anew. A deleted row's point is always deleted."""
    by_op: dict[tuple[str, str], list[str]] = {}
    for r in records:
        kind = vector_op_for(r) if op is None or r.status == Status.DELETED else op
        by_op.setdefault((str(r.tenant_id), kind), []).append(str(r.pk))
    for (tenant_id, op), ids in by_op.items():
        outbox_enqueue(tenant_id=tenant_id, memory_ids=ids, op=op)


def memory_change_save(record: MemoryRecord, *, before: dict, fields: list[str], action: str, actor_type: str,
                       actor_id: str, note: str = "") -> MemoryRecord:
    """Save a changed row's `fields` and write the change's history entry, from `before` (the snapshot taken before
    the change) to the row as saved. Call inside the transaction that holds the row."""
    record.save(update_fields=fields)
    memory_history_write(record=record, action=action, actor_type=actor_type, actor_id=actor_id, before=before,
                         after=memory_snapshot(record), note=note)
    return record


def _locked(
    *, tenant: Tenant, memory_id=None, memory: MemoryRecord | None = None, user: EndUser | None = None
) -> MemoryRecord:
    """The row, locked; one 404 for missing, another tenant's and (when user is given) another user's."""
    mid = memory.pk if memory is not None else parse_uuid(memory_id, what="memory")
    qs = MemoryRecord.objects.for_tenant(tenant).select_for_update().filter(pk=mid)
    if user is not None:
        qs = qs.filter(user=user)
    record = qs.first()
    if record is None:
        raise NotFound("Memory not found.")
    return record


def _refuse(record: MemoryRecord, verb: str) -> Conflict:
    return Conflict(
        f"A memory that is {record.status} cannot be {verb}.",
        code="invalid_transition",
        details={"status": record.status},
    )


def _transition(
    record: MemoryRecord, *, to: str, action: str, actor_type: str, actor_id: str, note: str = "", **changes
) -> MemoryRecord:
    before = memory_snapshot(record)
    record.status = to
    record.status_changed_at = clock.now()
    for field, value in changes.items():
        setattr(record, field, value)
    memory_change_save(record, before=before, fields=["status", "status_changed_at", "updated_at", *changes],
                       action=action, actor_type=actor_type, actor_id=actor_id, note=note)
    memory_vectors_enqueue([record])
    return record


def _normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def content_hash_for(text: str) -> str:
    return hashlib.sha256(_normalized(text).encode()).hexdigest()


def memory_text_clean(text: str) -> str:
    """An edited text obeys what extraction obeys: not empty, not too long, and no secret is ever stored."""

    text = (text or "").strip()
    if not text:
        raise ValidationFailed("Text must not be empty.", details={"text": ["This field may not be blank."]})
    if len(text) > MEMORY_TEXT_MAX_CHARS:
        raise ValidationFailed(
            f"A memory's text is at most {MEMORY_TEXT_MAX_CHARS} characters.", details={"text": ["Too long."]}
        )
    redaction = secrets_redact(text)
    if redaction.found and not redaction.text.replace("[redacted]", " ").strip(" .,:;-"):
        raise ValidationFailed(
            "This text is a secret (credential, token, card or account number) and is not stored.",
            code="secret_refused",
        )
    return redaction.text
