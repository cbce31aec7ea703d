"""Retrieval of long-term memories for a turn: the interface the composer calls (filled in by the memory work)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class RetrievedMemory:
    memory_id: str
    kind: str
    text: str
    score: float
    source_type: str
    created_at: datetime
    session_id: str | None
    source_message_id: str | None
    provenance: str  # e.g. "you said on 8 May 2023 (session 3)"
    token_count: int = 0
    neighbours: list[str] = field(default_factory=list)  # neighbouring turns when an episodic hit is expanded


def memory_retrieve(*, tenant, user, query: str, goal: str = "", k: int = 10, token_budget: int | None = None,
                    exclude_session_id=None) -> list[RetrievedMemory]:
    """Active, unexpired memories of this tenant's user, best first. Raises ServiceUnavailable if Qdrant is down."""
    return []
