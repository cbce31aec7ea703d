"""Every change of a memory's state, in one module: create, remember (dedup and supersede aware), reinforce,
supersede, edit, approve, reject, expire, decay, fold (merge), consolidate, delete, restore, forget, erase.

Each change locks or creates the row, writes its MemoryEvent (who, before, after) and records the vector write
in the outbox inside one transaction; the point reaches Qdrant after commit. Extraction, the assistant's tools,
the lifecycle jobs, the admin and the end-user API all come here, and nothing else writes MemoryRecord. Text passes
the secrets filter before anything is stored.
"""
from __future__ import annotations

import hashlib
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from infra import clock
from infra.embedder import get_embedder
from infra.errors import Conflict, NotFound, ValidationFailed
from infra.secrets import secrets_redact
from tenants.models import EndUser, Tenant
from tenants.selectors import parse_uuid

from .extraction.candidate import Candidate, subject_normalize
from .extraction.classify import informative_text
from .extraction.injection import candidate_instruction_kinds
from .models import MemoryEvent, MemoryKind, MemoryRecord, MemoryStatus, SourceType, VectorOutbox
from .outbox import outbox_enqueue
from .sources import SourceMessage
from .user_lock import user_memory_lock
from .webhook_events import memory_webhook_emit, memory_webhooks_emit

log = logging.getLogger(__name__)

Status = MemoryStatus
Action = MemoryEvent.Action
MEMORY_TEXT_MAX_CHARS = 4000

# Memory ids derived from (message, position): a retried extraction writes the same rows and the same points.
MEMORY_NAMESPACE = uuid.UUID("0b8f7c1e-5d2a-4b7e-9f3c-2a6d8e4b1c90")
MAX_SOURCE_MESSAGES = 20


def memory_id_for(message_id, index: int) -> uuid.UUID:
    return uuid.uuid5(MEMORY_NAMESPACE, f"{message_id}:{index}")


def memory_expiry(*, tenant: Tenant, kind: str, created_at: datetime) -> datetime | None:
    """created_at + the kind's TTL; the tenant's per-kind override wins (None or 0 there: never expires)."""
    overrides = tenant.memory_ttl_days or {}
    days = overrides[kind] if kind in overrides else settings.MEMORY_TTL_DAYS.get(kind)
    if not days:
        return None
    return created_at + timedelta(days=float(days))


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


def memory_history_write(*, record: MemoryRecord, action: str, actor_type: str = MemoryEvent.Actor.SYSTEM,
                        actor_id: str = "", before: dict | None = None, after: dict | None = None,
                        note: str = "") -> MemoryEvent:
    """Append one history entry; it outlives the record (memory_uuid stays when the row is gone). The tenant's
    webhooks hear of the change in the same transaction."""
    event = MemoryEvent.objects.create(
        tenant_id=record.tenant_id, user_id=record.user_id, memory=record, memory_uuid=record.pk, action=action,
        actor_type=actor_type, actor_id=str(actor_id or "")[:255], before=before, after=after, note=note[:255],
        created_at=clock.now())
    memory_webhook_emit(record=record, action=action, actor_type=actor_type, at=event.created_at)
    return event


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


def _new_record(*, tenant, user, candidate: Candidate, source: SourceMessage | None = None, session_id=None,
                memory_id=None, created_at: datetime | None = None) -> MemoryRecord:
    created = created_at or (source.created_at if source is not None else None) or clock.now()
    sources = [str(source.id)] if source is not None else []
    return MemoryRecord(
        id=memory_id or uuid.uuid4(), tenant=tenant, user=user, kind=candidate.kind, text=candidate.text,
        subject=subject_normalize(candidate.subject), value=candidate.value[:2000],
        confidence=round(float(candidate.confidence), 4), importance=round(float(candidate.importance), 4),
        source_type=candidate.source_type, source_message_id=source.id if source is not None else None,
        source_message_ids=sources,
        session_id=session_id if session_id is not None else (source.session_id if source is not None else None),
        created_at=created, valid_from=created,
        status=_initial_status(tenant=tenant, source_type=candidate.source_type),
        status_changed_at=clock.now(), expires_at=memory_expiry(tenant=tenant, kind=candidate.kind, created_at=created),
        content_hash=content_hash_for(candidate.text),
        extractor=candidate.extractor[:40], extractor_version=str(candidate.metadata.get("extractor_version", "1")),
        metadata={k: v for k, v in candidate.metadata.items() if k != "extractor_version"},
    )


