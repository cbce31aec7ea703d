"""Celery tasks of the memory app: ids in, one service call, retries here and only for outages."""
from __future__ import annotations

from datetime import datetime

from celery import shared_task

from infra.task_retry import RETRY_ON, retry_outages

from .actions import memory_access_record
from .outbox import outbox_flush_task  # noqa: F401  (lives with the outbox; imported here so workers register it)


@shared_task(bind=True, acks_late=True, autoretry_for=RETRY_ON, retry_backoff=True, retry_backoff_max=120,
             retry_jitter=True, max_retries=3)
@retry_outages
def memory_access_record_task(self, tenant_id: str, memory_ids: list[str], at: str | None = None) -> int:
    """Count accesses of retrieved memories, off the request path.

    `at` (the retrieval's time, set by the enqueuer) is what makes a redelivery harmless: a memory already
    accessed at or after it is not counted again."""
    return memory_access_record(tenant_id=tenant_id, memory_ids=memory_ids,
                                at=datetime.fromisoformat(at) if at else None)
