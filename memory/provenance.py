"""Where a memory came from, in words: "you said on 8 May 2023 (session 3)"."""
from __future__ import annotations

from datetime import date, datetime

from sessions.models import Session


def date_render(value: datetime | date | None) -> str:
    """8 May 2023: unambiguous in every locale, and what people say."""
    if value is None:
        return "an unknown date"
    return f"{value.day} {value:%B %Y}"


def session_numbers(*, tenant, user_ids) -> dict[str, int]:
    """Each session's ordinal among its user's sessions, oldest first (the user's "session 3")."""
    numbers: dict[str, int] = {}
    counters: dict[str, int] = {}
    rows = (Session.objects.filter(tenant=tenant, user_id__in=list(user_ids))
            .order_by("opened_at", "id").values_list("id", "user_id"))
    for sid, uid in rows:
        counters[str(uid)] = counters.get(str(uid), 0) + 1
        numbers[str(sid)] = counters[str(uid)]
    return numbers


_VERB = {
    "user_stated": "you said",
    "inferred": "inferred from what you said",
    "tool_result": "from a tool result",
    "system": "recorded",
}


def provenance_line(*, source_type: str, created_at: datetime | None, session_number: int | None) -> str:
    line = f"{_VERB.get(source_type, 'recorded')} on {date_render(created_at)}"
    if session_number:
        line += f" (session {session_number})"
    return line
