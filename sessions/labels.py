"""A session named in words for a reviewer's page: its title, else what it was about, else when it was opened."""
from __future__ import annotations

from infra.labels import label_cut

TITLE_CHARS = 80


def session_words(session) -> str:
    """ "“Flights to Boston”", "the session about “Plan a weekend in Porto”", "the session opened 5 Dec 2026 20:31"."""
    if (session.title or "").strip():
        return f"“{label_cut(session.title, TITLE_CHARS)}”"
    if (session.goal or "").strip():
        return f"the session about “{label_cut(session.goal, TITLE_CHARS)}”"
    return f"the session opened {session.opened_at:%d %b %Y %H:%M}"
