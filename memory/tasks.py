"""Celery tasks of the memory app: ids in, one service call, retries here and only for outages."""
from __future__ import annotations

from datetime import datetime

from infra.task_retry import service_task

from .actions import memory_access_record
from .outbox import outbox_flush_task  # noqa: F401  (lives with the outbox; imported here so workers register it)


@service_task(max_retries=3, backoff_max=120)
def memory_access_record_task(self, tenant_id: str, memory_ids: list[str], at: str | None = None) -> int:
    """Count accesses of retrieved memories, off the request path.

    `at` (the retrieval's time, set by the enqueuer) is what makes a redelivery harmless: a memory already
    accessed at or after it is not counted again."""
    return memory_access_record(tenant_id=tenant_id, memory_ids=memory_ids,
                                at=datetime.fromisoformat(at) if at else None)
