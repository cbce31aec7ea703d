"""Row writes for sessions and messages: open, close, append, rewrite, in the database only (`session_row_*`,
`message_rows_*`).

Callers use the flows of the same operations, which also do what follows a write in other stores (the buffer,
links, extraction, the bridge): orchestration/sessions.py `session_open`, `session_close`,
orchestration/messages.py `messages_append`, and orchestration/forgetting.py for `message_rows_rewrite`. These
functions return what they changed so the flows can.
"""
from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from infra import clock
from infra.errors import Conflict, ValidationFailed
from infra.secrets import secrets_redact
from infra.tokens import count_tokens
from tenants.models import EndUser, Tenant
from tenants.scoping import tenant_key

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
    # Already extracted where it was first stored (a chat's turns resent into a new session): kept for the context,
    # not read for memories a second time.
    known: bool = False


@dataclass
class SessionOpened:
    session: Session
    created: bool
    closed: list[Session] = field(default_factory=list)  # sessions this open closed (the tenant's open policy)


def session_row_open(*, tenant: Tenant, user: EndUser, title: str = "", external_id: str | None = None,
                     opened_at: datetime | None = None) -> SessionOpened:
    """Open a session for the user; call inside a transaction (the caller schedules what follows on commit).

    The tenant's open_policy decides what happens to a session the user already has open.
    """
    with transaction.atomic():
        # Serialize opens per user so two concurrent opens cannot both create one.
        EndUser.objects.select_for_update().filter(tenant=tenant, pk=user.pk).first()
        current = session_open_for_user(tenant=tenant, user=user)
        closed = []
        if current is not None:
            if tenant.open_policy == Tenant.OpenPolicy.RETURN_OPEN and external_id in (None, current.external_id):
                return SessionOpened(current, False)
            if session_row_close(tenant=tenant, session=current, reason="superseded"):
                closed.append(current)
        previous = (Session.objects.for_tenant(tenant).filter(user=user).order_by("-opened_at").first())
        ts = opened_at or clock.now()
        try:
            with transaction.atomic():
                session = Session.objects.create(tenant=tenant, user=user, title=title, external_id=external_id,
                                                 previous=previous, opened_at=ts, last_activity_at=ts)
        except IntegrityError:
            raise Conflict(f"A session with external_id '{external_id}' already exists for this user.",
                           code="session_exists")
    return SessionOpened(session, True, closed)


def session_row_open_imported(*, tenant: Tenant, user: EndUser, opened_at: datetime, title: str = "",
                              external_id: str | None = None) -> Session:
    """Open a session of imported history; call inside the transaction that appends its messages and closes it.

    The tenant's open policy is not applied: an import must neither close nor return the session the user has
    open now. Its previous session is the latest one opened before it, so history keeps its order. Because the
    caller closes it before committing, no other transaction ever sees it open (the idle job, an append).
    """
    previous = (Session.objects.for_tenant(tenant).filter(user=user, opened_at__lt=opened_at)
                .order_by("-opened_at").first())
    try:
        with transaction.atomic():
            return Session.objects.create(tenant=tenant, user=user, title=title[:255], external_id=external_id,
                                          previous=previous, opened_at=opened_at, last_activity_at=opened_at)
    except IntegrityError:
        raise Conflict(f"A session with external_id '{external_id}' already exists for this user.",
                       code="session_exists")


def session_row_close(*, tenant: Tenant, session: Session, reason: str, closed_at: datetime | None = None) -> bool:
    """Flip open→closed with a conditional UPDATE (closing a closed session changes nothing); True for the one caller
    that closed it."""
    return bool(Session.objects.for_tenant(tenant).filter(pk=session.pk, state=Session.State.OPEN).update(
        state=Session.State.CLOSED, closed_at=closed_at or clock.now(), close_reason=reason))


