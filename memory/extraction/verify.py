"""Verify candidates against what the user already has: a near-duplicate reinforces, a contradiction supersedes,
and a contradiction older than the slot's value is kept as history only."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings

from infra.embedder import get_embedder
from infra.errors import ServiceUnavailable
from infra.vector_store import Scope, get_vector_store
from infra.vector_store.base import Search

from ..models import MemoryKind, MemoryRecord, MemoryStatus, SourceType
from .candidate import Candidate, value_normalize
from .updates import (
    change_sentences,
    changes_particulars,
    replaced_spans,
    same_topic,
    says_it_changed,
    says_no_more,
    statement_remainder,
)

log = logging.getLogger(__name__)

CREATE, REINFORCE, SUPERSEDE, OUTDATED, SKIP = "create", "reinforce", "supersede", "outdated", "skip"
# Kinds that state something about the user: one statement is one memory whichever of these an extractor filed it
# under (the remember tool's "fact" and the rules' "preference" for the same words). Goals and events stay apart.
STATEMENT_KINDS = ("fact", "preference", "procedure")
# What a statement of change can replace: whatever states the old value, the user's words, a distilled statement or
# a session note's line. A goal is not replaced by its being done.
REPLACEABLE_KINDS = (MemoryKind.EVENT, MemoryKind.NOTE, *STATEMENT_KINDS)
CHANGE_NEIGHBOURS = 8  # the memories a change is checked against, from each of the dense and the keyword search


def comparable_kinds(kind: str) -> list[str]:
    return list(STATEMENT_KINDS) if kind in STATEMENT_KINDS else [kind]


@dataclass
class Decision:
    candidate: Candidate
    action: str
    target_ids: list[str]  # the memory reinforced, the memories superseded, or the newer value that outdates it
    similarity: float | None = None
    # Of a superseded target that said more than the replaced value: what else it said, kept as a memory of its own.
    remainders: dict[str, str] = field(default_factory=dict)


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))  # both normalised by the embedder


def _nearest_same_kind(*, tenant, user, candidate: Candidate, vector: list[float]) -> tuple[str, float, str] | None:
    """The closest active memory of a comparable kind (id, cosine, text), or None. A store that is down must not
    block extraction: the check is skipped (the lifecycle merge job catches the duplicates later) and the write goes
    to the outbox."""
    try:
        hits = get_vector_store().search(Scope(tenant_id=str(tenant.pk), user_id=str(user.pk)), dense=vector,
                                         text=None, limit=1, kinds=comparable_kinds(candidate.kind),
                                         statuses=("active",))
    except ServiceUnavailable as exc:
        log.warning("duplicate check skipped, vector store unavailable: %s", exc)
        return None
    if not hits:
        return None
    return hits[0].memory_id, float(hits[0].score), str(hits[0].payload.get("text") or "")


_UNSEARCHED = object()
def _passages_of_one_message(a: Candidate, b: Candidate) -> bool:
    return a.kind == b.kind == MemoryKind.EVENT and "passage" in a.metadata and "passage" in b.metadata


def candidates_verify(*, tenant, user, candidates: list[Candidate], vectors: list[list[float]],
                      stated_at=None, who: str = "") -> list[Decision]:
    """One decision per candidate, in order. Pure reads: the caller persists the decisions in one transaction,
    holding the user's memory-write lock (memory/user_lock.py) from before this call.

    `stated_at`: when the candidates were said. A slot value stated after it wins whatever order the messages are
    extracted in (retries and parallel workers reorder them), so an older contradiction does not supersede it.
    `who`: the speaker's name, which two statements of theirs share without being about the same thing."""
    threshold = settings.MEMORY_DUPLICATE_SIMILARITY
    decisions: list[Decision] = []
    kept: list[tuple[Candidate, list[float]]] = []
    for candidate, vector in zip(candidates, vectors, strict=True):
        # The same thing said twice in one message is stored once. A message's passages are its consecutive parts,
        # never one thing twice, however alike they read (two halves of one log embed almost the same).
        if any(k.kind in comparable_kinds(candidate.kind) and not _passages_of_one_message(k, candidate)
               and _cosine(v, vector) >= threshold for k, v in kept):
            decisions.append(Decision(candidate, SKIP, []))
            continue
        kept.append((candidate, vector))
        decision = _decide(tenant=tenant, user=user, candidate=candidate, vector=vector, stated_at=stated_at,
                           threshold=threshold, who=who)
        displaced = _displaced_preferences(tenant=tenant, user=user, candidate=candidate)
        remainders: dict[str, str] = {}
        if decision.action in (CREATE, SUPERSEDE):
            remainders = _replaced_statements(tenant=tenant, user=user, candidate=candidate, vector=vector,
                                              stated_at=stated_at, who=who)
            displaced += list(remainders)
        displaced = [mid for mid in dict.fromkeys(displaced) if mid not in decision.target_ids]
        if displaced and decision.action in (CREATE, SUPERSEDE):
            decision = Decision(candidate, SUPERSEDE, [*decision.target_ids, *displaced],
                                remainders={mid: text for mid, text in remainders.items() if text and mid in displaced})
        decisions.append(decision)
    return decisions


