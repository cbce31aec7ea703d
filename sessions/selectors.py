"""Reads for sessions and messages, each scoped by tenant first."""
from __future__ import annotations

from django.db.models import Q, QuerySet
from django.db.models.functions import MD5

from infra.errors import NotFound
from tenants.models import EndUser, Tenant
from tenants.selectors import parse_uuid

from .models import Message, Session


def access_session(*, tenant: Tenant, session_id, for_update: bool = False, user: EndUser | None = None) -> Session:
    """The tenant's session, with its user and tenant; for_update: the bare row, locked (writers need only its
    counters and state, and the lock is held for as short as possible). One 404 for missing, another tenant's and
    (with user) another user's session."""
    sid = parse_uuid(session_id, what="session")
    qs = Session.objects.for_tenant(tenant)
    if user is not None:
        qs = qs.filter(user=user)
    qs = qs.select_for_update() if for_update else qs.select_related("user", "tenant")
    try:
        return qs.get(id=sid)
    except Session.DoesNotExist:
        raise NotFound("Session not found.")


def session_list(*, tenant: Tenant, user: EndUser | None = None, state: str | None = None) -> QuerySet[Session]:
    qs = Session.objects.for_tenant(tenant)
    if user is not None:
        qs = qs.filter(user=user)
    if state:
        qs = qs.filter(state=state)
    return qs


def session_open_for_user(*, tenant: Tenant, user: EndUser) -> Session | None:
    return Session.objects.for_tenant(tenant).filter(user=user, state=Session.State.OPEN).order_by("-opened_at").first()


def session_previous(*, tenant: Tenant, user: EndUser, before: Session) -> Session | None:
    return (Session.objects.for_tenant(tenant).filter(user=user, opened_at__lte=before.opened_at)
            .exclude(id=before.id).order_by("-opened_at").first())


def message_list(*, tenant: Tenant, session: Session) -> QuerySet[Message]:
    return Message.objects.for_tenant(tenant).filter(session=session).order_by("seq")


def access_message(*, tenant: Tenant, message_id) -> Message:
    mid = parse_uuid(message_id, what="message")
    try:
        return Message.objects.for_tenant(tenant).select_related("session").get(id=mid)
    except Message.DoesNotExist:
        raise NotFound("Message not found.")


def session_last_user_input(*, tenant: Tenant, session: Session) -> str | None:
    """The text of the session's last user message, or None when it has none."""
    return (Message.objects.for_tenant(tenant).filter(session=session, role=Message.Role.USER)
            .order_by("-seq").values_list("content", flat=True).first())


def session_turn_digests(*, tenant: Tenant, session: Session, limit: int) -> list[dict]:
    """The session's newest `limit` turns as a client saw them (user messages and assistant replies, not the
    assistant's tool-calling steps), oldest first, as dicts of pk, seq, role and the md5 `digest` of the content:
    digests keep up to `limit` texts of up to 32k characters out of the query's result."""
    rows = (Message.objects.for_tenant(tenant).filter(session=session, role__in=("user", "assistant"))
            .exclude(content="").filter(Q(role="user") | Q(tool_calls=[]))
            .annotate(digest=MD5("content")).order_by("-seq").values("pk", "seq", "role", "digest")[:limit])
    return list(reversed(rows))


def message_contents(*, tenant: Tenant, message_ids) -> dict:
    """The content of each of these messages of the tenant, by message id."""
    return dict(Message.objects.for_tenant(tenant).filter(pk__in=list(message_ids)).values_list("pk", "content"))


def user_turn_digests_elsewhere(*, tenant: Tenant, session: Session, limit: int) -> set[tuple[str, str]]:
    """(role, md5 of the content) of the newest `limit` user and assistant messages of the session's user in their
    other sessions."""
    return set(Message.objects.for_tenant(tenant).filter(session__user_id=session.user_id,
                                                         role__in=("user", "assistant"))
               .exclude(session=session).annotate(digest=MD5("content")).order_by("-created_at")
               .values_list("role", "digest")[:limit])