def message_rows_append(*, tenant: Tenant, session_id, items: list[NewMessage],
                        pending_roles: Collection[str] = ()) -> list[Message]:
    """Append messages atomically: one bad item (duplicate external id, closed session) stores nothing.

    Messages of `pending_roles` are stored waiting for extraction (extracted_at empty); the others are stored
    already marked done, so nothing is ever queued for a message no extractor reads.
    """
    if not items:
        raise ValidationFailed("At least one message is required.")
    if len(items) > settings.CONTINUUM_MAX_BATCH:
        raise ValidationFailed(f"At most {settings.CONTINUUM_MAX_BATCH} messages per batch.", code="batch_too_large")
    ext_ids = [i.external_id for i in items if i.external_id]
    if len(ext_ids) != len(set(ext_ids)):
        raise Conflict("Duplicate external_id within the batch.", code="duplicate_external_id")
    # No savepoint when a caller's transaction is open: a failure here fails the caller's whole transaction (no caller
    # goes on after one), and a savepoint is two more round trips on every turn.
    now = clock.now()
    last_activity = max([now, *(item.created_at for item in items if item.created_at)])
    with transaction.atomic(savepoint=False):
        session = _session_seqs_take(tenant=tenant, session_id=session_id, count=len(items), at=last_activity)
        if session is None:  # missing, another tenant's (404), or not open
            access_session(tenant=tenant, session_id=session_id)
            raise Conflict("Session is closed; open a new one.", code="session_closed")
        messages = Message.objects.for_tenant(tenant)
        if ext_ids and messages.filter(session=session, external_id__in=ext_ids).exists():
            raise Conflict("A message with this external_id already exists in the session.",
                           code="duplicate_external_id",
                           details={"external_ids": list(messages.filter(session=session, external_id__in=ext_ids)
                                                         .values_list("external_id", flat=True))})
        seq0 = session.message_seq - len(items)
        contents = [_redacted(item.content) for item in items]
        rows = [
            Message(tenant=tenant, session=session, seq=seq0 + i + 1, role=item.role, content=contents[i],
                    name=item.name or "", external_id=item.external_id, created_at=item.created_at or now,
                    token_count=count_tokens(contents[i]), tool_calls=_redacted_calls(item.tool_calls),
                    tool_call_id=item.tool_call_id or "",
                    extracted_at=None if item.role in pending_roles and not item.known else now)
            for i, item in enumerate(items)
        ]
        Message.objects.bulk_create(rows)
    return rows


def message_rows_rewrite(*, tenant: Tenant, rewrite: Callable[[str], str], session_ids: Collection = (),
                         message_ids: Collection = ()) -> list[Message]:
    """Rewrite the text of stored messages in place (words the user took back), the messages of these sessions and
    these messages; their token counts follow. The arguments of an assistant's tool calls and a tool's result are
    JSON that clients parse: the rewrite reaches the strings inside it and the JSON stays JSON. Returns the rows
    that changed."""
    changed = []
    scope = Q(session_id__in=list(session_ids)) | Q(pk__in=list(message_ids))
    with transaction.atomic():
        for m in Message.objects.for_tenant(tenant).select_for_update().filter(scope).order_by("session_id", "seq"):
            content = _json_text_rewrite(m.content, rewrite) if m.role == Message.Role.TOOL else rewrite(m.content)
            calls = _calls_rewritten(m.tool_calls, rewrite)
            if (content, calls) != (m.content, m.tool_calls):
                m.content, m.tool_calls, m.token_count = content, calls, count_tokens(content)
                m.save(update_fields=["content", "tool_calls", "token_count"])
                changed.append(m)
    return changed


def session_working_save(*, tenant_id, session_id, working: dict, version: int) -> bool:
    """Keep a buffer's newest goal stack, ledger and notes on the Session row: versions only move forward, so an
    older write never replaces a newer one. False when the row already holds this version or a later one."""
    return bool(Session.objects.for_tenant(tenant_id).filter(pk=session_id, working_version__lt=version).update(
        working_state=working, working_version=version, goal=(working.get("goal") or "")[:2000]))


def sessions_working_rewrite(*, tenant_id, user_id, change: Callable[[Session], tuple[dict, str] | None]) -> int:
    """Rewrite what the user's sessions keep of their buffers, the rows locked: change(session) gives the new
    (working state, goal), or None to leave it. The version moves on, so a write from a buffer read before the
    rewrite cannot put the old words back. Returns how many sessions changed."""
    changed = 0
    with transaction.atomic():
        rows = Session.objects.for_tenant(tenant_id).select_for_update().filter(user_id=user_id)
        for s in rows.only("pk", "goal", "working_state", "working_version"):
            new = change(s)
            if new is not None:
                rows.filter(pk=s.pk).update(working_state=new[0], goal=new[1], working_version=s.working_version + 1)
                changed += 1
    return changed


