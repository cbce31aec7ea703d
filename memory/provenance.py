"""Where a memory came from, in words: "you said on 8 May 2023 (session 3)"."""
from __future__ import annotations

import functools
from datetime import date, datetime


def date_render(value: datetime | date | None) -> str:
    """8 May 2023: unambiguous in every locale, and what people say."""
    if value is None:
        return "an unknown date"
    return _day_render(value.year, value.month, value.day)


@functools.lru_cache(maxsize=4096)
def _day_render(year: int, month: int, day: int) -> str:
    return f"{day} {date(year, month, day):%B %Y}"  # strftime per call costs more than the rest of a memory line


_VERB = {
    "user_stated": "you said",
    "inferred": "inferred from what you said",
    "tool_result": "from a tool result",
    "system": "recorded",
    "assistant": "the assistant said",
}


def provenance_line(*, source_type: str, created_at: datetime | None, session_number: int | None,
                    dates: list[dict] | None = None) -> str:
    """ "you said on 8 May 2023 (session 3); "yesterday" = 7 May 2023": relative dates resolved for the reader."""
    line = f"{_VERB.get(source_type, 'recorded')} on {date_render(created_at)}"
    if session_number:
        line += f" (session {session_number})"
    resolved = relative_dates_render(dates)
    return f"{line}; {resolved}" if resolved else line


def relative_dates_render(dates: list[dict] | None) -> str:
    """ '"yesterday" = 7 May 2023': the first two relative phrases of a memory resolved against when it was said
    (absolute dates are left alone: the reader has them already)."""
    parts = []
    for d in [d for d in (dates or []) if not any(ch.isdigit() for ch in d.get("phrase", ""))][:2]:
        try:
            parts.append(f'"{d["phrase"]}" = {_relative_render(d)}')
        except (KeyError, ValueError):
            continue
    return "; ".join(parts)


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
