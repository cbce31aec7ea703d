"""Who and where an OpenAI-surface request runs: its end user (created on first use), its session (X-Session-Id,
the user's open one, or a new one) and which of the turns the client resent the session does not hold yet."""
from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from assistant.history_lineup import line_up
from infra.errors import Conflict, NotFound
from infra.secrets import secrets_redact
from orchestration.messages import messages_withdraw
from orchestration.sessions import session_close, session_open
from sessions.models import Session
from sessions.selectors import (
    access_session,
    message_contents,
    session_last_user_input,
    session_open_for_user,
    session_turn_digests,
    user_turn_digests_elsewhere,
)
from sessions.services import NewMessage
from tenants.models import EndUser, Tenant
from tenants.selectors import end_user_hold
from tenants.services import end_user_get_or_create

from .requests import invalid


def chat_session_check(*, tenant: Tenant, external_id: str, session_id: uuid.UUID) -> Session:
    """Read-only: the named session exists, is this user's and is open (nothing is created before the request is
    known to be valid). Returns it, for chat_place."""
    session = access_session(tenant=tenant, session_id=session_id)
    if session.user.external_id != external_id:
        raise NotFound("Session not found.")  # the same answer as for a missing one
    if session.state != Session.State.OPEN:
        raise Conflict("Session is closed; omit X-Session-Id to continue in a new one.", code="session_closed")
    return session


def chat_user_resolve(*, tenant: Tenant, external_id: str) -> EndUser:
    """The end user named by the request (external id), created on first use."""
    return end_user_get_or_create(tenant=tenant, external_id=external_id)


@dataclass
class ChatPlacement:
    """Where a request's turn runs: its session, the client's earlier turns the session lacks (to store before the
    input), and whether the input repeats the session's last user message (a retry or a regenerate: it is not
    stored again, and a regenerated answer was taken back)."""
    session: Session
    earlier: list[NewMessage] = field(default_factory=list)
    repeated_input: str | None = None  # the stored text of the repeated input, which the turn then reuses


def chat_place(*, tenant: Tenant, user: EndUser, user_input: str, earlier: list[tuple[str, str]],
               session: Session | None = None, continuing: bool = False) -> ChatPlacement:
    """The session a chat request runs in, and which of its turns that session still needs.

    `session`: the one X-Session-Id (or a previous response) names, as chat_session_check returned it: the client's
    turns are lined up with it (a close since then is the append's 409, as for any closed session). Otherwise the
    user's open session is used when the client's conversation continues it (or when the tenant's `chat_sessions`
    says every request does); a conversation that does not (a new chat) closes it, so its bridge carries memory
    over, and opens a session of its own. A new session starts from the user's last one's bridge.
    `continuing`: the request brings tool results for the session's open turn, which stays as it is.
    """
    earlier = earlier[-(settings.CONTINUUM_MAX_BATCH - 1):]
    if session is not None:
        return _placed(tenant=tenant, session=session, user_input=user_input, earlier=earlier, named=True,
                       continuing=continuing)
    with transaction.atomic():
        # Two first requests of one user race here; the row lock makes the second find the first's session.
        end_user_hold(tenant=tenant, user=user)
        current = session_open_for_user(tenant=tenant, user=user)
        if current is not None:
            placement = _placed(tenant=tenant, session=current, user_input=user_input, earlier=earlier,
                                named=tenant.chat_sessions == Tenant.ChatSessions.OPEN_SESSION or continuing,
                                continuing=continuing)
            if placement is not None:
                return placement
            session_close(tenant=tenant, session_id=current.pk, reason="new_chat")
        session, _ = session_open(tenant=tenant, user=user)
        return _placed(tenant=tenant, session=session, user_input=user_input, earlier=earlier, named=True,
                       continuing=continuing)


def open_turn_input(*, tenant: Tenant, session: Session) -> str:
    """The input of the session's last turn, which tool outputs sent without it continue."""
    last = session_last_user_input(tenant=tenant, session=session)
    if not last:
        raise invalid("The previous response's session has no turn for these tool outputs to continue.",
                      param="input")
    return last


