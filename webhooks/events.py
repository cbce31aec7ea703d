"""Emitting an event: a delivery row per subscribed endpoint in the caller's transaction, sent after it commits.

This is a transactional outbox. The change and its deliveries commit together, or neither does, so a rolled-back
change sends nothing; no HTTP request is ever made inside the transaction. After commit each delivery is handed to
`webhook_deliver_task`; a delivery whose task is lost stays pending and the sweep job sends it.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from infra import clock
from infra.secrets import secrets_redact
from infra.task_queue import task_enqueue

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


@dataclass(frozen=True)
class Event:
    type: str
    data: dict
    content: dict | None = None  # text written by or about the user: only for endpoints that opted in
    occurred_at: datetime | None = None


_read_once: contextvars.ContextVar[dict | None] = contextvars.ContextVar("webhook_endpoints_read_once", default=None)


@contextlib.contextmanager
def webhook_endpoints_read_once():
    """Within the block, each tenant's endpoints are read at most once: for a service that emits event after event
    inside one transaction (extraction's decisions), where an endpoint added meanwhile would be a race anyway. A scope
    inside another shares the outer one's reads."""
    outer = _read_once.get()
    token = _read_once.set({} if outer is None else outer)
    try:
        yield
    finally:
        _read_once.reset(token)


def _endpoints(tenant_id) -> list[tuple]:
    memo = _read_once.get()
    if memo is not None and str(tenant_id) in memo:
        return memo[str(tenant_id)]
    endpoints = list(WebhookEndpoint.objects.for_tenant(tenant_id).filter(is_active=True)
                     .values_list("id", "event_types", "include_content"))
    if memo is not None:
        memo[str(tenant_id)] = endpoints
    return endpoints


def webhook_events_emit(*, tenant_id, events: list[Event]) -> list[int]:
    """Record these events for every active endpoint of the tenant subscribed to each; call inside the transaction
    that makes the changes. One read of the endpoints however many events. Returns the delivery ids."""
    unknown = [e.type for e in events if e.type not in EventType.values]
    if unknown:
        raise ValueError(f"Unknown webhook event types {unknown!r}.")
    if not events:
        return []
    endpoints = _endpoints(tenant_id)
    rows = []
    for event in events:
        listening = [(pk, content) for pk, types, content in endpoints if event.type in (types or ())]
        if not listening:
            continue
        event_id, occurred_at = uuid.uuid4(), event.occurred_at or clock.now()
        rows += [WebhookDelivery(tenant_id=tenant_id, endpoint_id=pk, event_id=event_id, event_type=event.type,
                                 body=event_body(event_id=event_id, event_type=event.type, tenant_id=tenant_id,
                                                 occurred_at=occurred_at, data=event.data, content=event.content,
                                                 include_content=include_content),
                                 created_at=occurred_at, next_attempt_at=occurred_at)
                 for pk, include_content in listening]
    if not rows:
        return []
    ids = [r.pk for r in WebhookDelivery.objects.bulk_create(rows)]
    # robust: the change has committed; a broker that is down must not fail it. The sweep sends what was not queued.
    transaction.on_commit(functools.partial(_enqueue, str(tenant_id), ids), robust=True)
    return ids


def webhook_event_emit(*, tenant_id, event_type: str, data: dict, content: dict | None = None,
                       occurred_at: datetime | None = None) -> list[int]:
    """One event; see webhook_events_emit."""
    return webhook_events_emit(tenant_id=tenant_id, events=[Event(event_type, data, content, occurred_at)])


def _enqueue(tenant_id: str, delivery_ids: list[int]) -> None:
    for delivery_id in delivery_ids:
        task_enqueue("webhooks.tasks.webhook_deliver_task", tenant_id, delivery_id)


def _naming_user(tenant_id, user_id):
    # Bodies are compact JSON (event_body), so an event about the user carries exactly this pair.
    return WebhookDelivery.objects.for_tenant(tenant_id).filter(
        state=WebhookDelivery.State.PENDING, body__contains=f'"user_id":"{user_id}"').exclude(
        event_type=EventType.USER_ERASED)


def webhook_pending_for_user_count(*, tenant_id, user_id) -> int:
    """Pending deliveries whose payload names this end user (the user.erased announcement aside)."""
    return _naming_user(tenant_id, user_id).count()


def webhook_pending_for_user_discard(*, tenant_id, user_id) -> int:
    """Drop the pending deliveries that name an end user being erased, so no queued payload carries their data out
    after the erase; the user.erased announcement is kept. Returns how many were dropped."""
    return _naming_user(tenant_id, user_id).delete()[0]
