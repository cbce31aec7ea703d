"""Celery tasks of the memory app: ids in, one service call, retries here."""
from __future__ import annotations

import logging

from celery import shared_task

from .outbox import outbox_flush_task  # noqa: F401  (lives with the outbox; imported here so workers register it)

log = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, autoretry_for=(Exception,), retry_backoff=True, retry_backoff_max=300,
             retry_jitter=True, max_retries=5)
def memory_extract_task(self, message_id: str) -> int:
    """Placeholder until extraction lands."""
    return 0
