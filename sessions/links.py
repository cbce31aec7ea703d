"""Session links: same_user, similar_goal, referenced_context."""
from __future__ import annotations

from .models import Session, SessionLink


def links_create_for_new_session(*, session_id) -> list[SessionLink]:
    session = Session.objects.select_related("previous").get(pk=session_id)
    if session.previous_id is None:
        return []
    link, _ = SessionLink.objects.get_or_create(tenant_id=session.tenant_id, from_session=session,
                                                to_session_id=session.previous_id, kind=SessionLink.Kind.SAME_USER)
    return [link]
