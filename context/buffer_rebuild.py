"""The buffer document as the database alone gives it: the session's anchors, its unfolded messages, the facts
extracted in it and the working state kept on its row. A missing buffer key is rebuilt from it; the bridge reads it."""
from __future__ import annotations

import time

from django.conf import settings

from infra.errors import NotFound
from memory.selectors import session_facts
from sessions.models import Message, Session

from .buffer_store import doc_normalized
from .models import SummaryAnchor

MESSAGE_FIELDS = ("id", "seq", "role", "content", "name", "tool_calls", "tool_call_id", "token_count", "created_at")


def message_entry(row: dict) -> dict:
    """A message as the buffer keeps it."""
    created = row.get("created_at")
    return {"id": str(row["id"]), "seq": int(row["seq"]), "role": row["role"], "content": row.get("content") or "",
            "name": row.get("name") or "", "tool_calls": row.get("tool_calls") or [],
            "tool_call_id": row.get("tool_call_id") or "", "tokens": int(row.get("token_count") or 0),
            "at": created.isoformat() if hasattr(created, "isoformat") else created}


def message_rows(tenant_id: str, session_id: str, **filters) -> list[dict]:
    return [message_entry(r) for r in
            Message.objects.for_tenant(tenant_id).filter(session_id=session_id, **filters).order_by("seq")
            .values(*MESSAGE_FIELDS)]


def buffer_build_from_db(*, tenant_id, user_id, session_id) -> dict:
    """The buffer document as the database alone gives it (the rebuild; also what the bridge reads)."""
    tenant_id, user_id, session_id = str(tenant_id), str(user_id), str(session_id)
    row = (Session.objects.for_tenant(tenant_id).filter(pk=session_id, user_id=user_id)
           .values("message_seq", "goal", "working_state", "working_version").first())
    if row is None:
        raise NotFound("Session not found.")
    anchors = list(SummaryAnchor.objects.for_tenant(tenant_id).filter(session_id=session_id)
                   .order_by("-last_seq")
                   .values("first_seq", "last_seq", "first_turn", "last_turn", "text", "token_count", "method")
                   [: settings.CONTINUUM_BUFFER_MAX_ANCHORS])[::-1]
    anchored_seq = anchors[-1]["last_seq"] if anchors else 0
    base_turns = anchors[-1]["last_turn"] if anchors else 0
    recent = message_rows(tenant_id, session_id, seq__gt=anchored_seq, seq__lte=row["message_seq"])
    facts = session_facts(tenant_id=tenant_id, session_id=session_id,
                          limit=settings.CONTINUUM_BUFFER_MAX_FACTS)
    working = row["working_state"] if isinstance(row["working_state"], dict) else {}
    doc = doc_normalized({
        "session_id": session_id, "v": row["working_version"], "goal": working.get("goal") or row["goal"] or "",
        "subgoals": working.get("subgoals"), "tools": working.get("tools"), "notes": working.get("notes"),
        "facts": facts,
        "anchors": [{"first_seq": a["first_seq"], "last_seq": a["last_seq"], "first_turn": a["first_turn"],
                     "last_turn": a["last_turn"], "text": a["text"], "tokens": a["token_count"],
                     "method": a["method"]} for a in anchors],
        "recent": recent, "anchored_seq": anchored_seq, "base_turns": base_turns,
    })
    # The same derived fields the script computes; database messages have no gaps.
    turns = sum(1 for m in recent if m["role"] == "user")
    doc.update(seq=max(row["message_seq"], anchored_seq), turns=base_turns + turns, unanchored_turns=turns,
               unanchored_tokens=sum(m["tokens"] for m in recent), updated_at=time.time())
    return doc
