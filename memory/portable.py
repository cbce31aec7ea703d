"""Memories read from a portable export (orchestration/portable.py parses the file and recreates their source
messages): what one carries, and whether it can be imported. memory.actions.memories_import writes them.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from infra.errors import AppError

from .actions import memory_text_clean
from .models import MemoryKind, MemoryStatus, SourceType

# Statuses an export carries over; a deleted memory is not exported (the user removed it).
IMPORTED_STATUSES = (MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED, MemoryStatus.PENDING_REVIEW, MemoryStatus.EXPIRED)


@dataclass
class ImportedMemory:
    id: uuid.UUID
    kind: str
    text: str
    status: str
    source_type: str
    created_at: datetime
    subject: str = ""
    value: str = ""
    confidence: float = 0.8
    importance: float = 0.5
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    expires_at: datetime | None = None
    session_id: uuid.UUID | None = None
    source_message_id: uuid.UUID | None = None
    source_message_ids: list[str] = field(default_factory=list)
    superseded_by: uuid.UUID | None = None
    access_count: int = 0
    last_accessed_at: datetime | None = None
    reinforcement_count: int = 0
    extractor: str = "import"
    extractor_version: str = "1"
    metadata: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)  # {"action", "actor_type", "actor_id", "before", "after", ...}


def memory_import_check(item: ImportedMemory) -> str | None:
    """Why this memory cannot be imported (None when it can): an unknown kind, status or source, or a text that is
    empty, too long or only a secret."""
    if item.kind not in MemoryKind.values:
        return f"unknown kind {item.kind!r}"
    if item.status not in IMPORTED_STATUSES:
        return f"status {item.status!r} is not imported"
    if item.source_type not in SourceType.values:
        return f"unknown source type {item.source_type!r}"
    try:
        memory_text_clean(item.text)
    except AppError as exc:
        return exc.message
    return None
