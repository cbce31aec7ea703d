"""Celery tasks of the lifecycle jobs: one per job, ids in, bounded per run, re-enqueued while work remains.

Beat calls each task without arguments; that run fans out one task per active tenant. A tenant's run takes
the tenant's lock for the job, does at most MEMORY_LIFECYCLE_BATCH of work, records a JobRun and, when more
remains, enqueues itself with the cursor it stopped at. Every run returns (and logs) what it did.
"""
from __future__ import annotations

import logging

import redis
from celery import shared_task
from django.db import OperationalError

from infra.errors import ServiceUnavailable
from tenants.models import Tenant

from .compact_buffers import buffers_compact
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
    "compact_buffers": buffers_compact,
    "reconcile": vectors_reconcile,
}

# Outages worth waiting out; a bug is not retried (it would fail the same way).
RETRY_ON = (ServiceUnavailable, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OperationalError)
TASK_OPTIONS = dict(bind=True, acks_late=True, autoretry_for=RETRY_ON, retry_backoff=True, retry_backoff_max=300,
                    retry_jitter=True, max_retries=5)


def _run(task, job: str, tenant_id: str | None, cursor: str | None) -> dict:
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
    result = job_run(job=job, tenant=tenant, fn=JOBS[job], cursor=cursor)
    if result.get("more"):
        task.apply_async(kwargs={"tenant_id": tenant_id, "cursor": result.get("cursor")}, countdown=1)
    return result


@shared_task(**TASK_OPTIONS)
def memories_merge_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return _run(self, "merge", tenant_id, cursor)


@shared_task(**TASK_OPTIONS)
def memories_decay_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return _run(self, "decay", tenant_id, cursor)


@shared_task(**TASK_OPTIONS)
def memories_expire_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return _run(self, "expire", tenant_id, cursor)


@shared_task(**TASK_OPTIONS)
def memories_forget_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return _run(self, "forget", tenant_id, cursor)


@shared_task(**TASK_OPTIONS)
def memories_consolidate_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return _run(self, "consolidate", tenant_id, cursor)


@shared_task(**TASK_OPTIONS)
def buffers_compact_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return _run(self, "compact_buffers", tenant_id, cursor)


@shared_task(**TASK_OPTIONS)
def vectors_reconcile_task(self, tenant_id: str | None = None, cursor: str | None = None) -> dict:
    return _run(self, "reconcile", tenant_id, cursor)


@shared_task(**TASK_OPTIONS)
def vectors_vacuum_task(self) -> dict:
    """What was deleted (forgotten, expired, erased memories) leaves the embedded shard's segment files. One store
    for all tenants, so no fan-out; a run with nothing deleted since the last one does nothing."""
    from memory.vector_store import get_vector_store

    rewrote = bool(get_vector_store().vacuum())
    log.info("vector store vacuum: %s", "segments rewritten" if rewrote else "nothing to do")
    return {"job": "vacuum", "rewrote": rewrote}
