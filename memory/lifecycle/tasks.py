"""Celery tasks of the lifecycle jobs: one per job, ids in, bounded per run, re-enqueued while work remains.

Beat calls each task without arguments; that run fans out one task per active tenant. A tenant's run takes
the tenant's lock for the job, does at most MEMORY_LIFECYCLE_BATCH of work, records a JobRun and, when more
remains, enqueues itself with the cursor it stopped at. Every run returns (and logs) what it did.
"""
from __future__ import annotations

import logging

from infra.task_retry import service_task
from tenants.models import Tenant

from .consolidate import memories_consolidate
from .decay import memories_decay
from .expire import memories_expire
from .forget import memories_forget
from .merge import memories_merge
from .reconcile import vectors_reconcile
from .runs import job_run

log = logging.getLogger(__name__)

JOBS = {
    "merge": memories_merge,
    "decay": memories_decay,
    "expire": memories_expire,
    "forget": memories_forget,
    "consolidate": memories_consolidate,
    "reconcile": vectors_reconcile,
}


def run_job(task, job: str, fn, tenant_id: str | None, cursor: str | None) -> dict:
    """Beat's call (no tenant) fans out one task per active tenant; a tenant's call runs one bounded pass of `fn`
    and re-enqueues itself while work remains."""
    if tenant_id is None:
        ids = [str(pk) for pk in Tenant.objects.filter(is_active=True).order_by("pk").values_list("pk", flat=True)]
        for tid in ids:
            task.delay(tenant_id=tid)
        log.info("job %s fanned out to %d tenants", job, len(ids))
        return {"job": job, "fanned_out": len(ids)}
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        log.info("job %s: tenant %s is gone", job, tenant_id)
        return {"job": job, "tenant_id": tenant_id, "skipped": "tenant_gone"}
    result = job_run(job=job, tenant=tenant, fn=fn, cursor=cursor)
    if result.get("more"):
        task.apply_async(kwargs={"tenant_id": tenant_id, "cursor": result.get("cursor")}, countdown=1)
    return result


@service_task()
def memories_merge_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return run_job(self, "merge", JOBS["merge"], tenant_id, cursor)


@service_task()
def memories_decay_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return run_job(self, "decay", JOBS["decay"], tenant_id, cursor)


@service_task()
def memories_expire_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return run_job(self, "expire", JOBS["expire"], tenant_id, cursor)


@service_task()
def memories_forget_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return run_job(self, "forget", JOBS["forget"], tenant_id, cursor)


@service_task()
def memories_consolidate_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return run_job(self, "consolidate", JOBS["consolidate"], tenant_id, cursor)


@service_task()
def vectors_reconcile_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return run_job(self, "reconcile", JOBS["reconcile"], tenant_id, cursor)


@service_task()
def vectors_vacuum_task(self) -> dict:
    """What was deleted (forgotten, expired, erased memories) leaves the embedded shard's segment files. One store
    for all tenants, so no fan-out; a run with nothing deleted since the last one does nothing."""
    from infra.vector_store import get_vector_store

    rewrote = bool(get_vector_store().vacuum())
    log.info("vector store vacuum: %s", "segments rewritten" if rewrote else "nothing to do")
    return {"job": "vacuum", "rewrote": rewrote}
