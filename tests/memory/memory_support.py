"""Helpers for the extraction and retrieval tests: one conversation recorded through the sessions services and
extracted through the pipeline, and a look at everything each store holds."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from memory.models import MemoryEvent, MemoryRecord

from .lifecycle_support import points_of  # noqa: F401  (re-exported for the extraction and retrieval tests)

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def record_turns(tenant, user, turns, *, start=MAY_8, extract=True, title=""):
    """turns: [(role, text)] → the stored messages of a new session (closed afterwards is up to the caller)."""
    from orchestration.messages import message_extract, messages_append
    from orchestration.sessions import session_open
    from sessions.services import NewMessage

    session, _ = session_open(tenant=tenant, user=user, title=title, opened_at=start)
    items = [NewMessage(role=role, content=text, created_at=start + timedelta(seconds=30 * i),
                        name="" if role == "user" else "assistant")
             for i, (role, text) in enumerate(turns)]
    messages = messages_append(tenant=tenant, session_id=session.pk, items=items, enqueue_extraction=False)
    if extract:
        for m in messages:
            message_extract(tenant_id=m.tenant_id, message_id=m.pk)
    return session, messages


def everything_stored(tenant) -> str:
    """Every text the memory app keeps for a tenant (rows, history, point payloads), as one string to search."""
    parts = []
    for r in MemoryRecord.objects.unscoped().filter(tenant=tenant):
        parts += [r.text, r.subject, r.value, repr(r.metadata)]
    for e in MemoryEvent.objects.unscoped().filter(tenant=tenant):
        parts += [repr(e.before), repr(e.after), e.note]
    parts += [repr(p) for p in points_of(tenant).values()]
    return "\n".join(parts)