def _reinforce_locked(record: MemoryRecord, *, source: SourceMessage | None = None, actor_type: str, actor_id: str,
                      similarity: float | None) -> MemoryRecord:
    before = memory_snapshot(record)
    record.reinforcement_count += 1
    # Each confirmation closes a fifth of the remaining doubt.
    record.confidence = round(min(0.99, record.confidence + (1 - record.confidence) * 0.2), 4)
    if source is not None and str(source.id) not in record.source_message_ids:
        record.source_message_ids = (record.source_message_ids + [str(source.id)])[:MAX_SOURCE_MESSAGES]
    record.save(update_fields=["reinforcement_count", "confidence", "source_message_ids", "updated_at"])
    memory_history_write(record=record, action=MemoryEvent.Action.REINFORCED, actor_type=actor_type,
                        actor_id=actor_id, before=before, after=memory_snapshot(record),
                        note=f"similarity {similarity:.3f}" if similarity is not None else "")
    return record


def _create_locked(record: MemoryRecord, *, actor_type: str, actor_id: str, note: str = "") -> MemoryRecord:
    record.save(force_insert=True)
    memory_history_write(record=record, action=MemoryEvent.Action.CREATED, actor_type=actor_type, actor_id=actor_id,
                        after=memory_snapshot(record), note=note)
    return record


def validity_end(*, old: MemoryRecord, new: MemoryRecord):
    """When a superseded memory stopped holding: when its replacement was said; never before it began itself (a
    correction of the same moment, or an older statement learned later, leaves the old one an empty interval)."""
    end = new.valid_from or new.created_at or clock.now()
    start = old.valid_from or old.created_at
    return max(end, start) if start else end


def memory_supersede(*, old: MemoryRecord, new: MemoryRecord, actor_type: str, actor_id: str = "",
                     note: str = "") -> None:
    """Mark old as superseded by new, with its history event; call inside a transaction holding the row."""
    before = memory_snapshot(old)
    old.status = MemoryStatus.SUPERSEDED
    old.superseded_by = new
    old.status_changed_at = clock.now()
    old.valid_to = validity_end(old=old, new=new)
    old.save(update_fields=["status", "superseded_by", "status_changed_at", "valid_to", "updated_at"])
    memory_history_write(record=old, action=MemoryEvent.Action.SUPERSEDED, actor_type=actor_type, actor_id=actor_id,
                        before=before, after=memory_snapshot(old), note=note or f"superseded by {new.pk}")


def decisions_apply(*, tenant: Tenant, user: EndUser, decisions, source: SourceMessage | None = None,
                    session_id=None, memory_ids: list | None = None, actor_type: str = MemoryEvent.Actor.SYSTEM,
                    actor_id: str = "") -> list[tuple[MemoryRecord | None, str]]:
    """Persist verified decisions; call inside a transaction. Returns (record, outcome) per decision.

    memory_ids gives each decision's id for a new row (deterministic in extraction); an id that already
    exists means this work was done before, and the existing row is returned untouched.
    """
    from .extraction.verify import CREATE, OUTDATED, REINFORCE, SKIP, SUPERSEDE  # verify builds on these writes

    results: list[tuple[MemoryRecord | None, str]] = []
    changed: list[MemoryRecord] = []
    for i, decision in enumerate(decisions):
        mid = memory_ids[i] if memory_ids else None
        if decision.action == SKIP:
            results.append((None, "duplicate_in_message"))
            continue
        if mid is not None:
            existing = MemoryRecord.objects.for_tenant(tenant).filter(pk=mid).first()
            if existing is not None:
                results.append((existing, "exists"))
                continue
        action = decision.action
        targets = list(MemoryRecord.objects.for_tenant(tenant).select_for_update().filter(
            user=user, pk__in=decision.target_ids, status=MemoryStatus.ACTIVE)) \
            if decision.target_ids else []
        if action in (REINFORCE, SUPERSEDE, OUTDATED) and not targets:
            action = CREATE  # the target changed since verification: store the candidate as new
        if action == REINFORCE and source is not None and str(source.id) in targets[0].source_message_ids:
            results.append((targets[0], "exists"))  # this message already reinforced it: a rerun changes nothing
            continue
        if action == REINFORCE:
            record = _reinforce_locked(targets[0], source=source, actor_type=actor_type,
                                       actor_id=actor_id, similarity=decision.similarity)
            results.append((record, "reinforced"))
            changed.append(record)
            continue
        record = _new_record(tenant=tenant, user=user, candidate=decision.candidate, source=source,
                             session_id=session_id, memory_id=mid)
        _create_locked(record, actor_type=actor_type, actor_id=actor_id,
                       note=f"supersedes {', '.join(str(t.pk) for t in targets)}" if action == SUPERSEDE else "")
        changed.append(record)
        if action == OUTDATED:
            # Said before the slot's current value: kept in the history, born superseded by what was said later.
            memory_supersede(old=record, new=targets[0], actor_type=actor_type, actor_id=actor_id,
                             note=f"stated before {targets[0].pk}, which it does not replace")
            results.append((record, "outdated"))
            continue
        # A memory held for review does not displace an active one until it is approved.
        if action == SUPERSEDE and record.status == MemoryStatus.ACTIVE:
            for old in targets:
                memory_supersede(old=old, new=record, actor_type=actor_type, actor_id=actor_id)
                changed.append(old)
            results.append((record, "superseded"))
        else:
            results.append((record, "created"))
    if changed:
        outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(r.pk) for r in changed])
    return results


