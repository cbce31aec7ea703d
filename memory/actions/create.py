"""New memories: create as given, remember (a near-duplicate reinforces, a new value supersedes), and apply the
verified decisions of an extraction.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime

from django.db import transaction

from infra import clock
from infra.embedder import get_embedder
from infra.errors import ValidationFailed
from infra.secrets import secrets_redact
from infra.support import SUPPORTED_SHARE, support_share
from tenants.models import EndUser, Tenant

from ..extraction.candidate import Candidate, subject_normalize
from ..extraction.classify import informative_text
from ..extraction.injection import candidate_instruction_kinds
from ..extraction.rules import rules_extract
from ..extraction.statements import statement_normalize
from ..extraction.verify import CREATE, OUTDATED, REINFORCE, SKIP, SUPERSEDE, candidates_verify
from ..models import MemoryEvent, MemoryKind, MemoryRecord, MemoryStatus, SourceType
from ..outbox import outbox_enqueue
from ..sources import SourceMessage
from ..user_lock import user_memory_lock
from .corrections import corrections_apply_locked
from .records import (
    MAX_SOURCE_MESSAGES,
    _new_record,
    _validated,
    memory_history_write,
    memory_snapshot,
    validity_end,
)

log = logging.getLogger(__name__)

Status = MemoryStatus
Action = MemoryEvent.Action


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
    record.save(update_fields=["metadata", "updated_at"])
    memory_history_write(
        record=record,
        action=MemoryEvent.Action.REINFORCED,
        actor_type=actor_type,
        actor_id=actor_id,
        before=before,
        after=memory_snapshot(record),
        note=f"also extracted by {extractor}",
    )
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
    record.save(update_fields=["reinforcement_count", "confidence", "source_message_ids", "metadata", "updated_at"])
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
    old.valid_to = validity_end(old=old, new=new)
    old.save(update_fields=["status", "superseded_by", "status_changed_at", "valid_to", "updated_at"])
    memory_history_write(
        record=old,
        action=MemoryEvent.Action.SUPERSEDED,
        actor_type=actor_type,
        actor_id=actor_id,
        before=before,
        after=memory_snapshot(old),
        note=note or f"superseded by {new.pk}",
    )


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
) -> list[tuple[MemoryRecord | None, str]]:
    """Persist verified decisions; call inside a transaction. Returns (record, outcome) per decision.

    memory_ids gives each decision's id for a new row (deterministic in extraction); an id that already
    exists means this work was done before, and the existing row is returned untouched.
    """
    results: list[tuple[MemoryRecord | None, str]] = []
    changed: list[MemoryRecord] = []
    corrections: list[tuple] = []  # (the row with the current value, rows with old values, source, session)
    # The rows a previous run of this work already wrote, read at once (one statement, not one per decision).
    done_before = (
        {
            str(r.pk): r
            for r in MemoryRecord.objects.for_tenant(tenant).filter(pk__in=[m for m in memory_ids if m is not None])
        }
        if memory_ids
        else {}
    )
    for i, decision in enumerate(decisions):
        mid = memory_ids[i] if memory_ids else None
        if decision.action == SKIP:
            results.append((None, "duplicate_in_message"))
            continue
        if mid is not None:
            existing = done_before.get(str(mid))
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
            extractor = decision.candidate.extractor
            if extractor in _extracted_by(targets[0]):
                results.append((targets[0], "exists"))  # this message already reinforced it: a rerun changes nothing
            else:
                _also_from_locked(targets[0], extractor=extractor, actor_type=actor_type, actor_id=actor_id)
                results.append((targets[0], "reinforced"))
                changed.append(targets[0])
            continue
        if action == REINFORCE:
            record = _reinforce_locked(
                targets[0],
                source=source,
                actor_type=actor_type,
                actor_id=actor_id,
                similarity=decision.similarity,
                extractor=decision.candidate.extractor,
            )
            results.append((record, "reinforced"))
            changed.append(record)
            continue
        record = _new_record(
            tenant=tenant, user=user, candidate=decision.candidate, source=source, session_id=session_id, memory_id=mid
        )
        if action == SUPERSEDE and _held_for_review(tenant, record):
            # A doubtful correction waits for a reviewer; the value in use stays until it is approved.
            record.status = MemoryStatus.PENDING_REVIEW
            record.metadata = {**record.metadata, "supersedes": [str(t.pk) for t in targets]}
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
            # The newer value corrects what this message says with the old one (its goal is written after this).
            corrections.append((targets[0], [record], None, targets[0].session_id))
            results.append((record, "outdated"))
            continue
        # A memory held for review does not displace an active one until it is approved.
        if action == SUPERSEDE and record.status == MemoryStatus.ACTIVE:
            for old in targets:
                memory_supersede(old=old, new=record, actor_type=actor_type, actor_id=actor_id)
                changed.append(old)
            corrections.append((record, targets, source, session_id))
            results.append((record, "superseded"))
        elif action == SUPERSEDE:
            results.append((record, "held_for_review"))
        else:
            results.append((record, "created"))
    # After every decision: a statement of this same message that says an old value is written by then.
    for current, olds, by_source, by_session in corrections:
        changed += corrections_apply_locked(
            tenant=tenant,
            user=user,
            record=current,
            targets=olds,
            source=by_source,
            session_id=by_session,
            actor_type=actor_type,
            actor_id=actor_id,
            create=_create_locked,
            supersede=memory_supersede,
        )
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
    learned_at: datetime | None = None,
) -> MemoryRecord:
    """Store one memory as given (no duplicate check). Secrets are redacted; a text that is only a secret is
    refused. created_at is when it was said (default: the source's time, else now), learned_at when Continuum
    learned it (default now)."""
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
            learned_at=learned_at,
        )
        _create_locked(record, actor_type=actor_type, actor_id=actor_id)
        outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(record.pk)])
    return record


def _has_content(text: str) -> bool:
    return bool(informative_text(text.replace("[redacted]", " ")).strip(" .,:;-"))


INCOMPLETE = "incomplete"
# What a caller hears when a memory is refused for lacking a subject or a predicate.
INCOMPLETE_REASON = (
    "a memory is one statement about the user, with the user as its subject and a verb "
    "('Dana prefers aisle seats'); a fragment such as 'aisle seats' says nothing on its own"
)


def _statements(text: str, *, kind: str, who: str, subject: str, value: str) -> list[tuple[str, str, str, str]]:
    """(kind, text, subject, value) of each statement the text makes. First-person text goes through the rules
    extraction runs on messages, so "I prefer aisle seats, and never United" becomes the statements extraction
    itself makes of those words (and lands on the same memories); otherwise the text is one statement, in the
    third person, or none when it has no subject or predicate."""
    if re.search(r"\b(?:I|my|me|I'm|I've)\b", text):
        found = [c for c in rules_extract(text, who=who) if c.kind != MemoryKind.GOAL or kind == MemoryKind.GOAL]
        # The rules' statements stand for the text when they say most of it; otherwise part would be lost.
        if found and support_share(text, [c.text for c in found], ignore=tuple(who.split())) >= SUPPORTED_SHARE:
            return [(c.kind, c.text, c.subject, c.value) for c in found]
    normalized = statement_normalize(text, who=who)
    return [(kind, normalized, subject, value)] if normalized else []


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
    subject supersedes the old one. Returns (record, outcome) of its first statement: created | reinforced |
    superseded | secret | refused_instruction (the text tells the assistant what to do instead of saying something
    about the user; nothing is stored, so a fooled model cannot plant an instruction for later turns) |
    incomplete (no subject or predicate). memory_remember_statements returns every statement's."""
    return memory_remember_statements(
        tenant=tenant,
        user=user,
        kind=kind,
        text=text,
        source_type=source_type,
        confidence=confidence,
        importance=importance,
        source=source,
        session_id=session_id,
        subject=subject,
        value=value,
        actor_type=actor_type,
        actor_id=actor_id,
    )[0]


def memory_remember_statements(
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
) -> list[tuple[MemoryRecord | None, str]]:
    """memory_remember for every statement the text makes, in the third person: one (record, outcome) each, or one
    (None, reason) when nothing is stored."""
    text = _validated(kind, source_type, text)
    if user.tenant_id != tenant.pk:
        raise ValidationFailed("The user does not belong to this tenant.")
    redaction = secrets_redact(text)
    if redaction.found and not _has_content(redaction.text):
        return [(None, "secret")]
    name = (user.display_name or "").strip()
    if candidate_instruction_kinds(Candidate(kind, redaction.text, subject=subject, value=value), who=name):
        log.info("remember refused for user %s: an instruction", user.pk)
        return [(None, "refused_instruction")]
    who = name or "The user"
    candidates = []
    for s_kind, s_text, s_subject, s_value in _statements(
        redaction.text, kind=kind, who=who, subject=subject_normalize(subject), value=secrets_redact(value).text
    ):
        candidates.append(
            Candidate(
                s_kind,
                s_text,
                source_type=source_type,
                subject=subject_normalize(s_subject),
                value=s_value,
                confidence=confidence,
                importance=importance,
                extractor="remember",
            )
        )
    if not candidates:
        return [(None, INCOMPLETE)]
    # Refused whole, not trimmed: the caller (a model) hears why and can store the plain fact on its own.
    refused = sorted({k for c in candidates for k in candidate_instruction_kinds(c, who=name)})
    if refused:
        log.info("remember refused for user %s: %s", user.pk, ", ".join(refused))
        return [(None, "refused_instruction")]
    vectors = get_embedder().embed([c.text for c in candidates])
    with user_memory_lock(tenant_id=tenant.pk, user_id=user.pk):
        decisions = candidates_verify(
            tenant=tenant,
            user=user,
            candidates=candidates,
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
            )
