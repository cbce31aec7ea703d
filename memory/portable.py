"""Writing memories read from a portable export (orchestration/portable.py parses the file and recreates their
source messages): each record as it was, its history verbatim, its point re-embedded by this deployment's embedder.

Ids are chosen by the caller (deterministic per tenant and exported id), so importing a file twice writes each
memory once. Texts obey what any write obeys: a secret is never stored, whatever the file says.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction

from infra import clock
from infra.errors import AppError
from tenants.models import EndUser, Tenant

from .actions import content_hash_for, memory_expiry, memory_text_clean
from .extraction.candidate import subject_normalize
from .models import MemoryEvent, MemoryKind, MemoryRecord, MemoryStatus, SourceType
from .outbox import outbox_enqueue

# Statuses an export carries over; a deleted memory is not exported (the user removed it).
IMPORTED_STATUSES = (MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED, MemoryStatus.PENDING_REVIEW, MemoryStatus.EXPIRED)


@dataclass
class ImportedMemory:
    id: uuid.UUID
    kind: str
    text: str
    status: str
    source_type: str
    created_at: datetime
    subject: str = ""
    value: str = ""
    confidence: float = 0.8
    importance: float = 0.5
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    expires_at: datetime | None = None
    session_id: uuid.UUID | None = None
    source_message_id: uuid.UUID | None = None
    source_message_ids: list[str] = field(default_factory=list)
    superseded_by: uuid.UUID | None = None
    access_count: int = 0
    last_accessed_at: datetime | None = None
    reinforcement_count: int = 0
    extractor: str = "import"
    extractor_version: str = "1"
    metadata: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)  # {"action", "actor_type", "actor_id", "before", "after", ...}


def memory_import_check(item: ImportedMemory) -> str | None:
    """Why this memory cannot be imported (None when it can): an unknown kind, status or source, or a text that is
    empty, too long or only a secret."""
    if item.kind not in MemoryKind.values:
        return f"unknown kind {item.kind!r}"
    if item.status not in IMPORTED_STATUSES:
        return f"status {item.status!r} is not imported"
    if item.source_type not in SourceType.values:
        return f"unknown source type {item.source_type!r}"
    try:
        memory_text_clean(item.text)
    except AppError as exc:
        return exc.message
    return None


def memories_import(*, tenant: Tenant, user: EndUser, items: list[ImportedMemory]) -> dict:
    """Write the memories not stored yet, with their history, and queue their points (embedded here). Call inside
    a transaction. Returns {"created", "skipped", "events"}; items must have passed memory_import_check."""
    now = clock.now()
    existing = set(MemoryRecord.objects.for_tenant(tenant).filter(pk__in=[i.id for i in items])
                   .values_list("pk", flat=True))
    new = [i for i in items if i.id not in existing]
    in_file = {i.id for i in items}
    rows = [MemoryRecord(
        id=i.id, tenant=tenant, user=user, kind=i.kind, text=memory_text_clean(i.text),
        subject=subject_normalize(i.subject)[:200], value=i.value[:2000], confidence=float(i.confidence),
        importance=float(i.importance), source_type=i.source_type, source_message_id=i.source_message_id,
        source_message_ids=list(i.source_message_ids), session_id=i.session_id, created_at=i.created_at,
        valid_from=i.valid_from or i.created_at, valid_to=i.valid_to, status=i.status, status_changed_at=now,
        # The lifetime the exporting deployment gave it; without one, counted from now, when this deployment learned
        # the memory (imported history is not expired on arrival).
        learned_at=now,
        expires_at=i.expires_at or memory_expiry(tenant=tenant, kind=i.kind, said_at=i.created_at, learned_at=now),
        last_accessed_at=i.last_accessed_at, access_count=max(0, int(i.access_count)),
        reinforcement_count=max(0, int(i.reinforcement_count)), content_hash=content_hash_for(i.text),
        extractor=(i.extractor or "import")[:40], extractor_version=str(i.extractor_version or "1")[:20],
        # What superseded it comes in the same file (foreign keys are checked at commit, so order does not matter).
        superseded_by_id=i.superseded_by if i.superseded_by in in_file else None,
        metadata=dict(i.metadata or {})) for i in new]
    with transaction.atomic():
        MemoryRecord.objects.bulk_create(rows)
        # The history as it happened, not replayed: replaying would announce years of changes to webhooks.
        events = [MemoryEvent(tenant=tenant, user=user, memory_id=i.id, memory_uuid=i.id,
                              action=e["action"],
                              actor_type=(e.get("actor_type") if e.get("actor_type") in MemoryEvent.Actor.values
                                          else MemoryEvent.Actor.SYSTEM),
                              actor_id=str(e.get("actor_id") or "")[:255], before=e.get("before"),
                              after=e.get("after"), note=str(e.get("note") or "")[:255], created_at=e["at"])
                  for i in new for e in i.history if e.get("action") in MemoryEvent.Action.values]
        events += [MemoryEvent(tenant=tenant, user=user, memory_id=i.id, memory_uuid=i.id,
                               action=MemoryEvent.Action.UPDATED, actor_type=MemoryEvent.Actor.SYSTEM,
                               actor_id="import", note="imported from a portable export", created_at=now)
                   for i in new]
        MemoryEvent.objects.bulk_create(events)
        if rows:
            outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(r.pk) for r in rows])
    return {"created": len(rows), "skipped": len(items) - len(rows), "events": len(events)}
