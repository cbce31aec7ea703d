"""Running one lifecycle job for one tenant: take the tenant's lock, record a JobRun, report what was done."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from infra import clock
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
        run = JobRun.objects.create(job=job, tenant=tenant, started_at=clock.now(), status="running",
                                    stats={"cursor": cursor} if cursor else {})
        try:
            result = fn(tenant=tenant, limit=limit, cursor=cursor)
        except Exception as exc:
            JobRun.objects.for_tenant(tenant).filter(pk=run.pk).update(status="failed", finished_at=clock.now(),
                                                    stats={"error": f"{exc.__class__.__name__}: {exc}"[:500]})
            log.exception("job %s for tenant %s failed", job, tenant.pk)
            raise
        stats = {**result.stats, "more": result.more}
        JobRun.objects.for_tenant(tenant).filter(pk=run.pk).update(status="done", finished_at=clock.now(),
                                                                   stats=stats)
    log.info("job %s for tenant %s: %s", job, tenant.pk, stats)
    return {**base, "run_id": run.pk, **stats, "cursor": result.cursor}


# Rows committed a little after a pass began may carry an earlier updated_at; the next pass looks back this far.
PASS_OVERLAP = timedelta(minutes=5)


@dataclass
class UserPass:
    """A pass over a tenant's users that only visits users with memories changed since the last complete pass.

    The cursor carries the pass across its bounded runs: "<started>|<since>|<last user id>"."""

    started: datetime
    since: datetime | None
    after: str | None = None

    @classmethod
    def resume(cls, *, job: str, tenant: Tenant, cursor: str | None) -> "UserPass":
        if cursor and cursor.count("|") == 2:
            started, since, after = cursor.split("|")
            return cls(started=datetime.fromisoformat(started),
                       since=datetime.fromisoformat(since) if since else None, after=after or None)
        last = (JobRun.objects.for_tenant(tenant).filter(job=job, status="done", stats__more=False)
                .order_by("-started_at").first())
        previous = (last.stats or {}).get("pass_started") if last else None
        return cls(started=clock.now(),
                   since=datetime.fromisoformat(previous) - PASS_OVERLAP if previous else None)

    def cursor_after(self, user_id) -> str:
        return f"{self.started.isoformat()}|{self.since.isoformat() if self.since else ''}|{user_id}"

    def stats(self) -> dict:
        return {"pass_started": self.started.isoformat(),
                "changed_since": self.since.isoformat() if self.since else None}
