"""Celery tasks of the sessions app: ids in, one service call, retries here."""
from __future__ import annotations

import logging

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, autoretry_for=(Exception,), retry_backoff=True, retry_backoff_max=300,
             retry_jitter=True, max_retries=5)
def bridge_write_task(self, session_id: str) -> str | None:
    from .bridge import bridge_write

    bridge = bridge_write(session_id=session_id)
    return str(bridge.pk) if bridge else None
