"""Celery tasks of webhook delivery. Ids in; the delivery row is the truth for what is due, so a task delivered
twice, late or never is harmless: the claim lets one attempt through, and the sweep picks up what was lost.

An endpoint's failures are not task failures: each is logged on the delivery, whose next attempt is scheduled with
backoff there. The tasks themselves retry only outages of the database or Redis."""
from __future__ import annotations

import logging

from django.conf import settings

from infra.task_retry import service_task

from .delivery import webhook_deliveries_due, webhook_delivery_attempt

log = logging.getLogger(__name__)


@service_task()
def webhook_deliver_task(self, tenant_id: str, delivery_id: int) -> str:
    """One attempt of one delivery, when it is due; returns the delivery's state (or "skipped")."""
    return webhook_delivery_attempt(tenant_id=tenant_id, delivery_id=delivery_id)


@service_task(max_retries=3, backoff_max=120)
def webhook_deliveries_sweep_task(self) -> int:
    """Queue the overdue pending deliveries (bounded per run); returns how many were queued."""
    due = webhook_deliveries_due(limit=settings.WEBHOOK_SWEEP_BATCH)
    for tenant_id, delivery_id in due:
        webhook_deliver_task.delay(tenant_id, delivery_id)
    if due:
        log.info("webhook sweep: queued %d overdue deliveries", len(due))
    return len(due)
