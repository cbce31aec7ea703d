"""What one user's memory holds, read for a reviewer: counts by kind, source and status, the active facts and
preferences grouped by subject, the open goals, and the memories drawn from given messages.

Each function is one query (bounded by its limit), so a page built from them costs the same for a user with ten
memories as for one with ten thousand.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KT

from tenants.models import EndUser, Tenant

from .models import MemoryEvent, MemoryKind, MemoryRecord, MemoryStatus, SourceType
from .subjects import subject_label

# Who a memory's words come from, as a reviewer asks it ("said by").
SAID_BY = {
    SourceType.USER_STATED: "the user",
    SourceType.INFERRED: "inferred",
    SourceType.ASSISTANT: "the assistant",
    SourceType.TOOL_RESULT: "a tool",
    SourceType.SYSTEM: "the system",
}
GROUPED_KINDS = (MemoryKind.FACT, MemoryKind.PREFERENCE, MemoryKind.PROCEDURE)
_GROUP_ORDER = {MemoryKind.PROCEDURE: 0, MemoryKind.PREFERENCE: 1, MemoryKind.FACT: 2}


def said_by(source_type: str) -> str:
    return SAID_BY.get(source_type, source_type)


_REMOVALS = (MemoryEvent.Action.REJECTED, MemoryEvent.Action.DELETED, MemoryEvent.Action.RESTORED)


def with_removal(queryset: QuerySet) -> QuerySet:
    """The memories, each with `removed_by`: the action of its last rejection, deletion or restore, so a deleted row
    tells a review's rejection from a deletion (MemoryRecord.status_words). A subquery a row, no query more."""
    # Correlated with the outer row, its tenant included: the outer queryset is the tenant-scoped one.
    last = (MemoryEvent.objects.unscoped().filter(tenant=OuterRef("tenant"), memory_uuid=OuterRef("pk"),
                                                  action__in=_REMOVALS)
            .order_by("-created_at", "-id").values("action")[:1])
    return queryset.annotate(removed_by=Subquery(last))


def status_label(record: MemoryRecord) -> str:
    """A list's status cell: "Rejected" apart from "Deleted", the other statuses as the model names them."""
    words = record.status_words
    return "Rejected" if words == MemoryRecord.REJECTED_WORDS else record.get_status_display()


def memory_origin(*, extractor: str, created_by: str = "") -> str:
    """Where a memory with no source message came from, in words: a remember tool's call carries the model's
    words, not a message of the user's. `created_by` is the actor of its creation event ("mcp")."""
    if created_by == "mcp":
        return "no message: written by the client's model through MCP remember"
    if extractor == "remember":
        return "no message: written by the assistant's remember tool"
    if extractor == "import":
        return "no message: imported"
    return f"no message ({extractor or 'unknown'})"


# A user's memory in three layers. The distilled memory is what a reviewer reads first: the profile's kinds,
# instructions, preferences, facts and goals, and the decisions of session notes. Passages are the user's and the
# assistant's own words kept for search (episodic rows); session notes summarise a closed session's turns.
DISTILLED = "distilled"
PASSAGES = "passages"
NOTES = "notes"
LAYER_LABELS = {DISTILLED: "distilled memory", PASSAGES: "transcript passages", NOTES: "session notes"}
DISTILLED_KINDS = (MemoryKind.PROCEDURE, MemoryKind.PREFERENCE, MemoryKind.FACT, MemoryKind.GOAL)
DECISION_LABEL = "decision"


def layer_q(layer: str) -> Q:
    """The rows of one layer, as a queryset condition."""
    decision = Q(kind=MemoryKind.NOTE, metadata__note=DECISION_LABEL)
    if layer == DISTILLED:
        return Q(kind__in=[k.value for k in DISTILLED_KINDS]) | decision
    if layer == PASSAGES:
        return Q(kind=MemoryKind.EVENT)
    if layer == NOTES:
        return Q(kind=MemoryKind.NOTE) & ~decision
    raise ValueError(f"no layer {layer!r}")


