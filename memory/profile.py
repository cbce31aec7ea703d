"""The standing profile: a user's active preferences, instructions and key facts, one current value per subject.

A standing instruction ("always answer in metric units") must reach every turn, whether or not the turn's words
resemble the turn where it was given; similarity search alone cannot promise that. The profile is therefore read
by kind and status, not by query, and shown in a bounded section of its own.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, fields
from datetime import datetime

from django.db import connection

from infra.sql import column, epoch_micros, from_micros, ids_as_text, native, table, uuid_text
from infra.tokens import count_tokens
from tenants.models import EndUser, Tenant

from .models import MemoryKind, MemoryRecord, MemoryStatus, SourceType
from .provenance import provenance_line

# Procedures are how the user wants things done (instructions), then what they like, then what is true of them.
PROFILE_KINDS = (MemoryKind.PROCEDURE, MemoryKind.PREFERENCE, MemoryKind.FACT)
_KIND_ORDER = {k.value: i for i, k in enumerate(PROFILE_KINDS)}
# The assistant's own words are never facts about the user; what the user said outranks what was inferred.
PROFILE_SOURCES = (SourceType.USER_STATED, SourceType.SYSTEM, SourceType.TOOL_RESULT, SourceType.INFERRED)
_SOURCE_ORDER = {s.value: i for i, s in enumerate(PROFILE_SOURCES)}
PROFILE_SCAN_MAX = 500  # rows read per call: a profile is a summary, not an archive
# A preference or fact stands in front of every turn only when the assistant must act on it or the user holds to it:
# a choice (how they want things done or not done: prefer, avoid, always, never, ...), anything the user or staff
# asked to be remembered, and anything said again (reinforced). A liking said once ("loves the yellow leaves") or a
# fact said once ("my dream is to ...") belongs to its conversation: retrieval shows it when a turn is about it, and a
# fixed section would spend every turn's budget on it.
_CHOICE = re.compile(r"\b(?:prefers?|preferred|avoids?|never|always|usually|rarely|dislikes?|hates?|can't stand|"
                     r"doesn't (?:like|want)|won't|refuses?)\b", re.I)
EXPLICIT_EXTRACTORS = ("remember", "manual")  # the remember tool; the REST API's and the admin's own memories


def _standing(m) -> bool:
    if m.kind == MemoryKind.PROCEDURE or m.reinforcement_count > 0 or m.extractor in EXPLICIT_EXTRACTORS:
        return True
    return m.kind == MemoryKind.PREFERENCE and bool(_CHOICE.search(m.text))


# A profile line is read without the conversation it came from, so it must say what it is about: a liking whose
# object is a pronoun or a clause about the moment ("loves it", "loves how you put it", "loves that you came") is
# left to retrieval, which shows it with its date and the turns around it.
_UNANCHORED = re.compile(r"^likes:\s*(?:it|its|it's|that|this|these|those|them|they|to|how|what|when|where|why|is|"
                         r"was|you|your|so|too)\b", re.I)


@dataclass(frozen=True)
class ProfileEntry:
    memory_id: str
    kind: str
    subject: str
    text: str
    source_type: str
    confidence: float
    created_at: datetime
    session_id: str | None
    source_message_id: str | None

    @property
    def provenance(self) -> str:
        return provenance_line(source_type=self.source_type, created_at=self.created_at, session_number=None)


@dataclass(frozen=True)
class _Row(ProfileEntry):
    """What the profile reads of a memory: its entry, and what decides whether it stands (_standing)."""
    reinforcement_count: int = 0
    extractor: str = ""


_FIELDS = tuple(f.name for f in fields(_Row))
_ENTRY_FIELDS = tuple(f.name for f in fields(ProfileEntry))
_ID_FIELDS = ("memory_id", "session_id", "source_message_id")


def _column(name: str) -> str:
    return "id" if name == "memory_id" else name


def _key(m: _Row) -> tuple:
    """Two rows say the same thing when they share kind and subject, or (without a subject) their words."""
    if m.subject:
        return (m.kind, m.subject.strip().lower())
    return (m.kind, "", " ".join(m.text.lower().split()).rstrip("."))


def profile_select(*, tenant: Tenant, user: EndUser, limit: int = 30) -> list[ProfileEntry]:
    """The user's standing profile, most binding first: per kind, stated before inferred, then the more
    confident and the newer. Only the newest active row of a subject is kept (supersede keeps it current), and only
    what stands (_standing: instructions, choices, what was asked to be remembered or said again)."""
    newest: dict[tuple, _Row] = {}
    for m in profile_rows(tenant=tenant, user=user):  # newest first: the first row of a key is its current value
        if m.kind == MemoryKind.PREFERENCE and _UNANCHORED.match(m.subject or ""):
            continue
        newest.setdefault(_key(m), m)
    # A subject's current value stands or not; an older value never stands in for it.
    chosen = sorted((m for m in newest.values() if _standing(m)),
                    key=lambda m: (_KIND_ORDER[m.kind], _SOURCE_ORDER[m.source_type], -m.confidence,
                                   -m.created_at.timestamp()))
    return [ProfileEntry(**{name: getattr(m, name) for name in _ENTRY_FIELDS}) for m in chosen[:limit]]


def profile_rows(*, tenant: Tenant, user: EndUser) -> list[_Row]:
    """The user's active memories of the profile's kinds and sources, newest first, at most PROFILE_SCAN_MAX.

    Read on every turn: on PostgreSQL as one hand-written statement (the ORM compiling this query costs several times
    what the database spends answering it), elsewhere through the ORM; the same rows either way (a test compares)."""
    if not native():
        return profile_rows_orm(tenant=tenant, user=user)
    with connection.cursor() as cursor:
        cursor.execute(_profile_sql(), [tenant.pk, user.pk, MemoryStatus.ACTIVE, list(_KIND_ORDER),
                                        list(_SOURCE_ORDER), PROFILE_SCAN_MAX])
        rows = cursor.fetchall()
    at = _FIELDS.index("created_at")
    return [_Row(*values[:at], from_micros(values[at]), *values[at + 1:]) for values in rows]


def profile_rows_orm(*, tenant: Tenant, user: EndUser) -> list[_Row]:
    found = (MemoryRecord.objects.for_tenant(tenant)
             .filter(user=user, status=MemoryStatus.ACTIVE, kind__in=list(_KIND_ORDER),
                     source_type__in=list(_SOURCE_ORDER))
             .order_by("-created_at", "id").values_list(*map(_column, _FIELDS))[:PROFILE_SCAN_MAX])
    return [_Row(**ids_as_text(dict(zip(_FIELDS, values, strict=True)), _ID_FIELDS)) for values in found]


@functools.cache
def _profile_sql() -> str:
    r = MemoryRecord
    cols = []
    for name in _FIELDS:
        col = f"r.{column(r, _column(name))}"
        cols.append(uuid_text(col) if name in _ID_FIELDS else epoch_micros(col) if name == "created_at" else col)
    return (f"SELECT {', '.join(cols)} FROM {table(r)} r "
            f"WHERE r.{column(r, 'tenant')} = %s AND r.{column(r, 'user')} = %s AND r.{column(r, 'status')} = %s "
            f"AND r.{column(r, 'kind')} = ANY(%s) AND r.{column(r, 'source_type')} = ANY(%s) "
            f"ORDER BY r.{column(r, 'created_at')} DESC, r.{column(r, 'id')} LIMIT %s")


def profile_line(entry: ProfileEntry) -> str:
    return f"- [{entry.kind}] {entry.text} ({entry.provenance})"


def profile_render(entries: list[ProfileEntry], *, limit_tokens: int,
                   header: str = "What you know about the user (standing profile):",
                   instructions_header: str | None = None) -> tuple[str, int, list]:
    """The profile as one section within limit_tokens: whole lines in rank order, nothing cut mid-line.
    Returns (text, tokens, entries shown).

    instructions_header: the user's instructions (procedures, ranked first) are shown under it and the rest under
    `header`, so wording that asks the model to follow what it reads stands only above what the user asked it to do,
    never above a liking or a fact."""
    if not entries:
        return "", 0, []
    lines, kept = [], []
    for e in entries:
        heading = instructions_header if instructions_header and e.kind == MemoryKind.PROCEDURE else header
        added = ([heading] if heading not in lines else []) + [profile_line(e)]
        candidate = "\n".join(lines + added)
        if count_tokens(candidate) > limit_tokens:
            break
        lines += added
        kept.append(e)
    if not kept:
        return "", 0, []
    text = "\n".join(lines)
    return text, count_tokens(text), kept
