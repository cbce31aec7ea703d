"""Celery tasks of the memory app: ids in, one service call, retries here."""
from __future__ import annotations

import logging

from celery import shared_task

from .outbox import outbox_flush_task  # noqa: F401  (lives with the outbox; imported here so workers register it)

log = logging.getLogger(__name__)

EXTRACT_MAX_RETRIES = 5


@shared_task(bind=True, acks_late=True, autoretry_for=(Exception,), retry_backoff=True, retry_backoff_max=300,
             retry_jitter=True, max_retries=EXTRACT_MAX_RETRIES)
def memory_extract_task(self, message_id: str) -> int:
    """Extract one message's memories; returns how many memories it wrote or reinforced."""
    from .extraction.pipeline import memory_extract

    # On the last attempt an unreachable LLM no longer blocks the message: the rules still run.
    result = memory_extract(message_id=message_id, allow_llm_failure=self.request.retries >= EXTRACT_MAX_RETRIES)
    if result.status == "missing":
        log.info("memory_extract_task: message %s is gone", message_id)
    elif result.status == "busy":
        # Another worker holds the message; it records completion. Nothing to retry.
        log.info("memory_extract_task: message %s is being extracted elsewhere", message_id)
    return len(result.memory_ids)


@shared_task(bind=True, acks_late=True, autoretry_for=(Exception,), retry_backoff=True, retry_backoff_max=120,
             retry_jitter=True, max_retries=3)
def memory_access_record_task(self, tenant_id: str, memory_ids: list[str], at: str | None = None) -> int:
    """Count accesses of retrieved memories, off the request path.

    `at` (the retrieval's time, set by the enqueuer) is what makes a redelivery harmless: a memory already
    accessed at or after it is not counted again. Without it the time is taken now, as older callers did."""
    from datetime import datetime

    from .services import memory_access_record

    return memory_access_record(tenant_id=tenant_id, memory_ids=memory_ids,
                                at=datetime.fromisoformat(at) if at else None)
