"""A memory's history in words, for a reviewer: "Superseded by → Dana's destination is Newark. (by the system)".

Each MemoryEvent says what changed in data (action, before and after snapshots, a note that may name another memory
by id). This module turns one into a sentence, the values that moved ("confidence 0.80 → 0.84"), who did it, and
the other memory it points to, read for all of a page's events in one query.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from tenants.models import Tenant

from .models import MemoryEvent, MemoryRecord

Action = MemoryEvent.Action
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMELINE_LIMIT = 200

# A moved value worth a reviewer's eye, with how it is written.
def _quoted(value) -> str:
    return f"“{value}”" if value else "none"


_TRACKED = (("status", "status", str), ("confidence", "confidence", "{:.2f}".format),
            ("importance", "importance", "{:.2f}".format), ("kind", "kind", str), ("subject", "subject", _quoted),
            ("value", "value", _quoted))

_CREATED = {
    "user_stated": "Created from what the user said",
    "inferred": "Inferred from what the user said",
    "assistant": "Recorded from what the assistant said",
    "tool_result": "Created from a tool result",
    "system": "Created by the system",
}

# A creation's actor that says who wrote the memory (memory.overview.memory_origin words it for the review queue).
_WRITTEN_BY = {"mcp": "Written by the client's model through MCP remember"}


@dataclass
class TimelineEntry:
    at: datetime
    action: str
    sentence: str
    actor: str
    changes: list[str] = field(default_factory=list)
    other_id: str | None = None  # the memory this event points to (superseded by, absorbed into, replaces)
    other_text: str = ""
    other_status: str = ""
    event_id: int | None = None


def actor_words(event: MemoryEvent) -> str:
    if event.actor_type == MemoryEvent.Actor.STAFF:
        return f"by staff {event.actor_id}" if event.actor_id else "by staff"
    if event.actor_type == MemoryEvent.Actor.END_USER:
        return "by the user"
    return f"by the system ({event.actor_id})" if event.actor_id else "by the system"


def event_other_id(event: MemoryEvent) -> str | None:
    """The id of the memory an event points to: what superseded it, what it was merged into, what it replaces."""
    after = event.after if isinstance(event.after, dict) else {}
    if event.action == Action.SUPERSEDED and after.get("superseded_by"):
        return str(after["superseded_by"])
    found = _UUID.findall(event.note or "")
    others = [f for f in found if f != str(event.memory_uuid)]
    return others[0] if others else None


def _changes(event: MemoryEvent) -> list[str]:
    before = event.before if isinstance(event.before, dict) else {}
    after = event.after if isinstance(event.after, dict) else {}
    out = []
    for key, label, fmt in _TRACKED:
        if key in before and key in after and before[key] != after[key] and before[key] is not None:
            try:
                out.append(f"{label} {fmt(before[key])} → {fmt(after[key])}")
            except (TypeError, ValueError):
                out.append(f"{label} {before[key]} → {after[key]}")
    return out


def event_sentence(event: MemoryEvent, *, source_type: str = "") -> str:
    """What happened, in words; the memory the event points to (if any) follows the sentence as a link."""
    note = event.note or ""
    before = event.before if isinstance(event.before, dict) else {}
    after = event.after if isinstance(event.after, dict) else {}
    action = event.action
    if action == Action.CREATED:
        # Who wrote it, where the event knows better than the source type: an MCP client's remember call is stored as
        # inferred (the model's words, not the user's), but nothing was inferred from what the user said.
        words = _WRITTEN_BY.get(event.actor_id or "") or _CREATED.get(source_type, "Created")
        if note.startswith("supersedes"):
            return f"{words}, replacing"
        return words
    if action == Action.REINFORCED:
        if "absorbed" in note:
            n = re.search(r"absorbed (\d+)", note)
            return f"Absorbed {n.group(1) if n else 'some'} near-duplicate(s), whose support it now carries"
        if "repeated events" in note:
            return "Reinforced by repeated statements"
        sim = re.search(r"similarity ([0-9.]+)", note)
        return "Reinforced: said again" + (f" (similarity {float(sim.group(1)):.2f})" if sim else "")
    if action == Action.UPDATED:
        if before.get("text") != after.get("text") and after.get("text") is not None:
            return f"Text edited: “{before.get('text', '')}” → “{after.get('text')}”"
        if "awaits review" in note:
            return "Held: its consolidation into a fact awaits review"
        return "Updated" + (f" ({note})" if note else "")
    if action == Action.SUPERSEDED:
        if note.startswith("stated before"):
            return "Outdated on arrival: said before the current value"
        if "merged" in note:
            return "Merged into"
        if "consolidated" in note:
            return "Consolidated into"
        return "Superseded by"
    if action == Action.EXPIRED:
        return "Expired: its lifetime ended" if "expires_at" in note else "Expired" + (f" ({note})" if note else "")
    if action == Action.DECAYED:
        return "Importance decayed (unused)"
    if action == Action.RESTORED:
        return f"Restored to {after.get('status', 'active')}"
    if action == Action.FORGOTTEN:
        return "Forgotten: removed for good" + (f" ({note})" if note else "")
    words = {Action.DELETED: "Deleted", Action.APPROVED: "Approved after review", Action.REJECTED: "Rejected in review"}
    return words.get(action, action.capitalize()) + (f" ({note})" if note and action == Action.DELETED else "")


def memory_timeline(*, tenant: Tenant, memory: MemoryRecord, limit: int = TIMELINE_LIMIT) -> list[TimelineEntry]:
    """The memory's events oldest first, in words; two queries whatever their number."""
    events = list(MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid=memory.pk)
                  .order_by("created_at", "id")[:limit])
    entries = events_in_words(tenant=tenant, events=events, source_type=memory.source_type)
    return entries


def events_in_words(*, tenant: Tenant, events: list[MemoryEvent], source_type: str = "") -> list[TimelineEntry]:
    """Entries for these events; the memories they point to are read in one query."""
    other_ids = {}
    for e in events:
        other = event_other_id(e)
        if other:
            try:
                other_ids[e.pk] = str(uuid.UUID(other))
            except ValueError:
                continue
    others = {str(m.pk): m for m in MemoryRecord.objects.for_tenant(tenant)
              .filter(pk__in=set(other_ids.values())).only("id", "text", "status")} if other_ids else {}
    entries = []
    for e in events:
        other = others.get(other_ids.get(e.pk, ""))
        entries.append(TimelineEntry(
            at=e.created_at, action=e.action, sentence=event_sentence(e, source_type=source_type),
            actor=actor_words(e), changes=_changes(e), other_id=str(other.pk) if other else other_ids.get(e.pk),
            other_text=other.text if other else "", other_status=other.status if other else "", event_id=e.pk))
    return entries
