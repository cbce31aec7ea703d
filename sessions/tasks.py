"""Celery tasks of the sessions app: ids in, one service call, retries here."""
from __future__ import annotations

import logging

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, autoretry_for=(Exception,), retry_backoff=True, retry_backoff_max=300,
             retry_jitter=True, max_retries=5)
def bridge_write_task(self, session_id: str) -> str | None:
    """Write the closed session's bridge (exactly one, however often this runs) and finish the session."""
    from .bridge import bridge_write

    bridge = bridge_write(session_id=session_id)
    return str(bridge.pk) if bridge else None


@shared_task(bind=True, acks_late=True, autoretry_for=(Exception,), retry_backoff=True, retry_backoff_max=120,
             retry_jitter=True, max_retries=3)
def anchor_fold_task(self, session_id: str) -> int:
    """Fold a session's due turns into anchors with the LLM (queued when one is configured)."""
    from infra.redis_client import Keys, get_redis

    from .anchors import anchors_fold
    from .models import Session

    row = Session.objects.filter(pk=session_id).values("tenant_id", "user_id").first()
    if row is None:
        log.info("anchor fold for session %s skipped: the session is gone", session_id)
        return 0
    made = anchors_fold(tenant_id=row["tenant_id"], user_id=row["user_id"], session_id=session_id)
    get_redis().delete(Keys.anchor_queued_flag(row["tenant_id"], row["user_id"], session_id))
    return len(made)


@shared_task(bind=True, acks_late=True, autoretry_for=(Exception,), retry_backoff=True, retry_backoff_max=120,
             retry_jitter=True, max_retries=3)
def sessions_close_idle_task(self) -> int:
    """Close sessions idle past their tenant's timeout (bounded per run; re-enqueues itself when more remain)."""
    from .idle import sessions_close_idle

    result = sessions_close_idle()
    if result["more"]:
        sessions_close_idle_task.apply_async(countdown=1)
    return result["closed"]
