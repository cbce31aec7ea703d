"""New memories stored as given (memory_create), and the two writes every new memory goes through: its row with
its creation event, and the supersede of the value it replaces.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from infra import clock
from infra.errors import ValidationFailed
from infra.secrets import secrets_redact
from tenants.models import EndUser, Tenant

from ..extraction.candidate import Candidate
from ..extraction.classify import informative_text
from ..models import MemoryEvent, MemoryRecord, MemoryStatus, SourceType
from ..outbox import outbox_enqueue
from ..sources import SourceMessage
from .records import _new_record, _validated, memory_change_save, memory_history_write, memory_snapshot, validity_end


@dataclass(frozen=True)
class GivenMemory:
    """A memory as a caller states it (the REST API, the remember tools, a merge of events): the arguments
    memory_create stores as given and memory_remember_statements checks against what the user already has."""

    kind: str
    text: str
    source_type: str = SourceType.USER_STATED
    confidence: float = 0.8
    source: SourceMessage | None = None
    session_id: object = None
    subject: str = ""
    value: str = ""
    actor_type: str = MemoryEvent.Actor.SYSTEM
    actor_id: str = ""


def given_redacted(*, tenant: Tenant, user: EndUser, given: GivenMemory):
    """The given text's secret redaction, once its kind and source type are valid and the user is the tenant's; its
    `only_secret` says when nothing but a secret would be left to store."""
    text = _validated(given.kind, given.source_type, given.text)
    if user.tenant_id != tenant.pk:
        raise ValidationFailed("The user does not belong to this tenant.")
    redaction = secrets_redact(text)
    return redaction, redaction.found and not _has_content(redaction.text)


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
    memory_change_save(old, before=before,
                       fields=["status", "superseded_by", "status_changed_at", "valid_to", "updated_at"],
                       action=MemoryEvent.Action.SUPERSEDED, actor_type=actor_type, actor_id=actor_id,
                       note=note or f"superseded by {new.pk}")


def memory_create(
    *,
    tenant: Tenant,
    user: EndUser,
    importance: float = 0.5,
    extractor: str = "manual",
    created_at: datetime | None = None,
    memory_id=None,
    metadata: dict | None = None,
    learned_at: datetime | None = None,
    **given,
) -> MemoryRecord:
    """Store one memory as given (GivenMemory's fields; no duplicate check). Secrets are redacted; a text that is
    only a secret is refused. created_at is when it was said (default: the source's time, else now), learned_at when
    Continuum learned it (default now)."""
    given = GivenMemory(**given)
    redaction, only_secret = given_redacted(tenant=tenant, user=user, given=given)
    if only_secret:
        raise ValidationFailed(
            "This text is a secret (credential, token, card or account number) and is not stored.",
            code="secret_refused",
        )
    candidate = Candidate(given.kind, redaction.text, source_type=given.source_type, subject=given.subject,
                          value=given.value, confidence=given.confidence, importance=importance, extractor=extractor,
                          metadata=dict(metadata or {}))
    with transaction.atomic():
        record = _new_record(tenant=tenant, user=user, candidate=candidate, source=given.source,
                             session_id=given.session_id, memory_id=memory_id, created_at=created_at,
                             learned_at=learned_at)
        _create_locked(record, actor_type=given.actor_type, actor_id=given.actor_id)
        outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(record.pk)])
    return record


def _has_content(text: str) -> bool:
    return bool(informative_text(text.replace("[redacted]", " ")).strip(" .,:;-"))