def memory_create(*, tenant: Tenant, user: EndUser, kind: str, text: str, source_type: str = SourceType.USER_STATED,
                  confidence: float = 0.8, importance: float = 0.5, source: SourceMessage | None = None,
                  session_id=None, subject: str = "", value: str = "", actor_type: str = MemoryEvent.Actor.SYSTEM,
                  actor_id: str = "", extractor: str = "manual", created_at: datetime | None = None, memory_id=None,
                  metadata: dict | None = None) -> MemoryRecord:
    """Store one memory as given (no duplicate check). Secrets are redacted; a text that is only a secret is
    refused."""
    text = _validated(kind, source_type, text)
    redaction = secrets_redact(text)
    if redaction.found and not _has_content(redaction.text):
        raise ValidationFailed("This text is a secret (credential, token, card or account number) and is not stored.",
                               code="secret_refused")
    if user.tenant_id != tenant.pk:
        raise ValidationFailed("The user does not belong to this tenant.")
    candidate = Candidate(kind, redaction.text, source_type=source_type, subject=subject, value=value,
                          confidence=confidence, importance=importance, extractor=extractor,
                          metadata=dict(metadata or {}))
    with transaction.atomic():
        record = _new_record(tenant=tenant, user=user, candidate=candidate, source=source, session_id=session_id,
                             memory_id=memory_id, created_at=created_at)
        _create_locked(record, actor_type=actor_type, actor_id=actor_id)
        outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(record.pk)])
    return record


def _has_content(text: str) -> bool:
    return bool(informative_text(text.replace("[redacted]", " ")).strip(" .,:;-"))


def memory_remember(*, tenant: Tenant, user: EndUser, kind: str, text: str, source_type: str = SourceType.USER_STATED,
                    confidence: float = 0.8, importance: float = 0.6, source: SourceMessage | None = None,
                    session_id=None, subject: str = "", value: str = "", actor_type: str = MemoryEvent.Actor.SYSTEM,
                    actor_id: str = "") -> tuple[MemoryRecord | None, str]:
    """Store a memory unless the user already has it: a near-duplicate is reinforced, a new value for the same
    subject supersedes the old one. Returns (record, outcome): created | reinforced | superseded | secret |
    refused_instruction (the text tells the assistant what to do instead of saying something about the user;
    nothing is stored, so a fooled model cannot plant an instruction for later turns)."""
    from .extraction.verify import candidates_verify  # verification reads what these writes made

    text = _validated(kind, source_type, text)
    if user.tenant_id != tenant.pk:
        raise ValidationFailed("The user does not belong to this tenant.")
    redaction = secrets_redact(text)
    if redaction.found and not _has_content(redaction.text):
        return None, "secret"
    candidate = Candidate(kind, redaction.text, source_type=source_type, subject=subject_normalize(subject),
                          value=secrets_redact(value).text, confidence=confidence, importance=importance,
                          extractor="remember")
    # Refused whole, not trimmed: the caller (a model) hears why and can store the plain fact on its own.
    refused = candidate_instruction_kinds(candidate, who=(user.display_name or "").strip())
    if refused:
        log.info("remember refused for user %s: %s", user.pk, ", ".join(refused))
        return None, "refused_instruction"
    vectors = get_embedder().embed([candidate.text])
    with user_memory_lock(tenant_id=tenant.pk, user_id=user.pk):
        decisions = candidates_verify(tenant=tenant, user=user, candidates=[candidate], vectors=vectors,
                                      stated_at=source.created_at if source is not None else None)
        with transaction.atomic():
            return decisions_apply(tenant=tenant, user=user, decisions=decisions, source=source,
                                   session_id=session_id, actor_type=actor_type, actor_id=actor_id)[0]


