"""A closed session's note, stored as memories: one per line, each line's provenance the turns it cites.

Written once per session: the lines' ids derive from the session (uuid5), so two runs of the close task collide on
the same rows and the first one's note stands; a note once written (a line of it has a row, or its first line a
history event, which outlives a forgotten line) is never written again, so a line the user deleted does not come
back.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction

from infra.secrets import REDACTED, secrets_redact
from tenants.models import EndUser, Tenant

from ..extraction.candidate import Candidate
from ..extraction.injection import injection_screen
from ..extraction.rules import resolve_dates
from ..models import MemoryEvent, MemoryKind, MemoryRecord, SourceType
from ..outbox import outbox_enqueue
from ..sources import SourceMessage
from .create import _create_locked
from .records import MEMORY_NAMESPACE, MEMORY_TEXT_MAX_CHARS, _new_record

log = logging.getLogger(__name__)

# A line rests on a few turns; one that needs more is a topic of the session, not a line of its note.
NOTE_LINE_MAX_SOURCES = 3
NOTE_LINE_CONFIDENCE = 0.7  # as a verbatim turn's event: what was said, not that it stays true
NOTE_LINE_IMPORTANCE = 0.4


@dataclass(frozen=True)
class NoteLine:
    text: str
    label: str  # topic | decision | fact | open
    sources: tuple[SourceMessage, ...]  # the turns it comes from, the most direct first


def note_line_id(session_id, index: int) -> uuid.UUID:
    return uuid.uuid5(MEMORY_NAMESPACE, f"session-note:{session_id}:{index}")


def session_note_records(*, tenant: Tenant, session_id) -> list[MemoryRecord]:
    return list(MemoryRecord.objects.for_tenant(tenant).filter(session_id=session_id, kind=MemoryKind.NOTE)
                .order_by("created_at", "id"))


def session_note_written(*, tenant: Tenant, session_id) -> bool:
    """Whether this session has its note: a note line of it exists (written here, or brought by a portable import
    with its session), or the history of its first line does (the line was forgotten)."""
    first = note_line_id(session_id, 0)
    return (MemoryRecord.objects.for_tenant(tenant).filter(session_id=session_id, kind=MemoryKind.NOTE).exists()
            or MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid=first).exists())


def _clean(line: NoteLine, who: str) -> str | None:
    """The line as it may be stored: no secret, nothing addressed to the assistant (a note is read back into later
    contexts, as any memory is), within a memory's length."""
    text = secrets_redact(" ".join(line.text.split())).text
    if not text.replace(REDACTED, "").strip(" .,:;-"):
        return None
    screening = injection_screen(text, who=who)
    if screening.found:
        return None
    return text[:MEMORY_TEXT_MAX_CHARS]


def session_note_write(*, tenant: Tenant, user: EndUser, session_id, lines: list[NoteLine], method: str,
                       said_at: datetime | None = None) -> list[MemoryRecord]:
    """Store the session's note lines (once; a rerun returns what the first run wrote). Each line is a memory of kind
    `note` with source type `system`, its provenance the turns it cites (source_message_ids, the first as
    source_message), its time that of its first turn (said_at when it cites none), and the dates its words refer to
    resolved against that time."""
    if session_note_written(tenant=tenant, session_id=session_id):
        return session_note_records(tenant=tenant, session_id=session_id)
    who = (user.display_name or "").strip()
    records = []
    for line in lines:
        text = _clean(line, who)
        sources = tuple(s for s in line.sources if s.session_id is None or str(s.session_id) == str(session_id))
        if text is None or not sources:
            continue
        first = sources[0]
        at = first.created_at or said_at
        metadata = {"note": line.label, "method": method}
        dates = resolve_dates(text, at) if at is not None else []
        if dates:
            metadata["dates"] = dates
        candidate = Candidate(MemoryKind.NOTE, text, source_type=SourceType.SYSTEM, confidence=NOTE_LINE_CONFIDENCE,
                              importance=NOTE_LINE_IMPORTANCE, extractor=f"session_note:{method}", metadata=metadata)
        record = _new_record(tenant=tenant, user=user, candidate=candidate, source=first, session_id=session_id,
                             memory_id=note_line_id(session_id, len(records)), created_at=at)
        record.source_message_ids = list(dict.fromkeys(str(s.id) for s in sources))[:NOTE_LINE_MAX_SOURCES]
        records.append(record)
    if not records:
        return []
    try:
        with transaction.atomic():
            for record in records:
                _create_locked(record, actor_type=MemoryEvent.Actor.SYSTEM, actor_id="", note=f"session note, {method}")
            outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=[str(r.pk) for r in records])
    except IntegrityError:  # another run wrote the note first: that one stands
        log.info("the note of session %s was written by another run", session_id)
        return session_note_records(tenant=tenant, session_id=session_id)
    return records
