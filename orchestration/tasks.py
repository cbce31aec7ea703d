"""Celery tasks that cross the packages: a message's extraction and a closed session's finish. Ids in (the tenant
first, so every read is scoped), one service call, retries here and only for outages."""
from __future__ import annotations

import logging

from django.conf import settings

from infra.errors import AppError
from infra.task_retry import RETRY_ON, service_task
from tenants.models import Tenant
from tenants.services import tenant_erasure_failed

from .erasure import tenant_erase
from .imports import import_job_advance, import_job_failed, imports_backlog_next, imports_backlog_work
from .messages import message_extract, messages_extract
from .receipts import receipt_write, receipts_purge
from .sessions import session_finish, sessions_close_idle

log = logging.getLogger(__name__)

EXTRACT_MAX_RETRIES = 5


@service_task(max_retries=EXTRACT_MAX_RETRIES)
def message_extract_task(self, tenant_id: str, message_id: str) -> int:
    """Extract one message's memories; returns how many memories it wrote or reinforced."""
    # On the last attempt an unreachable LLM no longer blocks the message: the rules still run.
    result = message_extract(tenant_id=tenant_id, message_id=message_id,
                             allow_llm_failure=self.request.retries >= EXTRACT_MAX_RETRIES)
    if result.status == "missing":
        log.info("message_extract_task: message %s is gone", message_id)
    elif result.status == "busy":
        # Another worker holds the message; it records completion. Nothing to retry.
        log.info("message_extract_task: message %s is being extracted elsewhere", message_id)
    return len(result.memory_ids)


@service_task(max_retries=EXTRACT_MAX_RETRIES)
def messages_extract_task(self, tenant_id: str, message_ids: list[str], receipts: list[dict] | None = None) -> int:
    """Extract a turn's messages together (orchestration.messages.messages_extract); returns how many memories
    they wrote or reinforced. Retried as message_extract_task is: each message is claimed on its own, so a rerun
    only does what is left. `receipts`: the turn's context receipts, written first (a receipt's id makes a rerun
    write nothing; one that cannot be written is logged, never a reason to retry the extraction)."""
    for payload in receipts or []:
        try:
            receipt_write(payload=payload)
        except Exception:
            log.warning("context receipt %s not written", payload.get("id"), exc_info=True)
    results = messages_extract(tenant_id=tenant_id, message_ids=message_ids,
                               allow_llm_failure=self.request.retries >= EXTRACT_MAX_RETRIES)
    return sum(len(r.memory_ids) for r in results)


@service_task()
def session_finish_task(self, tenant_id: str, session_id: str) -> str | None:
    """Write the closed session's bridge (exactly one, however often this runs) and finish the session."""
    bridge = session_finish(tenant_id=tenant_id, session_id=session_id)
    return str(bridge.pk) if bridge is not None else None


@service_task(max_retries=3, backoff_max=120)
def sessions_close_idle_task(self) -> int:
    """Close sessions idle past their tenant's timeout (bounded per run; re-enqueues itself when more remain)."""
    result = sessions_close_idle()
    if result["more"]:
        sessions_close_idle_task.apply_async(countdown=1)
    return result["closed"]


TENANT_ERASE_MAX_RETRIES = 5


@service_task(max_retries=TENANT_ERASE_MAX_RETRIES)
def tenant_erase_task(self, erasure_id: str) -> str:
    """Erase a tenant a bounded number of users per run, re-enqueueing itself until the tenant is gone; the
    progress is the TenantErasure row. Any run may repeat: erasing is idempotent and resumes where it stopped."""
    try:
        erasure = tenant_erase(erasure_id=erasure_id)
    except Exception as exc:
        if self.request.retries >= TENANT_ERASE_MAX_RETRIES or not isinstance(exc, (AppError, *RETRY_ON)) \
                or (isinstance(exc, AppError) and not exc.retryable):
            tenant_erasure_failed(erasure_id=erasure_id, error=f"{exc.__class__.__name__}: {exc}")
        raise
    if erasure is None:
        log.info("tenant_erase_task: erasure %s is gone", erasure_id)
        return "missing"
    if erasure.state != erasure.State.DONE:
        tenant_erase_task.delay(erasure_id)
    return erasure.state


IMPORT_MAX_RETRIES = 5


@service_task(max_retries=IMPORT_MAX_RETRIES)
def conversations_import_task(self, tenant_id: str, job_id: str) -> str:
    """Write a bounded chunk of an import job's export, then queue the next chunk until the job is done; the
    progress is the job's cursor, so any run may repeat or resume after a crash."""
    try:
        run = import_job_advance(tenant_id=tenant_id, job_id=job_id,
                                 max_messages=settings.CONTINUUM_IMPORT_CHUNK_MESSAGES)
    except Exception as exc:
        if self.request.retries >= IMPORT_MAX_RETRIES or not isinstance(exc, (AppError, *RETRY_ON)) \
                or (isinstance(exc, AppError) and not exc.retryable):
            import_job_failed(tenant_id=tenant_id, job_id=job_id, error=f"{exc.__class__.__name__}: {exc}")
        raise
    if run.job is None:
        log.info("conversations_import_task: job %s is gone", job_id)
        return "missing"
    if run.more:
        conversations_import_task.apply_async((tenant_id, job_id),
                                              countdown=settings.CONTINUUM_IMPORT_CHUNK_PAUSE_SECONDS)
    return run.job.status


@service_task(max_retries=EXTRACT_MAX_RETRIES)
def imports_backlog_task(self, tenant_id: str, user_id: str) -> int:
    """A bounded batch of the user's import backlog (bridges, then extraction), then the next batch after a pause;
    one chain per user, so imported history never takes more than one worker slot (orchestration/imports.py)."""
    result = imports_backlog_work(tenant_id=tenant_id, user_id=user_id,
                                  limit=settings.CONTINUUM_IMPORT_BACKLOG_BATCH,
                                  allow_llm_failure=self.request.retries >= EXTRACT_MAX_RETRIES)
    imports_backlog_next(tenant_id=tenant_id, user_id=user_id, more=result.more)
    return result.bridges + result.extracted


@service_task(max_retries=3, backoff_max=120)
def context_receipt_write_task(self, payload: dict) -> str | None:
    """Write one composed context's receipt (orchestration/receipts.py); its id makes a rerun write nothing."""
    receipt = receipt_write(payload=payload)
    return str(receipt.pk) if receipt is not None else None


@service_task(max_retries=3, backoff_max=120)
def context_receipts_purge_task(self) -> int:
    """Delete receipts past each tenant's retention, bounded per tenant; runs again while any tenant has more."""
    deleted, more = 0, False
    for tenant in Tenant.objects.all():  # Tenant is not tenant-owned: the beat job's fan-out over all of them
        result = receipts_purge(tenant=tenant)
        deleted += result["deleted"]
        more = more or result["more"]
    if more:
        context_receipts_purge_task.apply_async(countdown=1)
    return deleted