def memory_access_record(*, tenant_id, memory_ids: list[str], at: datetime | None = None) -> int:
    """Count one access for each memory (called off the request path, from a task).

    Idempotent for a given `at`: only rows last accessed before it are counted, and they move to it, so a second
    delivery of the same access (or a late one older than a newer access) changes nothing."""
    if not memory_ids:
        return 0
    at = at or clock.now()
    return MemoryRecord.objects.for_tenant(tenant_id).filter(pk__in=list(memory_ids)).filter(
        Q(last_accessed_at__isnull=True) | Q(last_accessed_at__lt=at)).update(
        access_count=F("access_count") + 1, last_accessed_at=at)


# --- controls over single memories ----------------------------------------------------------------------------

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


def _locked(*, tenant: Tenant, memory_id=None, memory: MemoryRecord | None = None,
            user: EndUser | None = None) -> MemoryRecord:
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
    return Conflict(f"A memory that is {record.status} cannot be {verb}.", code="invalid_transition",
                    details={"status": record.status})


def _transition(record: MemoryRecord, *, to: str, action: str, actor_type: str, actor_id: str, note: str = "",
                **changes) -> MemoryRecord:
    before = memory_snapshot(record)
    record.status = to
    record.status_changed_at = clock.now()
    for field, value in changes.items():
        setattr(record, field, value)
    record.save(update_fields=["status", "status_changed_at", "updated_at", *changes])
    memory_history_write(record=record, action=action, actor_type=actor_type, actor_id=actor_id, before=before,
                         after=memory_snapshot(record), note=note)
    memory_vectors_enqueue([record])
    return record


def _normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def content_hash_for(text: str) -> str:
    return hashlib.sha256(_normalized(text).encode()).hexdigest()


def memory_text_clean(text: str) -> str:
    """An edited text obeys what extraction obeys: not empty, not too long, and no secret is ever stored."""
    from infra.secrets import secrets_redact

    text = (text or "").strip()
    if not text:
        raise ValidationFailed("Text must not be empty.", details={"text": ["This field may not be blank."]})
    if len(text) > MEMORY_TEXT_MAX_CHARS:
        raise ValidationFailed(f"A memory's text is at most {MEMORY_TEXT_MAX_CHARS} characters.",
                               details={"text": ["Too long."]})
    redaction = secrets_redact(text)
    if redaction.found and not redaction.text.replace("[redacted]", " ").strip(" .,:;-"):
        raise ValidationFailed("This text is a secret (credential, token, card or account number) and is not "
                               "stored.", code="secret_refused")
    return redaction.text


