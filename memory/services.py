"""Writes of long-term memories: create, remember (dedup and supersede aware), reinforce, supersede, history.

Every write changes the row, writes a MemoryEvent and records the vector write in the outbox inside one
transaction; the point reaches Qdrant after commit. Text passes the secrets filter before anything is stored.
"""
from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from infra import clock
from infra.embedder import get_embedder
from infra.errors import ValidationFailed
from tenants.models import EndUser, Tenant

from .controls import content_hash_for
from .extraction.candidate import Candidate, subject_normalize
from .extraction.injection import candidate_instruction_kinds
from .extraction.secrets import secrets_redact
from .models import MemoryEvent, MemoryKind, MemoryRecord, MemoryStatus, SourceType
from .outbox import outbox_enqueue
from .user_lock import user_memory_lock
from .vector_store import Scope, get_vector_store

log = logging.getLogger(__name__)

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
    }


def memory_event_record(*, record: MemoryRecord, action: str, actor_type: str = MemoryEvent.Actor.SYSTEM,
                        actor_id: str = "", before: dict | None = None, after: dict | None = None,
                        note: str = "") -> MemoryEvent:
    """Append one history entry; it outlives the record (memory_uuid stays when the row is gone)."""
    return MemoryEvent.objects.create(
        tenant_id=record.tenant_id, user_id=record.user_id, memory=record, memory_uuid=record.pk, action=action,
        actor_type=actor_type, actor_id=str(actor_id or "")[:255], before=before, after=after, note=note[:255],
        created_at=clock.now())


def _initial_status(*, tenant: Tenant, source_type: str) -> str:
    if source_type == SourceType.INFERRED and tenant.review_inferred:
        return MemoryStatus.PENDING_REVIEW
    return MemoryStatus.ACTIVE


def _validated(kind: str, source_type: str, text: str) -> str:
    if kind not in MemoryKind.values:
        raise ValidationFailed(f"Unknown memory kind '{kind}'.", details={"kinds": MemoryKind.values})
    if source_type not in SourceType.values:
        raise ValidationFailed(f"Unknown source type '{source_type}'.")
    text = (text or "").strip()
    if not text:
        raise ValidationFailed("A memory needs text.")
    if len(text) > 4000:
        raise ValidationFailed("A memory's text is at most 4,000 characters.")
    return text


def _new_record(*, tenant, user, candidate: Candidate, session=None, source_message=None,
                memory_id=None, created_at: datetime | None = None) -> MemoryRecord:
    created = created_at or (source_message.created_at if source_message is not None else None) or clock.now()
    sources = [str(source_message.pk)] if source_message is not None else []
    return MemoryRecord(
        id=memory_id or uuid.uuid4(), tenant=tenant, user=user, kind=candidate.kind, text=candidate.text,
        subject=subject_normalize(candidate.subject), value=candidate.value[:2000],
        confidence=round(float(candidate.confidence), 4), importance=round(float(candidate.importance), 4),
        source_type=candidate.source_type, source_message=source_message, source_message_ids=sources,
        session=session if session is not None else getattr(source_message, "session", None),
        created_at=created, status=_initial_status(tenant=tenant, source_type=candidate.source_type),
        status_changed_at=clock.now(), expires_at=memory_expiry(tenant=tenant, kind=candidate.kind, created_at=created),
        content_hash=content_hash_for(candidate.text),
        extractor=candidate.extractor[:40], extractor_version=str(candidate.metadata.get("extractor_version", "1")),
        metadata={k: v for k, v in candidate.metadata.items() if k != "extractor_version"},
    )


def _reinforce_locked(record: MemoryRecord, *, source_message=None, actor_type: str, actor_id: str,
                      similarity: float | None) -> MemoryRecord:
    before = memory_snapshot(record)
    record.reinforcement_count += 1
    # Each confirmation closes a fifth of the remaining doubt.
    record.confidence = round(min(0.99, record.confidence + (1 - record.confidence) * 0.2), 4)
    if source_message is not None and str(source_message.pk) not in record.source_message_ids:
        record.source_message_ids = (record.source_message_ids + [str(source_message.pk)])[:MAX_SOURCE_MESSAGES]
    record.save(update_fields=["reinforcement_count", "confidence", "source_message_ids", "updated_at"])
    memory_event_record(record=record, action=MemoryEvent.Action.REINFORCED, actor_type=actor_type,
                        actor_id=actor_id, before=before, after=memory_snapshot(record),
                        note=f"similarity {similarity:.3f}" if similarity is not None else "")
    return record


def _create_locked(record: MemoryRecord, *, actor_type: str, actor_id: str, note: str = "") -> MemoryRecord:
    record.save(force_insert=True)
    memory_event_record(record=record, action=MemoryEvent.Action.CREATED, actor_type=actor_type, actor_id=actor_id,
                        after=memory_snapshot(record), note=note)
    return record


def memory_supersede(*, old: MemoryRecord, new: MemoryRecord, actor_type: str, actor_id: str = "",
                     note: str = "") -> None:
    """Mark old as superseded by new, with its history event; call inside a transaction holding the row."""
    before = memory_snapshot(old)
    old.status = MemoryStatus.SUPERSEDED
    old.superseded_by = new
    old.status_changed_at = clock.now()
    old.save(update_fields=["status", "superseded_by", "status_changed_at", "updated_at"])
    memory_event_record(record=old, action=MemoryEvent.Action.SUPERSEDED, actor_type=actor_type, actor_id=actor_id,
                        before=before, after=memory_snapshot(old), note=note or f"superseded by {new.pk}")