def _displaced_preferences(*, tenant, user, candidate: Candidate) -> list[str]:
    """The liking a stated preference is preferred over ("coffee over tea" displaces "prefers tea"): one current
    value per subject, though the new statement files itself under what it prefers."""
    over = candidate.metadata.get("over")
    if candidate.kind != MemoryKind.PREFERENCE or not over or candidate.source_type == "assistant":
        return []
    return [str(mid) for mid in MemoryRecord.objects.for_tenant(tenant).filter(
        user=user, subject=over, status=MemoryStatus.ACTIVE, value="positive").values_list("id", flat=True)]


def _replaced_statements(*, tenant, user, candidate: Candidate, vector: list[float], stated_at,
                         who: str) -> dict[str, str]:
    """The earlier memories whose value the user's words say has changed ("we migrated the service from MySQL to
    PostgreSQL", "the standup moved again, it is at 11:00 now"): each a statement of what holds on a subject the change
    names, with the value it changed from or another value where the change names its new one (updates.replaces).
    Found among the change's nearest memories by meaning and by its words, so a long statement whose vector says
    many things is found by the words it shares with the change. Said before it only: a change extracted late does
    not replace what was said after it.

    Each replaced memory's id maps to what it says besides the replaced sentences ("" when nothing more): a long
    message is retired for its old value, and the rest of what it said stays a memory (statement_remainder)."""
    if candidate.kind != MemoryKind.EVENT or candidate.source_type == "assistant":
        return {}
    said = change_sentences(candidate.text)
    if not said:
        return {}
    scope = Scope(tenant_id=str(tenant.pk), user_id=str(user.pk))
    try:
        answers = get_vector_store().search_batch([
            Search(scope, dense=vector, limit=CHANGE_NEIGHBOURS, kinds=REPLACEABLE_KINDS, payload_keys=()),
            Search(scope, text=" ".join(said), limit=CHANGE_NEIGHBOURS, kinds=REPLACEABLE_KINDS, payload_keys=())])
    except ServiceUnavailable as exc:
        log.warning("change check skipped, vector store unavailable: %s", exc)
        return {}
    ids = list(dict.fromkeys(hit.memory_id for hits in answers for hit in hits))
    # What the assistant said is a record of the conversation (what it suggested, what it answered), never a value the
    # user holds: a user's change retires the user's own earlier statements, not the assistant's turns about them.
    rows = (MemoryRecord.objects.for_tenant(tenant).filter(user=user, pk__in=ids, status=MemoryStatus.ACTIVE)
            .exclude(source_type=SourceType.ASSISTANT))
    if stated_at is not None:
        rows = rows.filter(created_at__lt=stated_at)
    replaced = {}
    for mid, text in rows.values_list("id", "text"):
        spans = sorted({span for change in said for span in replaced_spans(change, text, who=who, alike=_alike)})
        if spans:
            replaced[str(mid)] = statement_remainder(text, spans, who=who)
    return replaced


