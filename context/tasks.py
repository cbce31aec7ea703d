"""Celery tasks of the context package: folding a session's old turns, compacting idle buffers."""
from __future__ import annotations

import logging

from infra.redis_client import Keys, get_redis
from infra.task_retry import service_task
from memory.lifecycle.tasks import run_job
from sessions.models import Session

from .anchors import anchors_fold
from .compaction import buffers_compact

log = logging.getLogger(__name__)


@service_task(max_retries=3, backoff_max=120)
def anchor_fold_task(self, tenant_id: str, session_id: str) -> int:
    """Fold a session's due turns into anchors with the LLM (queued when one is configured)."""
    row = Session.objects.for_tenant(tenant_id).filter(pk=session_id).values("tenant_id", "user_id").first()
    if row is None:
        log.info("anchor fold for session %s skipped: the session is gone", session_id)
        return 0
    made = anchors_fold(tenant_id=row["tenant_id"], user_id=row["user_id"], session_id=session_id)
    get_redis().delete(Keys.anchor_queued_flag(row["tenant_id"], row["user_id"], session_id))
    return len(made)


@service_task()
def buffers_compact_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    """The compact-buffers lifecycle job (beat fans it out per tenant, like the memory jobs)."""
    return run_job(self, "compact_buffers", buffers_compact, tenant_id, cursor)
