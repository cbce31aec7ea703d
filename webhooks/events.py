"""Emitting an event: a delivery row per subscribed endpoint in the caller's transaction, sent after it commits.

This is a transactional outbox. The change and its deliveries commit together, or neither does, so a rolled-back
change sends nothing; no HTTP request is ever made inside the transaction. After commit each delivery is handed to
`webhook_deliver_task`; a delivery whose task is lost stays pending and the sweep job sends it.
"""
from __future__ import annotations

import functools
import json
import logging
import uuid
from datetime import datetime

from django.db import transaction

from infra import clock
from infra.secrets import secrets_redact

from .models import EventType, WebhookDelivery, WebhookEndpoint

log = logging.getLogger(__name__)


def _iso(value) -> str | None:
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z") if isinstance(value, datetime) else str(value)


def _clean(value):
    """JSON-ready: datetimes as ISO 8601, UUIDs as text."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _redacted(value):
    """Content an endpoint opted into still never carries a secret."""
    if isinstance(value, str):
        return secrets_redact(value).text
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def event_body(*, event_id: uuid.UUID, event_type: str, tenant_id, occurred_at: datetime, data: dict,
               content: dict | None, include_content: bool) -> str:
    """The JSON an endpoint receives: {"id", "type", "timestamp", "tenant_id", "data"}. `content` (text written by
    or about the user) joins `data` only for an endpoint that opted in, with secrets cut out."""
    payload_data = dict(_clean(data))
    if include_content and content:
        payload_data.update(_redacted(_clean(content)))
    payload = {"id": str(event_id), "type": event_type, "timestamp": _iso(occurred_at), "tenant_id": str(tenant_id),
               "data": payload_data}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def webhook_event_emit(*, tenant_id, event_type: str, data: dict, content: dict | None = None,
                       occurred_at: datetime | None = None) -> list[int]:
    """Record one event for every active endpoint of the tenant subscribed to it; call inside the transaction
    that makes the change. Returns the delivery ids (none when no endpoint listens)."""
    if event_type not in EventType.values:
        raise ValueError(f"Unknown webhook event type {event_type!r}.")
    endpoints = [e for e in WebhookEndpoint.objects.for_tenant(tenant_id).filter(is_active=True)
                 .only("id", "event_types", "include_content") if event_type in (e.event_types or ())]
    if not endpoints:
        return []
    event_id, occurred_at = uuid.uuid4(), occurred_at or clock.now()
    rows = WebhookDelivery.objects.bulk_create([
        WebhookDelivery(tenant_id=tenant_id, endpoint_id=e.pk, event_id=event_id, event_type=event_type,
                        body=event_body(event_id=event_id, event_type=event_type, tenant_id=tenant_id,
                                        occurred_at=occurred_at, data=data, content=content,
                                        include_content=e.include_content),
                        created_at=occurred_at, next_attempt_at=occurred_at)
        for e in endpoints])
    ids = [r.pk for r in rows]
    # robust: the change has committed; a broker that is down must not fail it. The sweep sends what was not queued.
    transaction.on_commit(functools.partial(_enqueue, str(tenant_id), ids), robust=True)
    return ids


def _enqueue(tenant_id: str, delivery_ids: list[int]) -> None:
    from .tasks import webhook_deliver_task

    for delivery_id in delivery_ids:
        webhook_deliver_task.delay(tenant_id, delivery_id)
