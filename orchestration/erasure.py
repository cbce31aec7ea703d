"""Erasing an end user: database rows, vector points and Redis keys, idempotently.

Order matters. Qdrant and Redis go first, so a store that is down fails the erase before the user's rows are gone
and the caller can simply retry. Then the database rows (the truth) in one transaction, pending outbox writes
included, so no flush can bring a point back. Then Qdrant and Redis once more, for a point an in-flight flush or a
key an in-flight request wrote in between; a failure there is logged and the reconcile job removes the orphan
point. Running it again on an erased user finds nothing and changes nothing.

The erase returns, and logs, its receipt: per store what it removed (database rows by table, vector points, Redis
keys, pending outbox writes, queued webhook payloads naming the user), then a re-check of every store that counts
what is left of the user; `complete` says the re-check found nothing.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

from django.conf import settings
from django.db import transaction

from infra import clock
from infra.errors import ServiceUnavailable
from infra.redis_client import Keys, get_redis
from infra.task_queue import task_enqueue_on_commit
from infra.vector_store import Scope, get_vector_store
from memory.actions import memories_erase_user
from memory.models import MemoryEvent, MemoryRecord, VectorOutbox
from memory.outbox import outbox_discard_tenant
from sessions.models import Message, Session
from tenants.models import EndUser, Tenant, TenantErasure
from tenants.services import (
    end_user_row_delete,
    tenant_deactivate,
    tenant_erasure_done,
    tenant_erasure_record,
    tenant_erasure_running,
    tenant_erasure_user_done,
    tenant_row_delete,
)
from webhooks.events import webhook_event_emit, webhook_pending_for_user_count, webhook_pending_for_user_discard

from .models import ContextReceipt

log = logging.getLogger(__name__)


@dataclass
class ErasureReport:
    user_id: str
    memories: int = 0
    events: int = 0
    sessions: int = 0
    redis_keys: int = 0
    vector_scope_deleted: bool = False
    # The receipt: {"database": {table: rows}, "vector_points": n, "redis_keys": n, "outbox_pending": n,
    # "webhook_payloads": n} as removed, and the same stores as counted again afterwards.
    removed: dict = field(default_factory=dict)
    remaining: dict = field(default_factory=dict)
    complete: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def _vector_scope(tenant_id, user_id):
    return Scope(tenant_id=str(tenant_id), user_id=str(user_id))


def _vectors_delete(tenant_id, user_id) -> None:
    try:
        get_vector_store().delete_scope(_vector_scope(tenant_id, user_id))
    except ServiceUnavailable:
        raise
    except Exception as exc:  # the store's own errors: the erase is incomplete and must be retried
        raise ServiceUnavailable("The vector store is unavailable; the erase was not started. Retry shortly.",
                                 code="vector_store_unavailable") from exc


def _user_redis_keys(tenant_id, user_id, session_ids: list[str], message_ids: list[str]) -> list[str]:
    """Every key this user can own, by name: each is built by Keys from the user's id and ids the database holds
    (sessions; messages not yet extracted, the only ones an extraction lock can be held for). Naming them costs one
    DEL per 500 keys, where a SCAN walks the whole keyspace whatever its MATCH says."""
    keys = [Keys.memory_writes_lock(tenant_id, user_id), Keys.import_backlog_flag(tenant_id, user_id)]
    for sid in session_ids:
        keys += [Keys.session_buffer(tenant_id, user_id, sid), Keys.anchor_fold_lock(tenant_id, user_id, sid),
                 Keys.anchor_queued_flag(tenant_id, user_id, sid)]
    keys += [Keys.extract_lock(tenant_id, user_id, mid) for mid in message_ids]
    return keys


def _redis_delete(tenant_id, user_id, session_ids: list[str], message_ids: list[str]) -> int:
    r = get_redis()
    keys = _user_redis_keys(tenant_id, user_id, session_ids, message_ids)
    removed = 0
    for i in range(0, len(keys), 500):
        removed += r.delete(*keys[i:i + 500])
    return removed


def _unextracted_message_ids(tenant, user_id) -> list[str]:
    return [str(m) for m in Message.objects.for_tenant(tenant).filter(session__user_id=user_id,
                                                                      extracted_at__isnull=True)
            .values_list("pk", flat=True)]


def _points_count(tenant_id, user_id) -> int | None:
    """The user's vector points, None when the store cannot say (the erase itself then decides what happens)."""
    try:
        return get_vector_store().count(_vector_scope(tenant_id, user_id))
    except Exception as exc:
        log.warning("counting the points of user %s failed: %s", user_id, exc)
        return None


