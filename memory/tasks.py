"""Celery tasks of the memory app: ids in, one service call, retries here."""
from __future__ import annotations

import logging

from celery import shared_task

from .outbox import outbox_flush_task  # noqa: F401  (lives with the outbox; imported here so workers register it)

log = logging.getLogger(__name__)

EXTRACT_MAX_RETRIES = 5
TENANT_ERASE_MAX_RETRIES = 5


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


@shared_task(bind=True, acks_late=True, autoretry_for=(Exception,), retry_backoff=True, retry_backoff_max=300,
             retry_jitter=True, max_retries=TENANT_ERASE_MAX_RETRIES)
def tenant_erase_task(self, erasure_id: str) -> str:
    """Erase a tenant a bounded number of users per run, re-enqueueing itself until the tenant is gone; the
    progress is the TenantErasure row. Any run may repeat: erasing is idempotent and resumes where it stopped."""
    from .erasure import tenant_erase, tenant_erasure_failed

    try:
        erasure = tenant_erase(erasure_id=erasure_id)
    except Exception as exc:
        if self.request.retries >= TENANT_ERASE_MAX_RETRIES:
            tenant_erasure_failed(erasure_id=erasure_id, error=f"{exc.__class__.__name__}: {exc}")
        raise
    if erasure is None:
        log.info("tenant_erase_task: erasure %s is gone", erasure_id)
        return "missing"
    if erasure.state != erasure.State.DONE:
        tenant_erase_task.delay(erasure_id)
    return erasure.state
