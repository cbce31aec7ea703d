"""The curated context buffer of an open session in Redis (filled in by the sessions work)."""
from __future__ import annotations


def buffer_append_messages(*, tenant_id: str, user_id: str, session_id: str, message_ids: list[str]) -> None:
    """Placeholder until the buffer lands: the database already holds every message."""
    return None
