"""Writing memories read from a portable export (memory.portable says what one carries): each record as it was, its
history verbatim, its point re-embedded by this deployment's embedder.

Ids are chosen by the caller (deterministic per tenant and exported id), so importing a file twice writes each
memory once. Texts obey what any write obeys: a secret is never stored, whatever the file says.
"""
from __future__ import annotations

from django.db import transaction

from infra import clock
from tenants.models import EndUser, Tenant

from ..extraction.candidate import subject_normalize
from ..models import MemoryEvent, MemoryRecord
from ..outbox import outbox_enqueue
from .records import content_hash_for, memory_expiry, memory_text_clean


def memories_import(*, tenant: Tenant, user: EndUser, items: list) -> dict:
    """Write the memories not stored yet, with their history, and queue their points (embedded here). Call inside
    a transaction. items: memory.portable.ImportedMemory, each passed memory_import_check. Returns {"created",
    "skipped", "events"}."""
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
