"""A session's life across the stores: opening links it to the user's previous session; closing (by the API, the
tenant's open policy or the idle timeout) enqueues the task that writes its bridge and note and finishes its work."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

import redis
from django.conf import settings
from django.db import transaction

from context.bridge import bridge_write
from context.buffer import buffer_delete
from context.links import links_create_for_new_session
from context.session_notes import session_notes_write
from infra import clock
from infra.errors import NotFound
from infra.task_queue import task_enqueue, task_enqueue_on_commit
from sessions.models import Session
from sessions.selectors import access_session
from sessions.services import SessionOpened, session_row_close, session_row_open, session_row_open_imported
from tenants.models import EndUser, Tenant
from webhooks.events import webhook_event_emit

from .messages import messages_pending_extraction

log = logging.getLogger(__name__)

IMPORT_CLOSE_REASON = "import"  # imported history: its sessions close as they are written
_MAX_EXTRACTION_ENQUEUE = 1000


def access_user_session(*, tenant: Tenant, user: EndUser, session_id) -> Session:
    """The user's session, for memory's API (which never imports the sessions app); one 404 for missing, another
    tenant's and another user's."""
    session = access_session(tenant=tenant, session_id=session_id)
    if session.user_id != user.pk:
        raise NotFound("Session not found.")
    return session


def _finish_after_commit(session: Session) -> None:
    """A session just closed, in this transaction: its webhook event now, its finish task after commit."""
    tenant_id, session_id = str(session.tenant_id), str(session.pk)
    _closed_announce(session)
    task_enqueue_on_commit("orchestration.tasks.session_finish_task", tenant_id, session_id)


def _closed_announce(session: Session) -> None:
    # The caller's row may predate the close (a conditional UPDATE closed it): read what the close wrote.
    row = (Session.objects.for_tenant(session.tenant_id).filter(pk=session.pk)
           .values("closed_at", "close_reason", "message_seq", "title", "goal").first())
    if row is None:
        return
    webhook_event_emit(tenant_id=session.tenant_id, event_type="session.closed", occurred_at=row["closed_at"], data={
        "session_id": session.pk, "user_id": session.user_id, "external_id": session.external_id,
        "opened_at": session.opened_at, "closed_at": row["closed_at"], "close_reason": row["close_reason"],
        "message_count": row["message_seq"], "previous_session_id": session.previous_id,
    }, content={"title": row["title"], "goal": row["goal"]})


def _link_after_commit(session: Session) -> None:
    tenant_id, session_id = str(session.tenant_id), str(session.pk)

    def link():
        try:
            links_create_for_new_session(tenant_id=tenant_id, session_id=session_id)
        except Exception:  # links are an enhancement; a failure must not fail the open
            log.exception("linking session %s failed", session_id)

    transaction.on_commit(link)


def session_open(*, tenant: Tenant, user: EndUser, title: str = "", external_id: str | None = None,
                 opened_at: datetime | None = None) -> tuple[Session, bool]:
    """Open a session (or return the open one, by the tenant's policy). Returns (session, created)."""
    with transaction.atomic():
        opened: SessionOpened = session_row_open(tenant=tenant, user=user, title=title, external_id=external_id,
                                                 opened_at=opened_at)
        for closed in opened.closed:
            _finish_after_commit(closed)
        if opened.created:
            _link_after_commit(opened.session)
    return opened.session, opened.created


def session_open_imported(*, tenant: Tenant, user: EndUser, opened_at: datetime, title: str = "",
                          external_id: str | None = None) -> Session:
    """Open a session of imported history (the open policy is not applied; the user's open session stays as it
    is) and link it to the session before it; the caller appends its messages and closes it in its transaction."""
    session = session_row_open_imported(tenant=tenant, user=user, opened_at=opened_at, title=title,
                                        external_id=external_id)
    _link_after_commit(session)
    return session


def session_close(*, tenant: Tenant, session_id, reason: str = "api", closed_at: datetime | None = None,
                  finish: bool = True) -> Session:
    """Close a session (idempotent); the first close enqueues its bridge. finish=False leaves the bridge and the
    rest of session_finish to a caller that paces them itself (an import: orchestration/imports.py)."""
    with transaction.atomic():
        session = access_session(tenant=tenant, session_id=session_id)
        won = session_row_close(tenant=tenant, session=session, reason=reason, closed_at=closed_at)
        session.refresh_from_db()
        if won and finish:
            _finish_after_commit(session)
    return session


def sessions_close_idle(*, now: datetime | None = None, limit: int | None = None) -> dict:
    """Close up to `limit` sessions idle past their tenant's timeout. Returns {"closed": n, "more": bool}.

    Each close re-checks the session under its row lock (the same lock an append takes), so a message that
    arrives meanwhile keeps the session open; a session already closed is skipped. Safe to run twice.
    """
    now = now or clock.now()
    limit = settings.CONTINUUM_IDLE_CLOSE_BATCH if limit is None else limit
    closed = 0
    tenants = (Tenant.objects.filter(sessions__state=Session.State.OPEN).distinct()
               .values_list("id", "idle_timeout_minutes"))
    for tenant_id, minutes in tenants:
        if closed >= limit:
            return {"closed": closed, "more": True}
        cutoff = now - timedelta(minutes=minutes)
        scoped = Session.objects.for_tenant(tenant_id)
        ids = list(scoped.filter(state=Session.State.OPEN, last_activity_at__lt=cutoff)
                   .order_by("last_activity_at").values_list("id", flat=True)[: limit - closed + 1])
        for sid in ids:
            if closed >= limit:
                return {"closed": closed, "more": True}
            with transaction.atomic():
                session = (scoped.select_for_update().select_related("tenant")
                           .filter(pk=sid, state=Session.State.OPEN, last_activity_at__lt=cutoff).first())
                if session is not None and session_row_close(tenant=session.tenant, session=session, reason="idle",
                                                             closed_at=now):
                    closed += 1
                    _finish_after_commit(session)
    return {"closed": closed, "more": False}


def session_finish(*, tenant_id, session_id):
    """A closed session's work, each step idempotent: its bridge (exactly one), its note (lines citing its turns,
    written once), extraction of whatever was never extracted, and its Redis buffer dropped. Returns the bridge, None
    when there is nothing to do."""
    session = Session.objects.for_tenant(tenant_id).filter(pk=session_id).select_related("tenant").first()
    if session is None:
        log.info("finishing session %s skipped: the session is gone", session_id)
        return None
    if session.state != Session.State.CLOSED:
        log.info("finishing session %s skipped: still open", session_id)
        return None
    bridge = bridge_write(session=session)
    session_notes_write(session=session)
    # An imported session's messages are extracted by its user's paced import backlog (orchestration/imports.py).
    pending = [] if session.close_reason == IMPORT_CLOSE_REASON else messages_pending_extraction(
        tenant_id=tenant_id, session_id=session_id, limit=_MAX_EXTRACTION_ENQUEUE)
    for mid in pending:
        task_enqueue("orchestration.tasks.message_extract_task", str(tenant_id), mid)  # idempotent per message
    try:
        buffer_delete(tenant_id=session.tenant_id, user_id=session.user_id, session_id=session.pk)
    except redis.exceptions.RedisError:
        log.warning("could not drop the buffer of closed session %s; its TTL removes it", session.pk)
    return bridge