def memory_update_text(*, tenant: Tenant, text: str, actor_type: str, actor_id: str = "", memory_id=None,
                       memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Replace a memory's text; the outbox re-embeds it. Unchanged text writes nothing."""
    text = memory_text_clean(text)
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status == Status.DELETED:
            raise _refuse(record, "edited")
        if record.text == text:
            return record
        before = memory_snapshot(record)
        record.text = text
        record.content_hash = content_hash_for(text)
        record.save(update_fields=["text", "content_hash", "updated_at"])
        memory_history_write(record=record, action=Action.UPDATED, actor_type=actor_type, actor_id=actor_id,
                             before=before, after=memory_snapshot(record), note="text edited")
        memory_vectors_enqueue([record])
    return record


def memory_delete(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Soft delete: the point goes at once, the row waits for the forget job. Deleting twice is a no-op."""
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status == Status.DELETED:
            return record
        return _transition(record, to=Status.DELETED, action=Action.DELETED, actor_type=actor_type,
                           actor_id=actor_id)


def memory_delete_all(*, tenant: Tenant, user: EndUser, actor_type: str, actor_id: str = "",
                      batch_size: int = 500) -> int:
    """Soft-delete every memory of the user; returns how many changed. Batched so no lock is held long."""
    changed = 0
    while True:
        with transaction.atomic():
            records = list(MemoryRecord.objects.for_tenant(tenant).select_for_update()
                           .filter(user=user).exclude(status=Status.DELETED)
                           .order_by("pk")[:batch_size])
            if not records:
                return changed
            now = clock.now()
            for record in records:
                before = memory_snapshot(record)
                record.status, record.status_changed_at = Status.DELETED, now
                record.save(update_fields=["status", "status_changed_at", "updated_at"])
                memory_history_write(record=record, action=Action.DELETED, actor_type=actor_type,
                                     actor_id=actor_id, before=before, after=memory_snapshot(record),
                                     note="all memories deleted")
            memory_vectors_enqueue(records)
            changed += len(records)


# --- bulk delete by filter ------------------------------------------------------------------------------------------

BULK_DELETE_SAMPLE = 10


@dataclass(frozen=True)
class BulkDeleteResult:
    matched: int  # matching memories not yet deleted, before this call
    deleted: int
    sample_ids: list[str]  # dry run: the first matches; otherwise the first deleted
    more: bool  # matches remain past this call's bound: call again
    dry_run: bool


def memories_bulk_delete(*, tenant: Tenant, user: EndUser, criteria, actor_type: str, actor_id: str = "",
                         dry_run: bool = False, limit: int | None = None) -> BulkDeleteResult:
    """Soft-delete the user's memories matching `criteria` (memory.selectors.MemoryCriteria), oldest first, at
    most `limit` (capped by CONTINUUM_BULK_DELETE_MAX) per call, each through the single delete's transition: its
    history event and its outbox row. dry_run counts and samples the matches and changes nothing."""
    from .selectors import memories_matching  # selectors read what these writes make

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
    return BulkDeleteResult(matched, len(records), [str(r.pk) for r in records[:BULK_DELETE_SAMPLE]],
                            matched > len(records), False)


def _status_before_removal(record: MemoryRecord) -> str:
    """The status a memory had before it was deleted, rejected or expired (restore returns it there)."""
    event = (MemoryEvent.objects.for_tenant(record.tenant_id).filter(memory_uuid=record.pk, action__in=[Action.DELETED, Action.REJECTED,
                                                                           Action.EXPIRED])
             .order_by("-created_at", "-id").first())
    previous = (event.before or {}).get("status") if event else None
    return previous if previous in (Status.ACTIVE, Status.PENDING_REVIEW) else Status.ACTIVE


def memory_restore(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                   memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Bring back a deleted, rejected or expired memory (a past expiry is cleared, or it would expire again)."""
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status not in (Status.DELETED, Status.EXPIRED):
            raise _refuse(record, "restored")
        changes = {}
        if record.expires_at is not None and record.expires_at <= clock.now():
            changes["expires_at"] = None
        return _transition(record, to=_status_before_removal(record), action=Action.RESTORED,
                           actor_type=actor_type, actor_id=actor_id, **changes)


def _displaced_by(record: MemoryRecord) -> list[MemoryRecord]:
    """What a memory held for review replaces once approved: the active records it contradicts (same subject,
    another value) and the events it was consolidated from."""
    cond = Q(pk__in=[str(i) for i in (record.metadata or {}).get("consolidated_from", [])])
    if record.subject:
        cond |= Q(subject=record.subject) & ~Q(value=record.value)
    return list(MemoryRecord.objects.for_tenant(record.tenant_id).select_for_update()
                .filter(cond, user_id=record.user_id, status=Status.ACTIVE)
                .exclude(pk=record.pk).order_by("pk"))


def memory_approve(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                   memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Make a memory held for review active; what it supersedes (it was held, so did not yet) goes now."""
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status != Status.PENDING_REVIEW:
            raise _refuse(record, "approved")
        _transition(record, to=Status.ACTIVE, action=Action.APPROVED, actor_type=actor_type, actor_id=actor_id)
        for old in _displaced_by(record):
            _transition(old, to=Status.SUPERSEDED, action=Action.SUPERSEDED, actor_type=actor_type,
                        actor_id=actor_id, note=f"superseded by approved {record.pk}", superseded_by=record,
                        valid_to=validity_end(old=old, new=record))
        return record


def memory_reject(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status != Status.PENDING_REVIEW:
            raise _refuse(record, "rejected")
        return _transition(record, to=Status.DELETED, action=Action.REJECTED, actor_type=actor_type,
                           actor_id=actor_id)


def memory_expire(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None, note: str = "") -> MemoryRecord:
    """Expire now (or record that a past expires_at took effect). Expiring an expired memory is a no-op."""
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status == Status.EXPIRED:
            return record
        if record.status not in (Status.ACTIVE, Status.PENDING_REVIEW):
            raise _refuse(record, "expired")
        now = clock.now()
        expires_at = record.expires_at if record.expires_at and record.expires_at <= now else now
        return _transition(record, to=Status.EXPIRED, action=Action.EXPIRED, actor_type=actor_type,
                           actor_id=actor_id, note=note, expires_at=expires_at)


# --- lifecycle: what the scheduled jobs change ---------------------------------------------------------------------

# Set on events whose consolidated fact waits for review, so they are not proposed again meanwhile.
PENDING_MARK = "consolidation_pending"


def memories_fold(*, tenant: Tenant, keeper_id, other_ids: list, actor_id: str, note: str) -> int:
    """Supersede the others by the keeper, which absorbs their support. Returns how many were folded.

    Locks every row and re-checks it is still active: a concurrent run or a user's delete that got there
    first wins, and nothing is applied twice."""
    with transaction.atomic():
        rows = {r.pk: r for r in MemoryRecord.objects.for_tenant(tenant).select_for_update()
                .filter(pk__in=[keeper_id, *other_ids], status=MemoryStatus.ACTIVE).order_by("pk")}
        keeper = rows.get(keeper_id)
        others = [rows[i] for i in other_ids if i in rows]
        if keeper is None or not others:
            return 0
        before = memory_snapshot(keeper)
        sources = list(keeper.source_message_ids or [])
        for other in others:
            for mid in [*(other.source_message_ids or []), *([str(other.source_message_id)]
                                                              if other.source_message_id else [])]:
                if mid not in sources:
                    sources.append(mid)
            keeper.reinforcement_count += other.reinforcement_count + 1
            keeper.access_count += other.access_count
            keeper.confidence = max(keeper.confidence, other.confidence)
            keeper.importance = max(keeper.importance, other.importance)
            if other.last_accessed_at and (not keeper.last_accessed_at or other.last_accessed_at > keeper.last_accessed_at):
                keeper.last_accessed_at = other.last_accessed_at
        keeper.source_message_ids = sources
        keeper.save(update_fields=["reinforcement_count", "access_count", "confidence", "importance",
                                   "last_accessed_at", "source_message_ids", "updated_at"])
        memory_history_write(record=keeper, action=MemoryEvent.Action.REINFORCED, actor_type="system",
                             actor_id=actor_id, before=before, after=memory_snapshot(keeper),
                             note=f"{note}: absorbed {len(others)}")
        for other in others:
            memory_supersede(old=other, new=keeper, actor_type="system", actor_id=actor_id,
                             note=f"{note} into {keeper.pk}")
        memory_vectors_enqueue([keeper, *others])
    return len(others)


def fact_from_events(*, tenant: Tenant, text: str, kind: str, confidence: float, source_type: str,
                     event_ids: list, actor_id: str) -> MemoryRecord | None:
    """Write the fact (or reinforce an identical one) and supersede the events by it, in one transaction.

    Returns None, changing nothing, when any event is no longer active (another run won). A fact held for
    review (an inferred one, where the tenant reviews those) does not displace the events until approved;
    they are marked so the next pass does not propose it again."""
    with transaction.atomic():
        events = list(MemoryRecord.objects.for_tenant(tenant).select_for_update()
                      .filter(pk__in=event_ids, status=MemoryStatus.ACTIVE)
                      .order_by("created_at", "pk"))
        if len(events) != len(set(event_ids)):
            return None
        latest = events[-1]
        sources = []
        for e in events:
            for mid in [*([str(e.source_message_id)] if e.source_message_id else []), *(e.source_message_ids or [])]:
                if mid not in sources:
                    sources.append(mid)
        fact = (MemoryRecord.objects.for_tenant(tenant).select_for_update()
                .filter(user_id=latest.user_id, kind=kind, content_hash=content_hash_for(text),
                        status__in=[MemoryStatus.ACTIVE, MemoryStatus.PENDING_REVIEW]).first())
        if fact is None:
            fact = memory_create(
                tenant=tenant, user=latest.user, kind=kind, text=text, source_type=source_type,
                confidence=confidence, importance=max(e.importance for e in events),
                source=SourceMessage(id=str(latest.source_message_id), session_id=latest.session_id,
                                     created_at=latest.created_at) if latest.source_message_id else None,
                session_id=latest.session_id, actor_type="system", actor_id=actor_id,
                extractor="consolidate", created_at=latest.created_at,
                metadata={"consolidated_from": [str(e.pk) for e in events]})
            # Born with its events' support: part of its creation, which the outbox already carries.
            fact.reinforcement_count = len(events) - 1
            fact.source_message_ids = sources
            fact.save(update_fields=["reinforcement_count", "source_message_ids", "updated_at"])
        else:
            before = memory_snapshot(fact)
            fact.reinforcement_count += len(events)
            fact.source_message_ids = [*fact.source_message_ids,
                                       *(s for s in sources if s not in fact.source_message_ids)]
            fact.save(update_fields=["reinforcement_count", "source_message_ids", "updated_at"])
            memory_history_write(record=fact, action=MemoryEvent.Action.REINFORCED, actor_type="system",
                                 actor_id=actor_id, before=before, after=memory_snapshot(fact),
                                 note=f"reinforced by {len(events)} repeated events")
            memory_vectors_enqueue([fact])
        if fact.status != MemoryStatus.ACTIVE:
            for e in events:
                before = memory_snapshot(e)
                e.metadata = {**(e.metadata or {}), PENDING_MARK: str(fact.pk)}
                e.save(update_fields=["metadata", "updated_at"])
                memory_history_write(record=e, action=MemoryEvent.Action.UPDATED, actor_type="system",
                                     actor_id=actor_id, before=before, after=memory_snapshot(e),
                                     note=f"consolidation into {fact.pk} awaits review")
            memory_vectors_enqueue(events, op=VectorOutbox.Op.PAYLOAD)
            return fact
        for e in events:
            memory_supersede(old=e, new=fact, actor_type="system", actor_id=actor_id,
                             note=f"consolidated into {fact.pk}")
        memory_vectors_enqueue(events)
    return fact


def memory_decay(*, record: MemoryRecord, importance: float, state: dict) -> bool:
    """Set a memory's effective importance (and the decay state it was computed from), with its history event and
    a payload write; a row no longer active is left alone. Call inside a transaction. Returns whether it changed."""
    before = memory_snapshot(record)
    metadata = {**(record.metadata or {}), "decay": state}
    # Conditional on the row still being active: a record deleted meanwhile is left as it is.
    if not MemoryRecord.objects.for_tenant(record.tenant_id).filter(pk=record.pk, status=Status.ACTIVE).update(
            importance=importance, metadata=metadata, updated_at=clock.now()):
        return False
    record.importance, record.metadata = importance, metadata
    memory_history_write(record=record, action=Action.DECAYED, actor_type="system", actor_id="lifecycle.decay",
                         before=before, after=memory_snapshot(record),
                         note=f"importance {before['importance']:.4f} -> {importance:.4f}")
    memory_vectors_enqueue([record], op=VectorOutbox.Op.PAYLOAD)
    return True


_LIVE = (Status.ACTIVE, Status.PENDING_REVIEW)


def memories_expire_due(*, tenant: Tenant, now: datetime, limit: int) -> list[MemoryRecord]:
    """Expire the memories whose expires_at has passed (up to `limit`), each with its history event."""
    with transaction.atomic():
        # skip_locked: rows another run (or a user's edit) holds are theirs; the condition is re-checked here,
        # so a record is expired, and its event written, exactly once.
        records = list(MemoryRecord.objects.for_tenant(tenant).select_for_update(skip_locked=True)
                       .filter(status__in=_LIVE, expires_at__lte=now).order_by("expires_at", "pk")[:limit])
        for record in records:
            _transition(record, to=Status.EXPIRED, action=Action.EXPIRED, actor_type="system",
                        actor_id="lifecycle.expire", note="expires_at passed")
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
    MemoryEvent.objects.bulk_create([
        MemoryEvent(tenant=tenant, user_id=r.user_id, memory=None, memory_uuid=r.pk, action=Action.FORGOTTEN,
                    actor_type=MemoryEvent.Actor.SYSTEM, actor_id="lifecycle.forget", created_at=now,
                    note=reasons.get(r.pk, "")[:255],
                    before={"kind": r.kind, "status": r.status, "source_type": r.source_type,
                            "created_at": r.created_at.isoformat()})
        for r in records])
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
