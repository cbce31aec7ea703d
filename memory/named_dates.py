"""The time a question names ("what did I say on 7 July 2023?", "what did we discuss yesterday?", "on 2024-03-05"):
a window of said times that retrieval searches on its own, beside the question as a whole.

A day named by a person is a day in their own time zone while messages are stored in UTC, so a day's window reaches
a day to each side; a week, a weekend or a month is its span with the same margin. A year is too wide to focus a
search, so it names no window. Relative phrases resolve against the time of the question."""
from __future__ import annotations

import calendar
import re
from datetime import date, datetime, time, timedelta, timezone

from .extraction.rules import date_phrase_in, resolve_dates

MARGIN = timedelta(days=1)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def _span(d: date, granularity: str) -> tuple[date, date] | None:
    if granularity == "day":
        return d, d + timedelta(days=1)
    if granularity in ("week", "weekend"):
        start = d - timedelta(days=d.weekday())
        return start, start + timedelta(days=7)
    if granularity == "month":
        first = d.replace(day=1)
        return first, first + timedelta(days=calendar.monthrange(d.year, d.month)[1])
    return None


def said_window(text: str, now: datetime) -> tuple[datetime, datetime] | None:
    """[start, end) in UTC covering every day, week or month the text names, or None when it names none."""
    spans = []
    for m in _ISO.finditer(text or ""):
        try:
            spans.append(_span(date(int(m.group(1)), int(m.group(2)), int(m.group(3))), "day"))
        except ValueError:
            continue
    if date_phrase_in(text or ""):
        spans += [_span(date.fromisoformat(d["date"]), d["granularity"]) for d in resolve_dates(text, now)]
    # Nothing is said in the future: a day still to come ("next Tuesday", a goal's date) names no window.
    spans = [s for s in spans if s is not None and s[0] <= now.date()]
    if not spans:
        return None
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    at = lambda d: datetime.combine(d, time(0), tzinfo=timezone.utc)  # noqa: E731
    return at(start) - MARGIN, at(end) + MARGIN
