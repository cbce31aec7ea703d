"""Where a memory comes from, as memory sees it: a message's id, session and time (and, for extraction, its words).

The orchestration layer builds these from stored messages, so nothing in memory reads the sessions app.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class SourceMessage:
    id: str
    session_id: str | None = None
    created_at: datetime | None = None
    role: str = "user"
    content: str = ""
    speaker: str = "The user"  # how the user is named in what is remembered ("Ada: ...")
    # The message before it in its session, read only when an extractor asks (the LLM pass).
    context_before: Callable[[], str] | None = None