def _leftovers(*, tenant, user_id: str, memory_ids: list, keys: list[str]) -> dict:
    """Everything of the user any store still holds, counted: the erasure's re-check."""
    database = {
        "tenants.EndUser": EndUser.objects.for_tenant(tenant).filter(pk=user_id).count(),
        "chat_sessions.Session": Session.objects.for_tenant(tenant).filter(user_id=user_id).count(),
        "chat_sessions.Message": Message.objects.for_tenant(tenant).filter(session__user_id=user_id).count(),
        "memory.MemoryRecord": MemoryRecord.objects.for_tenant(tenant).filter(user_id=user_id).count(),
        "memory.MemoryEvent": (MemoryEvent.objects.for_tenant(tenant).filter(user_id=user_id).count()
                               + MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid__in=memory_ids).count()),
        "orchestration.ContextReceipt": ContextReceipt.objects.for_tenant(tenant).filter(user_id=user_id).count(),
    }
    r = get_redis()
    return {
        "database": {table: n for table, n in database.items() if n},
        "vector_points": _points_count(tenant.pk, user_id),
        "redis_keys": sum(r.exists(*keys[i:i + 500]) for i in range(0, len(keys), 500)),
        "outbox_pending": VectorOutbox.objects.for_tenant(tenant.pk).filter(memory_uuid__in=memory_ids,
                                                                            done_at__isnull=True).count(),
        "webhook_payloads": webhook_pending_for_user_count(tenant_id=tenant.pk, user_id=user_id),
    }


def _nothing_left(remaining: dict) -> bool:
    return (not remaining["database"] and remaining["vector_points"] == 0 and not remaining["redis_keys"]
            and not remaining["outbox_pending"] and not remaining["webhook_payloads"])


def user_erase(*, tenant: Tenant, user: EndUser | None = None, user_id=None) -> ErasureReport:
    """Remove everything stored about one end user of this tenant, in every store; returns the erasure's receipt
    (what each store gave up, and a re-check of what is left)."""
    uid = str(user.pk if user is not None else user_id)
    report = ErasureReport(user_id=uid)
    session_ids = [str(s) for s in Session.objects.for_tenant(tenant).filter(user_id=uid).values_list("pk", flat=True)]
    message_ids = _unextracted_message_ids(tenant, uid)
    memory_ids = list(MemoryRecord.objects.for_tenant(tenant).filter(user_id=uid).values_list("pk", flat=True))
    points = _points_count(tenant.pk, uid)
    _vectors_delete(tenant.pk, uid)
    report.redis_keys = _redis_delete(tenant.pk, uid, session_ids, message_ids)
    tables: dict[str, int] = {}
    with transaction.atomic():
        owner = EndUser.objects.for_tenant(tenant).select_for_update().filter(pk=uid).first()
        erased = memories_erase_user(tenant=tenant, user_id=uid)
        report.memories, report.events = erased["memories"], erased["events"]
        report.sessions = len(session_ids)
        tables.update({"memory.MemoryRecord": erased["memories"], "memory.MemoryEvent": erased["events"],
                       "memory.VectorOutbox": erased["outbox_rows"]})
        webhooks = webhook_pending_for_user_discard(tenant_id=tenant.pk, user_id=uid)
        tables["webhooks.WebhookDelivery"] = webhooks
        if owner is not None:
            for table, n in end_user_row_delete(user=owner).items():
                tables[table] = tables.get(table, 0) + n
            # The tenant's own id for the user (often an email) goes only to endpoints that opted in to content.
            webhook_event_emit(tenant_id=tenant.pk, event_type="user.erased", data={
                "user_id": uid, "erased_at": clock.now(), "memories": report.memories, "sessions": report.sessions},
                content={"external_id": owner.external_id})
    try:
        _vectors_delete(tenant.pk, uid)
        report.vector_scope_deleted = True
        report.redis_keys += _redis_delete(tenant.pk, uid, session_ids, message_ids)
    except Exception:
        log.exception("erase of user %s: the second sweep failed; reconcile will remove what is left", uid)
    report.removed = {"database": {t: n for t, n in sorted(tables.items()) if n}, "vector_points": points,
                      "redis_keys": report.redis_keys, "outbox_pending": erased["outbox_pending"],
                      "webhook_payloads": webhooks}
    report.remaining = _leftovers(tenant=tenant, user_id=uid, memory_ids=memory_ids,
                                  keys=_user_redis_keys(tenant.pk, uid, session_ids, message_ids))
    report.complete = _nothing_left(report.remaining)
    if report.complete:
        log.info("erased user %s of tenant %s: %s", uid, tenant.pk, report.as_dict())
    else:
        log.warning("erased user %s of tenant %s, but the re-check found data left: %s", uid, tenant.pk,
                    report.as_dict())
    return report


