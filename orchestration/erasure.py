"""Erasing an end user: database rows, vector points and Redis keys, idempotently.

Order matters. Qdrant and Redis go first, so a store that is down fails the erase before the user's rows are gone
and the caller can simply retry. Then the database rows (the truth) in one transaction, pending outbox writes
included, so no flush can bring a point back. Then Qdrant and Redis once more, for a point an in-flight flush or a
key an in-flight request wrote in between; a failure there is logged and the reconcile job removes the orphan
point. Running it again on an erased user finds nothing and changes nothing.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from django.db import transaction

from infra.errors import ServiceUnavailable
from infra.redis_client import Keys, get_redis
from infra.vector_store import Scope, get_vector_store
from memory.actions import memories_erase_user
from memory.models import VectorOutbox
from sessions.models import Session
from tenants.models import EndUser, Tenant

log = logging.getLogger(__name__)


@dataclass
class ErasureReport:
    user_id: str
    memories: int = 0
    events: int = 0
    sessions: int = 0
    redis_keys: int = 0
    vector_scope_deleted: bool = False

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


def _redis_delete(tenant_id, user_id, session_ids: list[str]) -> int:
    r = get_redis()
    keys = set(r.scan_iter(match=Keys.user_pattern(tenant_id, user_id), count=500))
    keys.update(Keys.session_buffer(tenant_id, user_id, sid).encode() for sid in session_ids)
    # Tenant-level keys that name the user or one of their sessions (per-session locks and flags).
    needles = [str(user_id).encode(), *(str(sid).encode() for sid in session_ids)]
    keys.update(k for k in r.scan_iter(match=Keys.tenant_pattern(tenant_id), count=1000)
                if any(n in k for n in needles))
    keys = list(keys)
    removed = 0
    for i in range(0, len(keys), 500):
        removed += r.delete(*keys[i:i + 500])
    return removed


def user_erase(*, tenant: Tenant, user: EndUser | None = None, user_id=None) -> ErasureReport:
    """Remove everything stored about one end user of this tenant, in every store."""
    uid = str(user.pk if user is not None else user_id)
    report = ErasureReport(user_id=uid)
    session_ids = [str(s) for s in Session.objects.for_tenant(tenant).filter(user_id=uid).values_list("pk", flat=True)]
    _vectors_delete(tenant.pk, uid)
    report.redis_keys = _redis_delete(tenant.pk, uid, session_ids)
    with transaction.atomic():
        owner = EndUser.objects.for_tenant(tenant).select_for_update().filter(pk=uid).first()
        erased = memories_erase_user(tenant=tenant, user_id=uid)
        report.memories, report.events = erased["memories"], erased["events"]
        report.sessions = len(session_ids)
        if owner is not None:
            owner.delete()  # cascades: sessions, messages, anchors, bridges, links, memories
    try:
        _vectors_delete(tenant.pk, uid)
        report.vector_scope_deleted = True
        report.redis_keys += _redis_delete(tenant.pk, uid, session_ids)
    except Exception:
        log.exception("erase of user %s: the second sweep failed; reconcile will remove what is left", uid)
    log.info("erased user %s of tenant %s: %s", uid, tenant.pk, report.as_dict())
    return report


def tenant_erase(*, tenant: Tenant) -> dict:
    """Remove a tenant and everything it stored: each user through user_erase, then the tenant's remaining
    points and Redis keys, then the tenant row (keys, runs and history cascade)."""
    users = 0
    for user in EndUser.objects.for_tenant(tenant).iterator(chunk_size=200):
        user_erase(tenant=tenant, user=user)
        users += 1
    get_vector_store().delete_scope(Scope(tenant_id=str(tenant.pk)))
    r = get_redis()
    keys = list(r.scan_iter(match=Keys.tenant_pattern(tenant.pk), count=500))
    for i in range(0, len(keys), 500):
        r.delete(*keys[i:i + 500])
    VectorOutbox.objects.for_tenant(tenant.pk).delete()
    tenant_id = str(tenant.pk)
    Tenant.objects.filter(pk=tenant.pk).delete()
    log.info("erased tenant %s: %d users", tenant_id, users)
    return {"tenant_id": tenant_id, "users": users, "redis_keys": len(keys)}
