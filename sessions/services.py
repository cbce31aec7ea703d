"""Writes for sessions and messages: open, close, append. The database row comes first; Redis follows."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F

from infra import clock
from infra.errors import Conflict, ValidationFailed
from infra.tokens import count_tokens
from memory.extraction.classify import role_extracted
from tenants.models import EndUser, Tenant

from .models import Message, Session
from .selectors import access_session, session_open_for_user

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NewMessage:
    role: str
    content: str
    external_id: str | None = None
    created_at: datetime | None = None
    name: str = ""
    tool_calls: list | None = None
    tool_call_id: str = ""


def session_open(*, tenant: Tenant, user: EndUser, title: str = "", external_id: str | None = None,
                 opened_at: datetime | None = None) -> tuple[Session, bool]:
    """Open a session for the user. Returns (session, created).

    The tenant's open_policy decides what happens to a session the user already has open.
    """
    with transaction.atomic():
        # Serialize opens per user so two concurrent opens cannot both create one.
        EndUser.objects.select_for_update().filter(pk=user.pk).first()
        current = session_open_for_user(tenant=tenant, user=user)
        if current is not None:
            if tenant.open_policy == Tenant.OpenPolicy.RETURN_OPEN and external_id in (None, current.external_id):
                return current, False
            _close_locked(tenant=tenant, session=current, reason="superseded")
        previous = (Session.objects.filter(tenant=tenant, user=user).order_by("-opened_at").first())
        ts = opened_at or clock.now()
        try:
            with transaction.atomic():
                session = Session.objects.create(tenant=tenant, user=user, title=title, external_id=external_id,
                                                 previous=previous, opened_at=ts, last_activity_at=ts)
        except IntegrityError:
            raise Conflict(f"A session with external_id '{external_id}' already exists for this user.",
                           code="session_exists")
        transaction.on_commit(lambda: _after_open(session.pk))
    return session, True


def _after_open(session_id) -> None:
    from .links import links_create_for_new_session

    try:
        links_create_for_new_session(session_id=session_id)
    except Exception:  # links are an enhancement; a failure must not fail the open
        log.exception("linking session %s failed", session_id)


def _close_locked(*, tenant: Tenant, session: Session, reason: str, closed_at: datetime | None = None) -> bool:
    """Flip open→closed with a conditional UPDATE; only the winner enqueues the bridge."""
    won = Session.objects.filter(pk=session.pk, state=Session.State.OPEN).update(
        state=Session.State.CLOSED, closed_at=closed_at or clock.now(), close_reason=reason)
    if won:
        from .tasks import bridge_write_task

        sid = str(session.pk)
        transaction.on_commit(lambda: bridge_write_task.delay(sid))
    return bool(won)


def session_close(*, tenant: Tenant, session_id, reason: str = "api", closed_at: datetime | None = None) -> Session:
    """Idempotent: closing a closed session returns it unchanged."""
    with transaction.atomic():
        session = access_session(tenant=tenant, session_id=session_id)
        _close_locked(tenant=tenant, session=session, reason=reason, closed_at=closed_at)
    session.refresh_from_db()
    return session


def messages_append(*, tenant: Tenant, session_id, items: list[NewMessage], enqueue_extraction: bool = True) -> list[Message]:
    """Append messages atomically: one bad item (duplicate external id, closed session) stores nothing."""
    if not items:
        raise ValidationFailed("At least one message is required.")
    if len(items) > settings.CONTINUUM_MAX_BATCH:
        raise ValidationFailed(f"At most {settings.CONTINUUM_MAX_BATCH} messages per batch.", code="batch_too_large")
    ext_ids = [i.external_id for i in items if i.external_id]
    if len(ext_ids) != len(set(ext_ids)):
        raise Conflict("Duplicate external_id within the batch.", code="duplicate_external_id")
    with transaction.atomic():
        session = access_session(tenant=tenant, session_id=session_id, for_update=True)
        if session.state != Session.State.OPEN:
            raise Conflict("Session is closed; open a new one.", code="session_closed")
        if ext_ids and Message.objects.filter(session=session, external_id__in=ext_ids).exists():
            raise Conflict("A message with this external_id already exists in the session.",
                           code="duplicate_external_id",
                           details={"external_ids": list(Message.objects.filter(session=session, external_id__in=ext_ids)
                                                         .values_list("external_id", flat=True))})
        now = clock.now()
        seq0 = session.message_seq
        contents = [_redacted(item.content) for item in items]
        rows = [
            Message(tenant=tenant, session=session, seq=seq0 + i + 1, role=item.role, content=contents[i],
                    name=item.name or "", external_id=item.external_id, created_at=item.created_at or now,
                    token_count=count_tokens(contents[i]), tool_calls=_redacted_calls(item.tool_calls),
                    tool_call_id=item.tool_call_id or "",
                    # An assistant or tool message has nothing to extract: a task for it only claimed it (a queued
                    # task, a worker run and two queries per turn).
                    extracted_at=None if role_extracted(item.role) else now)
            for i, item in enumerate(items)
        ]
        Message.objects.bulk_create(rows)
        last_ts = max(r.created_at for r in rows)
        Session.objects.filter(pk=session.pk).update(message_seq=F("message_seq") + len(rows),
                                                     last_activity_at=max(last_ts, now))
        ids = [str(r.id) for r in rows]
        to_extract = [str(r.id) for r in rows if r.extracted_at is None] if enqueue_extraction else []
        tenant_id, user_id, session_pk = str(tenant.pk), str(session.user_id), str(session.pk)
        transaction.on_commit(lambda: _after_append(tenant_id, user_id, session_pk, ids, to_extract, rows))
    return rows


def _redacted(text: str) -> str:
    """Secrets never reach a store: messages are kept with credentials, cards and IBANs cut out."""
    from memory.extraction.secrets import secrets_redact

    return secrets_redact(text).text if text else text


def _redacted_calls(tool_calls: list | None) -> list:
    calls = []
    for call in tool_calls or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
            call = {**call, "function": {**fn, "arguments": _redacted(fn["arguments"])}}
        calls.append(call)
    return calls


def _after_append(tenant_id: str, user_id: str, session_id: str, message_ids: list[str], to_extract: list[str],
                  rows: list[Message] | None = None) -> None:
    from .buffer import buffer_append_messages

    # The committed rows are handed over so the buffer need not read them back.
    buffer_append_messages(tenant_id=tenant_id, user_id=user_id, session_id=session_id, message_ids=message_ids,
                           messages=rows)
    if to_extract:
        from memory.tasks import memory_extract_task

        for mid in to_extract:
            memory_extract_task.delay(mid)
