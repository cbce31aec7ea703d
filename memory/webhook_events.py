"""What a memory change tells a tenant's webhooks: the history action mapped to an event type, and the payload.

The payload carries ids and provenance; the memory's text (with subject and value) only reaches endpoints that
opted into content. Decay is not announced: it recomputes importance on every run and changes nothing a platform
acts on. Expiry, rejection and the forget job's hard delete are `memory.deleted`, with the action saying which.
"""
from __future__ import annotations

from datetime import datetime

from webhooks.events import Event, webhook_endpoints_read_once, webhook_events_emit

from .models import MemoryEvent, MemoryRecord

Action = MemoryEvent.Action

# Re-exported for memory's services that write many changes in one transaction.
memory_webhooks_read_once = webhook_endpoints_read_once

EVENT_TYPE_OF = {
    Action.CREATED: "memory.created",
    Action.REINFORCED: "memory.updated",
    Action.UPDATED: "memory.updated",
    Action.APPROVED: "memory.updated",
    Action.RESTORED: "memory.updated",
    Action.SUPERSEDED: "memory.superseded",
    Action.DELETED: "memory.deleted",
    Action.REJECTED: "memory.deleted",
    Action.EXPIRED: "memory.deleted",
    Action.FORGOTTEN: "memory.deleted",
}


def _event(record: MemoryRecord, action: str, actor_type: str, at: datetime) -> Event | None:
    event_type = EVENT_TYPE_OF.get(action)
    if event_type is None:
        return None
    data = {
        "memory_id": record.pk, "user_id": record.user_id, "action": action, "actor_type": actor_type,
        "kind": record.kind, "status": record.status, "source_type": record.source_type,
        "session_id": record.session_id, "source_message_id": record.source_message_id,
        "source_message_ids": list(record.source_message_ids or []), "confidence": record.confidence,
        "importance": record.importance, "reinforcement_count": record.reinforcement_count,
        "superseded_by": record.superseded_by_id, "created_at": record.created_at, "expires_at": record.expires_at,
        "changed_at": at,
    }
    return Event(event_type, data, {"text": record.text, "subject": record.subject, "value": record.value}, at)


def memory_webhook_emit(*, record: MemoryRecord, action: str, actor_type: str, at: datetime) -> None:
    """Announce one change of `record`; call in the transaction that made it."""
    memory_webhooks_emit(records=[record], action=action, actor_type=actor_type, at=at)


def memory_webhooks_emit(*, records: list[MemoryRecord], action: str, actor_type: str, at: datetime) -> None:
    """Announce the same change of many records of one tenant (a batch) with one read of its endpoints."""
    events = [e for e in (_event(r, action, actor_type, at) for r in records) if e is not None]
    if events:
        webhook_events_emit(tenant_id=records[0].tenant_id, events=events)
