"""Who and where an OpenAI-surface request runs: its end user (created on first use), its session (X-Session-Id,
the user's open one, or a new one) and which of the turns the client resent the session does not hold yet."""
from __future__ import annotations

import hashlib
import uuid

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import MD5

from infra.errors import Conflict, NotFound
from infra.secrets import secrets_redact
from orchestration.sessions import session_open
from sessions.models import Message, Session
from sessions.selectors import access_session, session_open_for_user
from sessions.services import NewMessage
from tenants.models import EndUser, Tenant
from tenants.services import end_user_get_or_create

from .openai_requests import invalid


def chat_session_check(*, tenant: Tenant, external_id: str, session_id: uuid.UUID) -> None:
    """Read-only: the named session exists, is this user's and is open (nothing is created before the request is
    known to be valid)."""
    session = access_session(tenant=tenant, session_id=session_id)
    if session.user.external_id != external_id:
        raise NotFound("Session not found.")  # the same answer as for a missing one
    if session.state != Session.State.OPEN:
        raise Conflict("Session is closed; omit X-Session-Id to continue in a new one.", code="session_closed")


def chat_user_resolve(*, tenant: Tenant, external_id: str) -> EndUser:
    """The end user named by the request (external id), created on first use."""
    return end_user_get_or_create(tenant=tenant, external_id=external_id)


def chat_session_resolve(*, tenant: Tenant, user: EndUser, session_id: uuid.UUID | None = None) -> Session:
    """X-Session-Id when given (it must be this user's open session), else the user's open one, else a new one.

    A new session links to the user's last one, so its first turn starts with that session's bridge.
    """
    if session_id:
        session = access_session(tenant=tenant, session_id=session_id)
        if session.user_id != user.pk:
            raise NotFound("Session not found.")  # the same answer as for a missing one
        if session.state != Session.State.OPEN:
            raise Conflict("Session is closed; omit X-Session-Id to continue in a new one.", code="session_closed")
        return session
    with transaction.atomic():
        # Two first requests of one user race here; the row lock makes the second find the first's session.
        EndUser.objects.for_tenant(tenant).select_for_update().filter(pk=user.pk).first()
        current = session_open_for_user(tenant=tenant, user=user)
        if current is not None:
            return current
        session, _ = session_open(tenant=tenant, user=user)
        return session


def open_turn_input(*, tenant: Tenant, session: Session) -> str:
    """The input of the session's last turn, which tool outputs sent without it continue."""
    last = (Message.objects.for_tenant(tenant).filter(session=session, role=Message.Role.USER)
            .order_by("-seq").values_list("content", flat=True).first())
    if not last:
        raise invalid("The previous response's session has no turn for these tool outputs to continue.",
                      param="input")
    return last


def _stored_turns(*, tenant: Tenant, session: Session, limit: int) -> list[tuple[str, str]]:
    """The session's newest `limit` turns as the client saw them (user messages and assistant replies, not the
    assistant's tool-calling steps), oldest first, each as (role, md5 of its content): comparing digests keeps up to
    `limit` texts of up to 32k characters out of the query's result."""
    rows = (Message.objects.filter(tenant=tenant, session=session, role__in=("user", "assistant"))
            .exclude(content="").filter(Q(role="user") | Q(tool_calls=[]))
            .annotate(digest=MD5("content")).order_by("-seq").values_list("role", "digest")[:limit])
    return list(reversed(rows))


def _digest(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # noqa: S324 - an equality check against MD5() in SQL, not a secret


def chat_earlier_missing(*, tenant: Tenant, session: Session, earlier: list[tuple[str, str]],
                         user_input: str = "") -> list[NewMessage]:
    """Turns the client sent that this session does not already hold, oldest first, to import before the input.

    A chat UI resends its whole conversation with every request (some drop its oldest turns). The conversation is
    lined up with the session by position: the longest run of the client's first turns that equals the session's
    last turns is already stored, and what follows it is new. Repeats ("yes", "thanks") are turns of their own, and
    a conversation begun elsewhere (nothing lines up) is imported once, into this session.
    """
    if not earlier:
        return []
    earlier = earlier[-(settings.CONTINUUM_MAX_BATCH - 1):]
    stored = _stored_turns(tenant=tenant, session=session, limit=len(earlier) + 1)
    if user_input and stored and stored[-1][0] == "user" and stored[-1][1] in {
            _digest(user_input), _digest(user_input.strip()), _digest(_redacted(user_input))}:
        # This input is already the session's last message (a retry after the model failed); the turn reuses it.
        stored = stored[:-1]
    sent = [(role, _digest(text)) for role, text in earlier]
    redacted: dict[int, tuple[str, str]] = {}

    def same(k: int, i: int) -> bool:
        """Whether stored turn k is the client's turn i; stored texts had secrets cut out, so compare that too."""
        if stored[k] == sent[i]:
            return True
        if stored[k][0] != sent[i][0]:
            return False
        if i not in redacted:
            redacted[i] = (sent[i][0], _digest(_redacted(earlier[i][1])))
        return stored[k] == redacted[i]

    overlap = 0
    for size in range(min(len(stored), len(earlier)), 0, -1):
        start = len(stored) - size
        if all(same(start + i, i) for i in range(size)):
            overlap = size
            break
    return [NewMessage(role=role, content=text) for role, text in earlier[overlap:]]


def _redacted(text: str) -> str:
    return secrets_redact(text).text