def session_links_claim(*, tenant_id, session_id) -> bool:
    """Claim a session's one check for links to earlier sessions: False when another caller already did."""
    return bool(Session.objects.for_tenant(tenant_id).filter(pk=session_id, links_checked_at__isnull=True)
                .update(links_checked_at=clock.now()))


def message_row_claim_extraction(*, tenant_id, message_id) -> bool:
    """Mark a message extracted, in the caller's transaction: False when another run already did (the claim that
    makes a retried extraction write nothing twice)."""
    return bool(Message.objects.for_tenant(tenant_id).filter(pk=message_id, extracted_at__isnull=True)
                .update(extracted_at=clock.now()))


def message_rows_mark_extracted(*, tenant: Tenant, message_ids: Collection) -> int:
    """Mark messages extracted without extracting them (an import brings their memories along)."""
    return Message.objects.for_tenant(tenant).filter(pk__in=list(message_ids)).update(extracted_at=clock.now())


def message_rows_delete(*, tenant: Tenant, message_ids: Collection) -> int:
    """Delete stored messages (a session's answer taken back); the caller holds their rows locked."""
    deleted, _ = Message.objects.for_tenant(tenant).filter(pk__in=list(message_ids)).delete()
    return deleted


def _json_strings_rewritten(value, rewrite: Callable[[str], str]):
    if isinstance(value, str):
        return rewrite(value)
    if isinstance(value, list):
        return [_json_strings_rewritten(v, rewrite) for v in value]
    if isinstance(value, dict):
        return {k: _json_strings_rewritten(v, rewrite) for k, v in value.items()}
    return value


def _json_text_rewrite(text: str, rewrite: Callable[[str], str]) -> str:
    """A JSON object or array with its strings rewritten (keys and other values as they were), written again only
    when one changed; any other text rewritten as text."""
    if text.lstrip()[:1] not in ("{", "["):
        return rewrite(text)
    try:
        doc = json.loads(text)
    except ValueError:
        return rewrite(text)
    new = _json_strings_rewritten(doc, rewrite)
    return text if new == doc else json.dumps(new, ensure_ascii=False)


def _calls_rewritten(tool_calls, rewrite: Callable[[str], str]):
    if not isinstance(tool_calls, list):
        return tool_calls
    calls = []
    for call in tool_calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
            arguments = _json_text_rewrite(fn["arguments"], rewrite)
            if arguments != fn["arguments"]:
                call = {**call, "function": {**fn, "arguments": arguments}}
        calls.append(call)
    return calls


def _session_seqs_take(*, tenant: Tenant, session_id, count: int, at: datetime) -> Session | None:
    """Take `count` message numbers of an open session and mark its activity, in one statement that also locks the
    row until the caller's transaction ends (a read FOR UPDATE and an update were two). The session as it now
    stands (message_seq counts the new messages), or None when there is no such open session of the tenant."""
    try:
        sid = uuid.UUID(str(session_id))
    except ValueError:
        return None
    pk = Session._meta.pk
    tenant_field = Session._meta.get_field("tenant").target_field
    table = connection.ops.quote_name(Session._meta.db_table)
    found = list(Session.objects.raw(
        f"UPDATE {table} SET message_seq = message_seq + %s, last_activity_at = %s "
        "WHERE id = %s AND tenant_id = %s AND state = %s RETURNING *",
        [count, Session._meta.get_field("last_activity_at").get_db_prep_value(at, connection),
         pk.get_db_prep_value(sid, connection), tenant_field.get_db_prep_value(tenant_key(tenant), connection),
         Session.State.OPEN]))
    return found[0] if found else None


def _redacted(text: str) -> str:
    """Secrets never reach a store: messages are kept with credentials, cards and IBANs cut out."""
    return secrets_redact(text).text if text else text


def _redacted_calls(tool_calls: list | None) -> list:
    calls = []
    for call in tool_calls or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
            call = {**call, "function": {**fn, "arguments": _redacted(fn["arguments"])}}
        calls.append(call)
    return calls