def layer_of(kind: str, note_label: str | None) -> str:
    if kind == MemoryKind.EVENT:
        return PASSAGES
    if kind == MemoryKind.NOTE:
        return DISTILLED if note_label == DECISION_LABEL else NOTES
    return DISTILLED


@dataclass(frozen=True)
class MemoryCounts:
    by_kind: dict[str, int]  # active memories
    by_source: dict[str, int]  # active memories
    by_status: dict[str, int]  # all memories
    total: int
    by_layer: dict[str, int] = field(default_factory=dict)  # active memories
    passages_by_source: dict[str, int] = field(default_factory=dict)  # active passages: whose words they are
    decisions: int = 0  # active decision lines of session notes

    @property
    def active(self) -> int:
        return self.by_status.get(MemoryStatus.ACTIVE, 0)


def memory_counts(*, tenant: Tenant, user: EndUser) -> MemoryCounts:
    rows = (MemoryRecord.objects.for_tenant(tenant).filter(user=user).order_by()
            .values("status", "kind", "source_type").annotate(note=KT("metadata__note"), n=Count("pk")))
    by_kind: dict[str, int] = defaultdict(int)
    by_source: dict[str, int] = defaultdict(int)
    by_status: dict[str, int] = defaultdict(int)
    by_layer: dict[str, int] = dict.fromkeys(LAYER_LABELS, 0)
    passages: dict[str, int] = defaultdict(int)
    decisions = 0
    for row in rows:
        by_status[row["status"]] += row["n"]
        if row["status"] == MemoryStatus.ACTIVE:
            by_kind[row["kind"]] += row["n"]
            by_source[row["source_type"]] += row["n"]
            layer = layer_of(row["kind"], row["note"])
            by_layer[layer] += row["n"]
            if layer == PASSAGES:
                passages[row["source_type"]] += row["n"]
            if row["kind"] == MemoryKind.NOTE and layer == DISTILLED:
                decisions += row["n"]
    return MemoryCounts(by_kind=dict(by_kind), by_source=dict(by_source), by_status=dict(by_status),
                        total=sum(by_status.values()), by_layer=by_layer, passages_by_source=dict(passages),
                        decisions=decisions)


def decisions_select(*, tenant: Tenant, user: EndUser, limit: int = 20) -> list[MemoryRecord]:
    """The decision lines of the user's session notes, newest first, with their session."""
    return list(MemoryRecord.objects.for_tenant(tenant)
                .filter(user=user, status=MemoryStatus.ACTIVE, kind=MemoryKind.NOTE, metadata__note=DECISION_LABEL)
                .select_related("session").order_by("-created_at", "id")[:limit])


def layer_select(*, tenant: Tenant, user: EndUser, layer: str, limit: int = 100) -> list[MemoryRecord]:
    """The user's active rows of one layer, newest first, with the message and session each came from."""
    return list(MemoryRecord.objects.for_tenant(tenant).filter(layer_q(layer), user=user, status=MemoryStatus.ACTIVE)
                .select_related("source_message", "session").order_by("-created_at", "id")[:limit])


@dataclass
class SubjectGroup:
    """The active memories about one subject ("destination"); without a subject, those of one kind."""

    label: str
    kind: str
    memories: list[MemoryRecord] = field(default_factory=list)

    @property
    def repeats(self) -> bool:
        """Several rows saying the same thing: worth a merge."""
        return len(self.memories) > 1


def _subject_key(record: MemoryRecord) -> tuple[str, str]:
    subject = " ".join(record.subject.lower().split())
    return (subject, "") if subject else ("", record.kind)


