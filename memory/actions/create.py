"""New memories: create as given, remember (a near-duplicate reinforces, a new value supersedes), and apply the
verified decisions of an extraction.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from infra import clock
from infra.embedder import get_embedder
from infra.errors import ValidationFailed
from infra.secrets import secrets_redact
from tenants.models import EndUser, Tenant

from ..extraction.candidate import Candidate, subject_normalize
from ..extraction.classify import informative_text
from ..extraction.injection import candidate_instruction_kinds
from ..extraction.verify import CREATE, OUTDATED, REINFORCE, SKIP, SUPERSEDE, candidates_verify
from ..models import MemoryEvent, MemoryRecord, MemoryStatus, SourceType
from ..outbox import outbox_enqueue
from ..sources import SourceMessage
from ..user_lock import user_memory_lock
from .records import MAX_SOURCE_MESSAGES, _new_record, _validated, memory_history_write, memory_snapshot

log = logging.getLogger(__name__)

Status = MemoryStatus
Action = MemoryEvent.Action


def _reinforce_locked(
    record: MemoryRecord,
    *,
    source: SourceMessage | None = None,
    actor_type: str,
    actor_id: str,
    similarity: float | None,
) -> MemoryRecord:
    before = memory_snapshot(record)
    record.reinforcement_count += 1
    # Each confirmation closes a fifth of the remaining doubt.
    record.confidence = round(min(0.99, record.confidence + (1 - record.confidence) * 0.2), 4)
    if source is not None and str(source.id) not in record.source_message_ids:
        record.source_message_ids = (record.source_message_ids + [str(source.id)])[:MAX_SOURCE_MESSAGES]
    record.save(update_fields=["reinforcement_count", "confidence", "source_message_ids", "updated_at"])
    memory_history_write(
        record=record,
        action=MemoryEvent.Action.REINFORCED,
        actor_type=actor_type,
        actor_id=actor_id,
        before=before,
        after=memory_snapshot(record),
        note=f"similarity {similarity:.3f}" if similarity is not None else "",
    )
    return record


def _create_locked(record: MemoryRecord, *, actor_type: str, actor_id: str, note: str = "") -> MemoryRecord:
    record.save(force_insert=True)
    memory_history_write(
        record=record,
        action=MemoryEvent.Action.CREATED,
        actor_type=actor_type,
        actor_id=actor_id,
        after=memory_snapshot(record),
        note=note,
    )
    return record


def memory_supersede(
    *, old: MemoryRecord, new: MemoryRecord, actor_type: str, actor_id: str = "", note: str = ""
) -> None:
    """Mark old as superseded by new, with its history event; call inside a transaction holding the row."""
    before = memory_snapshot(old)
    old.status = MemoryStatus.SUPERSEDED
    old.superseded_by = new
    old.status_changed_at = clock.now()
    old.save(update_fields=["status", "superseded_by", "status_changed_at", "updated_at"])
    memory_history_write(
        record=old,
        action=MemoryEvent.Action.SUPERSEDED,
        actor_type=actor_type,
        actor_id=actor_id,
        before=before,
        after=memory_snapshot(old),
        note=note or f"superseded by {new.pk}",
    )


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
) -> list[tuple[MemoryRecord | None, str]]:
    """Persist verified decisions; call inside a transaction. Returns (record, outcome) per decision.

    memory_ids gives each decision's id for a new row (deterministic in extraction); an id that already
    exists means this work was done before, and the existing row is returned untouched.
    """
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
        targets = (
            list(
                MemoryRecord.objects.for_tenant(tenant)
                .select_for_update()
                .filter(user=user, pk__in=decision.target_ids, status=MemoryStatus.ACTIVE)
            )
            if decision.target_ids
            else []
        )
        if action in (REINFORCE, SUPERSEDE, OUTDATED) and not targets:
            action = CREATE  # the target changed since verification: store the candidate as new
        if action == REINFORCE and source is not None and str(source.id) in targets[0].source_message_ids:
            results.append((targets[0], "exists"))  # this message already reinforced it: a rerun changes nothing
            continue
        if action == REINFORCE:
            record = _reinforce_locked(
                targets[0], source=source, actor_type=actor_type, actor_id=actor_id, similarity=decision.similarity
            )
            results.append((record, "reinforced"))
            changed.append(record)
            continue
        record = _new_record(
            tenant=tenant, user=user, candidate=decision.candidate, source=source, session_id=session_id, memory_id=mid
        )
        _create_locked(
            record,
            actor_type=actor_type,
            actor_id=actor_id,
            note=f"supersedes {', '.join(str(t.pk) for t in targets)}" if action == SUPERSEDE else "",
        )
        changed.append(record)
        if action == OUTDATED:
            # Said before the slot's current value: kept in the history, born superseded by what was said later.
            memory_supersede(
                old=record,
                new=targets[0],
                actor_type=actor_type,
                actor_id=actor_id,
                note=f"stated before {targets[0].pk}, which it does not replace",
            )
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


def memory_create(
    *,
    tenant: Tenant,
    user: EndUser,
    kind: str,
    text: str,
    source_type: str = SourceType.USER_STATED,
    confidence: float = 0.8,
    importance: float = 0.5,
    source: SourceMessage | None = None,
    session_id=None,
    subject: str = "",
    value: str = "",
    actor_type: str = MemoryEvent.Actor.SYSTEM,
    actor_id: str = "",
    extractor: str = "manual",
    created_at: datetime | None = None,
    memory_id=None,
    metadata: dict | None = None,
) -> MemoryRecord:
    """Store one memory as given (no duplicate check). Secrets are redacted; a text that is only a secret is
    refused."""
    text = _validated(kind, source_type, text)
    redaction = secrets_redact(text)
    if redaction.found and not _has_content(redaction.text):
        raise ValidationFailed(
            "This text is a secret (credential, token, card or account number) and is not stored.",
            code="secret_refused",
        )
    if user.tenant_id != tenant.pk:
        raise ValidationFailed("The user does not belong to this tenant.")
    candidate = Candidate(
        kind,
        redaction.text,
        source_type=source_type,
        subject=subject,
        value=value,
        confidence=confidence,
        importance=importance,
        extractor=extractor,
        metadata=dict(metadata or {}),
    )
    with transaction.atomic():
        record = _new_record(
            tenant=tenant,
            user=user,
            candidate=candidate,
            source=source,
            session_id=session_id,
            memory_id=memory_id,
            created_at=created_at,
        )
        _create_locked(record, actor_type=actor_type, actor_id=actor_id)
        outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(record.pk)])
    return record


def _has_content(text: str) -> bool:
    return bool(informative_text(text.replace("[redacted]", " ")).strip(" .,:;-"))


def memory_remember(
    *,
    tenant: Tenant,
    user: EndUser,
    kind: str,
    text: str,
    source_type: str = SourceType.USER_STATED,
    confidence: float = 0.8,
    importance: float = 0.6,
    source: SourceMessage | None = None,
    session_id=None,
    subject: str = "",
    value: str = "",
    actor_type: str = MemoryEvent.Actor.SYSTEM,
    actor_id: str = "",
) -> tuple[MemoryRecord | None, str]:
    """Store a memory unless the user already has it: a near-duplicate is reinforced, a new value for the same
    subject supersedes the old one. Returns (record, outcome): created | reinforced | superseded | secret |
    refused_instruction (the text tells the assistant what to do instead of saying something about the user;
    nothing is stored, so a fooled model cannot plant an instruction for later turns)."""
    text = _validated(kind, source_type, text)
    if user.tenant_id != tenant.pk:
        raise ValidationFailed("The user does not belong to this tenant.")
    redaction = secrets_redact(text)
    if redaction.found and not _has_content(redaction.text):
        return None, "secret"
    candidate = Candidate(
        kind,
        redaction.text,
        source_type=source_type,
        subject=subject_normalize(subject),
        value=secrets_redact(value).text,
        confidence=confidence,
        importance=importance,
        extractor="remember",
    )
    # Refused whole, not trimmed: the caller (a model) hears why and can store the plain fact on its own.
    refused = candidate_instruction_kinds(candidate, who=(user.display_name or "").strip())
    if refused:
        log.info("remember refused for user %s: %s", user.pk, ", ".join(refused))
        return None, "refused_instruction"
    vectors = get_embedder().embed([candidate.text])
    with user_memory_lock(tenant_id=tenant.pk, user_id=user.pk):
        decisions = candidates_verify(
            tenant=tenant,
            user=user,
            candidates=[candidate],
            vectors=vectors,
            stated_at=source.created_at if source is not None else None,
        )
        with transaction.atomic():
            return decisions_apply(
                tenant=tenant,
                user=user,
                decisions=decisions,
                source=source,
                session_id=session_id,
                actor_type=actor_type,
                actor_id=actor_id,
            )[0]