def decisions_apply(*, tenant: Tenant, user: EndUser, decisions, session=None, source_message=None,
                    memory_ids: list | None = None, actor_type: str = MemoryEvent.Actor.SYSTEM,
                    actor_id: str = "") -> list[tuple[MemoryRecord | None, str]]:
    """Persist verified decisions; call inside a transaction. Returns (record, outcome) per decision.

    memory_ids gives each decision's id for a new row (deterministic in extraction); an id that already
    exists means this work was done before, and the existing row is returned untouched.
    """
    from .extraction.verify import CREATE, OUTDATED, REINFORCE, SKIP, SUPERSEDE

    results: list[tuple[MemoryRecord | None, str]] = []
    changed: list[MemoryRecord] = []
    for i, decision in enumerate(decisions):
        mid = memory_ids[i] if memory_ids else None
        if decision.action == SKIP:
            results.append((None, "duplicate_in_message"))
            continue
        if mid is not None:
            existing = MemoryRecord.objects.filter(pk=mid, tenant=tenant).first()
            if existing is not None:
                results.append((existing, "exists"))
                continue
        action = decision.action
        targets = list(MemoryRecord.objects.select_for_update().filter(
            tenant=tenant, user=user, pk__in=decision.target_ids, status=MemoryStatus.ACTIVE)) \
            if decision.target_ids else []
        if action in (REINFORCE, SUPERSEDE, OUTDATED) and not targets:
            action = CREATE  # the target changed since verification: store the candidate as new
        if action == REINFORCE and source_message is not None \
                and str(source_message.pk) in targets[0].source_message_ids:
            results.append((targets[0], "exists"))  # this message already reinforced it: a rerun changes nothing
            continue
        if action == REINFORCE:
            record = _reinforce_locked(targets[0], source_message=source_message, actor_type=actor_type,
                                       actor_id=actor_id, similarity=decision.similarity)
            results.append((record, "reinforced"))
            changed.append(record)
            continue
        record = _new_record(tenant=tenant, user=user, candidate=decision.candidate, session=session,
                             source_message=source_message, memory_id=mid)
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
                  confidence: float = 0.8, importance: float = 0.5, session=None, source_message=None,
                  subject: str = "", value: str = "", actor_type: str = MemoryEvent.Actor.SYSTEM, actor_id: str = "",
                  extractor: str = "manual", created_at: datetime | None = None, memory_id=None,
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
        record = _new_record(tenant=tenant, user=user, candidate=candidate, session=session,
                             source_message=source_message, memory_id=memory_id, created_at=created_at)
        _create_locked(record, actor_type=actor_type, actor_id=actor_id)
        outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(record.pk)])
    return record


def _has_content(text: str) -> bool:
    from .extraction.classify import informative_text

    return bool(informative_text(text.replace("[redacted]", " ")).strip(" .,:;-"))


def memory_remember(*, tenant: Tenant, user: EndUser, kind: str, text: str, source_type: str = SourceType.USER_STATED,
                    confidence: float = 0.8, importance: float = 0.6, session=None, source_message=None,
                    subject: str = "", value: str = "", actor_type: str = MemoryEvent.Actor.SYSTEM,
                    actor_id: str = "") -> tuple[MemoryRecord | None, str]:
    """Store a memory unless the user already has it: a near-duplicate is reinforced, a new value for the same
    subject supersedes the old one. Returns (record, outcome): created | reinforced | superseded | secret |
    refused_instruction (the text tells the assistant what to do instead of saying something about the user;
    nothing is stored, so a fooled model cannot plant an instruction for later turns)."""
    from .extraction.verify import candidates_verify

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
                                      stated_at=source_message.created_at if source_message is not None else None)
        with transaction.atomic():
            return decisions_apply(tenant=tenant, user=user, decisions=decisions, session=session,
                                   source_message=source_message, actor_type=actor_type, actor_id=actor_id)[0]


def memory_access_record(*, tenant_id, memory_ids: list[str], at: datetime | None = None) -> int:
    """Count one access for each memory (called off the request path, from a task).

    Idempotent for a given `at`: only rows last accessed before it are counted, and they move to it, so a second
    delivery of the same access (or a late one older than a newer access) changes nothing."""
    from django.db.models import F, Q

    if not memory_ids:
        return 0
    at = at or clock.now()
    return MemoryRecord.objects.filter(tenant_id=tenant_id, pk__in=list(memory_ids)).filter(
        Q(last_accessed_at__isnull=True) | Q(last_accessed_at__lt=at)).update(
        access_count=F("access_count") + 1, last_accessed_at=at)


def memory_points_delete(*, tenant: Tenant | None, user: EndUser | None, memory_ids: list[str]) -> None:
    """Delete points of this tenant (and user); a missing tenant raises ScopeMissing, never deletes everything."""
    scope = Scope(tenant_id=str(tenant.pk) if tenant is not None else "",
                  user_id=str(user.pk) if user is not None else None)
    get_vector_store().delete(scope, [str(m) for m in memory_ids])