def tenant_erasure_start(*, tenant: Tenant, requested_by: str = "") -> TenantErasure:
    """Record that the tenant is to be erased and hand the work to tenant_erase_task (after commit). The tenant is
    deactivated at once, so its keys stop working while the erasure runs. Asking again while one is pending returns
    that one."""
    with transaction.atomic():
        tenant_deactivate(tenant=tenant)
        erasure, created = tenant_erasure_record(tenant=tenant, requested_by=requested_by)
        if not created:
            return erasure
        task_enqueue_on_commit("orchestration.tasks.tenant_erase_task", str(erasure.pk))
    return erasure


def tenant_erase(*, erasure_id, max_users: int | None = None) -> TenantErasure:
    """One bounded run of a tenant's erasure: up to max_users end users through user_erase, then, once none is
    left, the tenant's remaining points and Redis keys and the tenant row (keys, runs and history cascade).

    Returns the erasure: DONE when the tenant is gone, RUNNING when users remain (the task runs again). Each user's
    erase is idempotent and an erased user is gone from the query, so a rerun, or a run after a crash, resumes.
    """
    limit = max_users or settings.TENANT_ERASE_USERS_PER_RUN
    erasure = TenantErasure.objects.filter(pk=erasure_id).first()
    if erasure is None or erasure.state == TenantErasure.State.DONE:
        return erasure
    tenant_erasure_running(erasure_id=erasure.pk)
    tenant = Tenant.objects.filter(pk=erasure.tenant_id_value).first()
    if tenant is not None:
        for user in EndUser.objects.for_tenant(tenant).order_by("pk")[:limit]:
            user_erase(tenant=tenant, user=user)
            tenant_erasure_user_done(erasure_id=erasure.pk)
        if EndUser.objects.for_tenant(tenant).exists():
            erasure.refresh_from_db()
            return erasure
        get_vector_store().delete_scope(Scope(tenant_id=str(tenant.pk)))
        # The tenant's own keys (quotas, job locks) and any user key left by an in-flight request: the tenant is
        # going, so walking its prefix once here is the price of leaving nothing behind.
        r = get_redis()
        keys = list(r.scan_iter(match=Keys.tenant_pattern(tenant.pk), count=1000))
        for i in range(0, len(keys), 500):
            r.delete(*keys[i:i + 500])
        outbox_discard_tenant(tenant_id=tenant.pk)
        tenant_row_delete(tenant_id=tenant.pk)
    tenant_erasure_done(erasure_id=erasure.pk)
    erasure.refresh_from_db()
    log.info("erased tenant %s (%s): %d users", erasure.tenant_id_value, erasure.slug, erasure.users_done)
    return erasure


