"""Where a memory came from, in words: "you said on 8 May 2023 (session 3)"."""
from __future__ import annotations

from datetime import date, datetime



def date_render(value: datetime | date | None) -> str:
    """8 May 2023: unambiguous in every locale, and what people say."""
    if value is None:
        return "an unknown date"
    return f"{value.day} {value:%B %Y}"


_VERB = {
    "user_stated": "you said",
    "inferred": "inferred from what you said",
    "tool_result": "from a tool result",
    "system": "recorded",
}


def provenance_line(*, source_type: str, created_at: datetime | None, session_number: int | None,
                    dates: list[dict] | None = None) -> str:
    """ "you said on 8 May 2023 (session 3); "yesterday" = 7 May 2023": relative dates resolved for the reader."""
    line = f"{_VERB.get(source_type, 'recorded')} on {date_render(created_at)}"
    if session_number:
        line += f" (session {session_number})"
    relative = [d for d in (dates or []) if not any(ch.isdigit() for ch in d.get("phrase", ""))][:2]
    for d in relative:
        try:
            line += f'; "{d["phrase"]}" = {_relative_render(d)}'
        except (KeyError, ValueError):
            continue
    return line


def _relative_render(d: dict) -> str:
    value = date.fromisoformat(d["date"])
    granularity = d.get("granularity", "day")
    if granularity in ("week", "weekend"):
        return f"the week of {date_render(value)}"
    if granularity == "month":
        return f"{value:%B %Y}"
    if granularity == "year":
        return f"{value.year}"
    return date_render(value)