def memories_by_subject(*, tenant: Tenant, user: EndUser, limit: int = 200) -> list[SubjectGroup]:
    """The user's active facts, preferences and instructions, grouped by subject (most recent first); memories
    without a subject close the list, grouped by kind. Source message and session come in the same query."""
    rows = (MemoryRecord.objects.for_tenant(tenant)
            .filter(user=user, status=MemoryStatus.ACTIVE, kind__in=[k.value for k in GROUPED_KINDS])
            .select_related("source_message", "session").order_by("-created_at", "id")[:limit])
    groups: dict[tuple[str, str], SubjectGroup] = {}
    for record in rows:
        key = _subject_key(record)
        if key not in groups:
            label = (subject_label(subject=record.subject, value=record.value, text=record.text) if key[0]
                     else f"other {MemoryKind(record.kind).label.lower()}s")
            groups[key] = SubjectGroup(label=label, kind=record.kind)
        groups[key].memories.append(record)
    # Instructions, then preferences, then facts, as the profile orders them; within each, subjects before the rest.
    return sorted(groups.values(), key=lambda g: (_GROUP_ORDER.get(g.kind, len(_GROUP_ORDER)),
                                                  not g.label or g.label.startswith("other "), g.label))


def goals_open(*, tenant: Tenant, user: EndUser, limit: int = 20) -> list[MemoryRecord]:
    """Active goals, newest first (a goal is closed by superseding, expiring or deleting it)."""
    return list(MemoryRecord.objects.for_tenant(tenant)
                .filter(user=user, status=MemoryStatus.ACTIVE, kind=MemoryKind.GOAL)
                .select_related("session", "source_message").order_by("-created_at", "id")[:limit])


def memories_from_messages(*, tenant: Tenant, user: EndUser, message_ids: list, since=None,
                           limit: int = 2000) -> dict[str, list[MemoryRecord]]:
    """message id -> the memories drawn from it: created from it, or reinforced or absorbed by it (its id in the
    memory's source messages). `since` bounds the second kind to memories changed after it (a session's opening),
    since a message can only have reinforced a memory after it was written."""
    wanted = {str(i) for i in message_ids}
    if not wanted:
        return {}
    cond = Q(source_message_id__in=list(wanted))
    if since is not None:  # only a reinforced (or absorbing) memory lists more than the message it came from
        cond |= Q(updated_at__gte=since, reinforcement_count__gt=0)
    rows = (with_removal(MemoryRecord.objects.for_tenant(tenant).filter(cond, user=user)
                         .only("id", "kind", "text", "status", "source_type", "confidence", "source_message_id",
                               "source_message_ids", "created_at"))
            .order_by("created_at", "id")[:limit])
    drawn: dict[str, list[MemoryRecord]] = defaultdict(list)
    for record in rows:
        sources = {str(record.source_message_id)} if record.source_message_id else set()
        sources |= {str(i) for i in record.source_message_ids or []}
        for mid in sources & wanted:
            drawn[mid].append(record)
    return dict(drawn)


@dataclass(frozen=True)
class StaleMention:
    """A goal that still names a value the user has since replaced ("NYC", now "Newark")."""

    old_value: str
    new_value: str
    new_memory_id: str


def goals_stale_mentions(*, tenant: Tenant, user: EndUser, goals: list[MemoryRecord],
                         limit: int = 200) -> dict[str, list[StaleMention]]:
    """goal id -> the replaced values its text still names. A goal is written from what was said when it was set,
    and supersede replaces the fact, not the goal's words; the reviewer sees the conflict here. One query."""
    if not goals:
        return {}
    replaced = (MemoryRecord.objects.for_tenant(tenant)
                .filter(user=user, status=MemoryStatus.SUPERSEDED, superseded_by__status=MemoryStatus.ACTIVE)
                .exclude(value="").exclude(subject="").select_related("superseded_by")
                .order_by("-status_changed_at", "id")[:limit])
    found: dict[str, list[StaleMention]] = defaultdict(list)
    for old in replaced:
        new = old.superseded_by
        if not new.value or _norm_words(new.value) == _norm_words(old.value):
            continue
        pattern = re.compile(rf"(?<!\w){re.escape(old.value.strip())}(?!\w)", re.IGNORECASE)
        for goal in goals:
            mention = StaleMention(old.value.strip(), new.value.strip(), str(new.pk))
            if pattern.search(goal.text) and mention not in found[str(goal.pk)]:
                found[str(goal.pk)].append(mention)
    return dict(found)


def _norm_words(text: str) -> str:
    return " ".join((text or "").lower().split())
