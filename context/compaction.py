"""Compact-buffers job: open sessions that have gone quiet get their Redis buffer compacted (older turns folded
into anchors, finished subgoals collapsed) so the next turn starts from a small buffer."""
from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings

from infra import clock
from infra.redis_client import Keys, get_redis
from memory.lifecycle.runs import JobResult
from sessions.models import Session
from tenants.models import Tenant

from .buffer import buffer_compact

log = logging.getLogger(__name__)


def buffers_compact(*, tenant: Tenant, limit: int, cursor: str | None = None) -> JobResult:
    idle_since = clock.now() - timedelta(minutes=settings.BUFFER_COMPACT_IDLE_MINUTES)
    qs = (Session.objects.for_tenant(tenant).filter(state=Session.State.OPEN, last_activity_at__lte=idle_since)
          .order_by("pk").values_list("pk", "user_id"))
    if cursor:
        qs = qs.filter(pk__gt=cursor)
    rows = list(qs[: limit + 1])
    more, rows = len(rows) > limit, rows[:limit]
    # A buffer that is gone has nothing to compact (it is rebuilt, already compact, on next access).
    pipe = get_redis().pipeline(transaction=False)
    for sid, uid in rows:
        pipe.exists(Keys.session_buffer(tenant.pk, uid, sid))
    present = pipe.execute() if rows else []
    compacted, failed, saved = 0, 0, 0
    for (sid, uid), exists in zip(rows, present):
        if not exists:
            continue
        try:
            outcome = buffer_compact(tenant_id=str(tenant.pk), user_id=str(uid), session_id=str(sid))
        except Exception:  # one broken buffer must not stop the pass; it is rebuilt from the database anyway
            failed += 1
            log.exception("compacting the buffer of session %s failed", sid)
            continue
        if outcome:
            compacted += 1
            saved += max(0, int(outcome.get("before_bytes", 0)) - int(outcome.get("after_bytes", 0)))
    return JobResult(stats={"idle_sessions": len(rows), "with_buffer": sum(1 for p in present if p),
                            "compacted": compacted, "bytes_saved": saved, "failed": failed},
                     more=more, cursor=str(rows[-1][0]) if more else None)