def _alike(a: str, b: str) -> float:
    """How alike two sentences mean (the cosine of their embeddings); asked only of the few that the words of a
    change already tie to an earlier statement."""
    return _cosine(*get_embedder().embed([a, b]))


def _decide(*, tenant, user, candidate: Candidate, vector: list[float], stated_at, threshold: float,
            who: str) -> Decision:
    nearest = _UNSEARCHED  # the store is asked for the nearest memory at most once per candidate
    if candidate.subject:
        same_slot = list(MemoryRecord.objects.for_tenant(tenant).filter(user=user, subject=candidate.subject,
                                                     status=MemoryStatus.ACTIVE)
                         .order_by("-created_at").values_list("id", "value", "created_at", "text"))
        # The same statement again is the same memory, whatever value the model read off it this time: a small
        # model fills the slot of a remark loosely ("not sure whether X belongs in the web process" under
        # "web process", valued once "undecided" and once "background job"), and by value alone the second telling
        # superseded the first with the very same words.
        words = value_normalize(candidate.text)
        same_words = [str(mid) for mid, _, _, text in same_slot if value_normalize(text) == words]
        similarity = 1.0
        if not same_words and candidate.source_type != "assistant":
            # Nor whatever slot the model filed it under before, or none: the same words said in a later session
            # (or part of them) and filed under a slot this time would otherwise supersede the slot's other
            # memories and stand beside their own first telling.
            nearest = _nearest_same_kind(tenant=tenant, user=user, candidate=candidate, vector=vector)
            if nearest is not None and value_normalize(nearest[2]) == words:
                same_words = [nearest[0]]
            elif nearest is not None and nearest[1] >= threshold and says_no_more(candidate.text, nearest[2]):
                same_words, similarity = [nearest[0]], nearest[1]
        if same_words:
            return Decision(candidate, REINFORCE, same_words[:1], similarity)
        if same_slot:
            differing = [str(mid) for mid, value, _, _ in same_slot
                         if value_normalize(value) != value_normalize(candidate.value)]
            agreeing = [str(mid) for mid, _, _, _ in same_slot if str(mid) not in differing]
            newer = [str(mid) for mid, _, created, _ in same_slot
                     if str(mid) in differing and stated_at is not None and created > stated_at]
            if newer:
                return Decision(candidate, OUTDATED, newer[:1])
            if differing:
                return Decision(candidate, SUPERSEDE, differing)
            if agreeing:
                return Decision(candidate, REINFORCE, agreeing[:1], 1.0)
    if candidate.source_type == "assistant":
        # Never folded into an earlier memory: a reinforcement would count the assistant's words as the user's
        # (the nearest event may be the user saying the same thing).
        return Decision(candidate, CREATE, [])
    if nearest is _UNSEARCHED:
        nearest = _nearest_same_kind(tenant=tenant, user=user, candidate=candidate, vector=vector)
    if nearest is None:
        return Decision(candidate, CREATE, [])
    target, similarity, text = nearest
    if value_normalize(text) == value_normalize(candidate.text):
        # The same words again (or this very message extracted again): one memory.
        return Decision(candidate, REINFORCE, [target], similarity)
    if similarity >= threshold:
        # Near-identical words that change a number, a name or a negation are news about the same thing: the later
        # telling is current. An episode that adds words of its own is its own episode beside the first.
        if changes_particulars(candidate.text, text):
            return Decision(candidate, SUPERSEDE, [target], similarity)
        if candidate.kind != MemoryKind.EVENT or says_no_more(candidate.text, text):
            return Decision(candidate, REINFORCE, [target], similarity)
        return Decision(candidate, CREATE, [])
    if (similarity >= settings.MEMORY_CHANGE_SIMILARITY and says_it_changed(candidate.text)
            and same_topic(candidate.text, text, who=who)):
        # "I stopped eating meat" after "I eat meat": a statement that says it replaces what held before replaces
        # the nearest memory on its topic.
        return Decision(candidate, SUPERSEDE, [target], similarity)
    return Decision(candidate, CREATE, [])
