"""What a model reads of retrieved memories, and what that costs: one block, grouped by where the memories came from.

Memories are shown under one heading per session and date ("8 May 2023, session 3:"), the groups oldest first and a
group's memories in the order they were said. A per-memory provenance line ("you said on 8 May 2023 (session 3)")
repeats the same words for every hit of a session and cost about as much as a short memory; a heading says it once
and still puts the date beside every memory, and a chronological block lets a model reason about order and time.

Retrieval fills its token budget with `BlockBudget` (each memory's line, plus its heading when it opens a group), so
a budget counts what the model reads: text, neighbouring turns, dates and headings. The composer renders the same
block with `memories_block`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import date, datetime

from django.conf import settings

from infra.tokens import count_tokens

from .provenance import date_render, relative_dates_render

MIN_LINE_TOKENS = 6  # "- Name: a few words" and its newline: below this no memory fits
# How a memory's source is said when its words do not already say it (an event is "Name: what was said").
_SOURCE_NOTE = {"inferred": "inferred", "tool_result": "from a tool result", "system": "recorded"}


def group_key(m) -> tuple:
    """Memories said in one session on one day share a heading (both people of a conversation included)."""
    created: datetime | None = m.created_at
    return (created.date() if created else None, m.session_number)


def group_heading(m) -> str:
    return _heading(*group_key(m))


@functools.lru_cache(maxsize=4096)
def _heading(day: date | None, session_number: int | None) -> str:
    when = date_render(day) if day else "Undated"
    return f"{when}, session {session_number}:" if session_number else f"{when}:"


def with_resolved_dates(text: str, dates: list[dict] | None) -> str:
    """A line's words followed by its first relative dates resolved ('... yesterday. ("yesterday" = 7 May 2023)')."""
    resolved = relative_dates_render(dates)
    return f"{text} ({resolved})" if resolved else text


def memory_line(m) -> str:
    """One memory as the model reads it: its words, what kind of record it is unless it is a quote, resolved
    relative dates, and any neighbouring turns shown with it.

    A neighbouring turn is a line of its own, where it was said: the turn before the hit above it, the turn after
    below, as a transcript reads (what was asked, then the answer), not a note under the hit."""
    notes = [] if m.kind == "event" else [m.kind]
    # A session note's line is the system's by definition: "[note]" says where it came from.
    if m.source_type in _SOURCE_NOTE and m.kind != "note":
        notes.append(_SOURCE_NOTE[m.source_type])
    replaced = getattr(m, "valid_to", None)
    if replaced is not None:  # shown because the question asks what held before: the model must not take it as now
        notes.append(f"replaced on {date_render(replaced.date())}")
    line = f"- {'[' + ', '.join(notes) + '] ' if notes else ''}{m.text}"
    line = with_resolved_dates(line, m.dates)
    neighbours = m.neighbours or []
    if not neighbours:
        return line
    before = getattr(m, "neighbours_before", 0)
    return "\n".join([*(f"- {n}" for n in neighbours[:before]), line, *(f"- {n}" for n in neighbours[before:])])


def memories_block(memories: list, *, clean=lambda s: s) -> str:
    """The memories grouped under their headings, each group in the order said (the better ranked first when two have
    one time). The groups come oldest first, or, with MEMORY_BLOCK_ORDER "relevance", in the order of their best
    memory's rank (`memories` comes best first), so the model meets the best match first. `clean` strips markup from
    shown text."""
    groups: dict[tuple, list] = {}
    ordered = sorted(enumerate(memories), key=lambda im: (im[1].created_at is None,
                                                          im[1].created_at or datetime.min, im[0]))
    for _, m in ordered:
        groups.setdefault(group_key(m), []).append(m)
    members_of = list(groups.values())
    if settings.MEMORY_BLOCK_ORDER == "relevance":
        rank = {id(m): i for i, m in enumerate(memories)}
        members_of.sort(key=lambda members: min(rank[id(m)] for m in members))
    lines = []
    for members in members_of:
        lines.append(clean(group_heading(members[0])))
        lines += [clean(memory_line(m)) for m in members]
    return "\n".join(lines)


@dataclass
class BlockBudget:
    """Tokens the block will take as memories are added: a line each (and its newline), a heading per new group.

    Token counts of parts joined by newlines add up to the count of the whole to within a token or so per join;
    the composer counts the rendered block again and drops the last memories if that ever tips it over."""

    limit: int | None
    used: int = 0
    _groups: set = field(default_factory=set)

    def cost(self, m) -> int:
        key = group_key(m)
        heading = 0 if key in self._groups else count_tokens(_heading(*key)) + 1
        return heading + count_tokens(memory_line(m)) + 1

    def fits(self, cost: int) -> bool:
        return self.limit is None or self.used + cost <= self.limit

    def room(self) -> int:
        return 10**9 if self.limit is None else self.limit - self.used

    def full(self) -> bool:
        """Too little room left for any memory line (a marker, a name and a few words)."""
        return self.limit is not None and self.limit - self.used < MIN_LINE_TOKENS

    def add(self, m, cost: int) -> None:
        self._groups.add(group_key(m))
        self.used += cost