_LOOK_BACK = 200  # the session's newest turns a resent conversation is lined up with (an edit further back branches)
_KNOWN_LOOK_BACK = 1000  # the user's earlier messages a new chat's resent turns are looked for in


def _digest(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # noqa: S324 - an equality check against MD5() in SQL, not a secret


def _plain(text: str) -> str:
    """A turn's text as compared: clients trim or re-wrap what they resend, secrets were cut out of what we keep."""
    return " ".join(_redacted(text).split())


class _Turns:
    """Stored turns against a client's turns: the same role and the same text, up to whitespace and redaction."""

    def __init__(self, *, tenant: Tenant, stored: list[dict], sent: list[tuple[str, str]]):
        self.tenant, self.stored, self.sent = tenant, stored, sent
        self._digests = [_digest(text) for _, text in sent]
        self._plain_stored: dict[int, str] | None = None

    def same_text(self, k: int, text: str, digest: str) -> bool:
        if self.stored[k]["digest"] == digest:
            return True
        if self._plain_stored is None:  # one read of the stored texts, only once a digest differs
            texts = message_contents(tenant=self.tenant, message_ids=[row["pk"] for row in self.stored])
            self._plain_stored = {i: _plain(texts.get(row["pk"], "")) for i, row in enumerate(self.stored)}
        return self._plain_stored[k] == _plain(text)

    def same(self, k: int, i: int) -> bool:
        role, text = self.sent[i]
        return self.stored[k]["role"] == role and self.same_text(k, text, self._digests[i])


def _placed(*, tenant: Tenant, session: Session, user_input: str, earlier: list[tuple[str, str]],
            named: bool, continuing: bool = False) -> ChatPlacement | None:
    """The request's placement in `session`, or None when its conversation does not continue it and the session
    was not named (the caller then opens a new one). A regenerate takes the session's last answer back here."""
    # Digests, not texts: a stored text is read only when its digest differs from the client's.
    stored = session_turn_digests(tenant=tenant, session=session, limit=max(_LOOK_BACK, len(earlier) + 2))
    turns = _Turns(tenant=tenant, stored=stored, sent=earlier)
    found = line_up(stored_roles=[row["role"] for row in stored], n_sent=len(earlier), same=turns.same,
                    same_input=lambda k: stored[k]["role"] == "user" and turns.same_text(k, user_input,
                                                                                       _digest(user_input)),
                    history_shown=not named)
    if found.kind == "apart" and not named:
        return None
    if found.kind == "fresh":
        return ChatPlacement(session=session, earlier=_known_marked(tenant=tenant, session=session, turns=earlier))
    new_from = 0 if found.kind == "apart" else found.new_from  # a named session takes a conversation begun elsewhere
    placement = ChatPlacement(session=session, earlier=[NewMessage(role=r, content=t) for r, t in earlier[new_from:]])
    if found.repeat_of is not None:
        repeated = stored[found.repeat_of]
        placement.repeated_input = message_contents(tenant=tenant, message_ids=[repeated["pk"]]).get(repeated["pk"])
        if found.repeat_of < len(stored) - 1 and not continuing:  # a regenerate: the answer it replaces goes
            messages_withdraw(tenant=tenant, session=session, after_seq=repeated["seq"], actor_type="end_user",
                              actor_id=session.user.external_id)
    return placement


def _known_marked(*, tenant: Tenant, session: Session, turns: list[tuple[str, str]]) -> list[NewMessage]:
    """A new session's resent turns; those the user's earlier sessions already hold (a chat the user went back to)
    are stored for the context but not read for memories again."""
    if not turns:
        return []
    held = user_turn_digests_elsewhere(tenant=tenant, session=session, limit=_KNOWN_LOOK_BACK)
    return [NewMessage(role=role, content=text, known=(role, _digest(text)) in held) for role, text in turns]


def _redacted(text: str) -> str:
    return secrets_redact(text).text
