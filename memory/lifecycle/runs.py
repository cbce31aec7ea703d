"""Running one lifecycle job for one tenant: take the tenant's lock, record a JobRun, report what was done."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.utils import timezone

from tenants.models import Tenant

from ..models import JobRun
from .locks import job_lock

log = logging.getLogger(__name__)


@dataclass
class JobResult:
    """What one bounded pass did; `more` with a `cursor` says where the next pass starts."""

    stats: dict = field(default_factory=dict)
    more: bool = False
    cursor: str | None = None


JobFn = Callable[..., JobResult]


def job_run(*, job: str, tenant: Tenant, fn: JobFn, cursor: str | None = None, limit: int | None = None) -> dict:
    """Run fn(tenant=, limit=, cursor=) under the tenant's lock for this job. A run that finds the lock
    taken does nothing and says so; the run holding it finishes the work."""
    limit = limit or settings.MEMORY_LIFECYCLE_BATCH
    base = {"job": job, "tenant_id": str(tenant.pk)}
    with job_lock(tenant_id=tenant.pk, job=job, ttl_seconds=settings.MEMORY_LIFECYCLE_LOCK_SECONDS) as held:
        if not held:
            log.info("job %s for tenant %s skipped: another run holds the lock", job, tenant.pk)
            return {**base, "skipped": "locked", "more": False, "cursor": None}
        run = JobRun.objects.create(job=job, tenant=tenant, started_at=timezone.now(), status="running",
                                    stats={"cursor": cursor} if cursor else {})
        try:
            result = fn(tenant=tenant, limit=limit, cursor=cursor)
        except Exception as exc:
            JobRun.objects.filter(pk=run.pk).update(status="failed", finished_at=timezone.now(),
                                                    stats={"error": f"{exc.__class__.__name__}: {exc}"[:500]})
            log.exception("job %s for tenant %s failed", job, tenant.pk)
            raise
        stats = {**result.stats, "more": result.more}
        JobRun.objects.filter(pk=run.pk).update(status="done", finished_at=timezone.now(), stats=stats)
    log.info("job %s for tenant %s: %s", job, tenant.pk, stats)
    return {**base, "run_id": run.pk, **stats, "cursor": result.cursor}
