"""Retrieval of long-term memories for a turn: tenant- and user-scoped hybrid search, fusion, reranking,
neighbour expansion under a token budget, and provenance.

How a query is answered, and why:
1. The query is the new input plus the current goal. With an LLM configured it is rewritten, and a question that
   needs several separate facts is also split into parts, each searched on its own (query.py). A question
   that names the people in scope is also searched without their names, as one more part: a name pulls its owner's
   shortest memories, which are mostly the name.
2. Dense and BM25 candidates are fetched separately for each user in scope (the store adds tenant and user to
   every filter; only active, unexpired memories). Keeping the two lists apart lets us fuse on scores rather
   than ranks: each list is standardised (z-scores over what it returned) and the two are added, so a hit that
   both retrievers like clearly beats one that only one of them ranks first. With parts, each search is fused on
   its own and a candidate keeps its best (ranking.py, as are steps 3 and 4's scores).
3. Topic locality: turns of a conversation about the matching topic are relevant together, so each candidate
   also gets the mean score of the best candidates of its own session (a session prior).
4. Small, bounded adjustments for recency, confidence, importance and access count (within tiers of the shortlist,
   so a larger budget's ranking extends a smaller one's); then one memory per source turn (its event, the facts
   drawn from it and its other passages say the same thing or sit in the same message), and none whose every
   sentence was shown already (a paragraph pasted into every session), best first until k or the token budget,
   stopping at the first that does not fit: a larger budget never returns less.
5. The budget counts what the model reads (memory/rendering.py): each memory's line with its resolved dates and
   its session heading when it opens one. Under a budget a long memory is shown as its best sentences for the query,
   with a marker where text was cut (memory/excerpts.py), so the budget holds evidence from more turns. The strongest
   episodic hits are shown with the turns right before and after them (what was asked, what was answered) when that
   still fits: those turns often hold the answer.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from django.conf import settings
from django.db import transaction

from infra import clock
from infra.embedder import embed_soon
from infra.errors import ServiceUnavailable
from infra.sentences import sentences
from infra.support import content_words
from infra.task_queue import task_enqueue
from infra.tokens import count_tokens
from infra.vector_store import ScopeMissing

from ..excerpts import CUT, excerpt, key_weights, query_keys
from ..extraction.classify import informative_text, is_phatic
from ..extraction.rules import resolve_dates
from ..models import MemoryKind
from ..named_dates import said_window
from ..provenance import provenance_line
from ..rendering import BlockBudget, with_resolved_dates
from .query import QueryPlan, query_build, query_plan, without_names
from .ranking import (
    Ask,
    Candidate,
    Found,
    candidates_fuse,
    candidates_gather,
    candidates_shortlist,
    score_adjusted,
    score_parts,
    scores_diversify,
    scores_thread_order,
)
from .reads import memory_rows, replacing_ids, turn_event_ids

log = logging.getLogger(__name__)

NEIGHBOUR_MAX_TOKENS = 120  # a neighbouring turn longer than this is not shown


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
    neighbours_before: int = 0  # how many of them come before it (the rest come after)
    user_id: str | None = None
    confidence: float = 0.0
    source_message_ids: list[str] = field(default_factory=list)  # the most direct source turns first
    neighbour_message_ids: list[str] = field(default_factory=list)
    session_number: int | None = None  # the session's ordinal among its user's sessions ("session 3")
    dates: list[dict] = field(default_factory=list)  # dates its words refer to, resolved when it was said
    score_parts: dict = field(default_factory=dict)  # how the score was made (score_parts): what a receipt records
    valid_from: datetime | None = None  # when it held (read for a retrieval as_of a time)
    valid_to: datetime | None = None



# Reads the turns right before and after given messages: (tenant=, message_ids=) -> rows with pk, session_id,
# seq, role, name, content, session__user_id and `around` (the message a turn is next to). The conversations
# package provides it (sessions.turn_reads.turns_around); memory never reads messages itself.
TurnsAround = Callable[..., list[dict]]


def _neighbours(*, tenant, rows: list[dict], names: dict[str, str],
                turns_around: TurnsAround) -> dict[str, list[tuple[str, str, bool]]]:
    """For each memory's source message: [(message_id, rendered turn, whether it comes before)] of the turns just
    before and after it, in the order said.

    Messages are stored with their secrets already cut out (`message_rows_append` is their only writer, and the golden
    set test reads the tables back), so they are shown as stored.
    """
    sources: dict[str, list[str]] = {}  # message -> the memories of it among the rows (its passages)
    for r in rows:
        if r["source_message_id"]:
            sources.setdefault(r["source_message_id"], []).append(r["id"])
    out: dict[str, list[tuple[str, str]]] = {}
    for m in sorted(turns_around(tenant=tenant, message_ids=list(sources)), key=lambda m: m["seq"]):
        if m["role"] not in ("user", "assistant"):
            continue
        who = names.get(m["session__user_id"], "The user") if m["role"] == "user" else (m["name"] or "Assistant")
        body = informative_text(m["content"]) or m["content"]
        # Read like any turn of the block: its relative dates resolved against when it was said.
        dates = resolve_dates(body, m["created_at"]) if m.get("created_at") else []
        turn = with_resolved_dates(f"{who}: {body}", dates)
        # Shown whole or not at all: the opening of a long turn is rarely the part that bears on the hit, and cut
        # to a fixed size it would spend a long-message conversation's budget on text that answers nothing (the
        # turn's own passages are memories, found when they match).
        if body.strip() and count_tokens(turn) <= NEIGHBOUR_MAX_TOKENS:
            for memory_id in sources[m["around"]]:
                out.setdefault(memory_id, []).append((m["pk"], turn, bool(m["before"])))
    return out


def _excerpt(m: RetrievedMemory, *, weights: dict[str, float], limit: int) -> str:
    """The memory's words within `limit` tokens of text: whole, or its best sentences (an event keeps its speaker)."""
    prefix = m.text[:m.text.index(": ") + 2] if m.kind == MemoryKind.EVENT and ": " in m.text[:80] else ""
    return excerpt(m.text, weights=weights, limit=limit, prefix=prefix)


def memory_retrieve(*, tenant, user, query: str, goal: str = "", k: int = 10, token_budget: int | None = None,
                    exclude_session_id=None, rewrite: bool = True,
                    neighbours: TurnsAround | None = None, left_out: list | None = None,
                    as_of: datetime | None = None, skip_ids=(), record_access: bool = True) -> list[RetrievedMemory]:
    """Active, unexpired memories of this tenant's user, best first. Raises ServiceUnavailable if Qdrant is down.

    neighbours: how to read the turns around a memory's source message; without it no hit is expanded.
    left_out: a list that receives the memories ranked in but left out because they did not fit the budget.
    as_of: the memories valid at that time instead (a superseded one included, while it held).
    skip_ids: memories the context already shows (the standing profile): not spent on twice.
    record_access=False: the caller counts the accesses itself (a context's receipt does, in the task that writes
    it)."""
    return memory_retrieve_for_users(tenant=tenant, users=[user], query=query, goal=goal, k=k,
                                     token_budget=token_budget, exclude_session_id=exclude_session_id,
                                     rewrite=rewrite, neighbours=neighbours, left_out=left_out, as_of=as_of,
                                     skip_ids=skip_ids, record_access=record_access)



def memory_retrieve_for_users(*, tenant, users, query: str, goal: str = "", k: int = 10,
                              token_budget: int | None = None, exclude_session_id=None,
                              neighbours: TurnsAround | None = None, record_access: bool = True,
                              rewrite: bool = True, left_out: list | None = None,
                              as_of: datetime | None = None, skip_ids=()) -> list[RetrievedMemory]:
    """Retrieval over the memories of several users of one tenant (e.g. both people of a conversation).

    rewrite=False searches with the input and goal as they are, even where an LLM could rewrite them."""
    if tenant is None:
        raise ScopeMissing("Memory retrieval needs a tenant.")
    users = [u for u in users if u is not None and u.tenant_id == tenant.pk]
    text = query_build(query=query, goal=goal)
    plan = query_plan(text) if rewrite else QueryPlan.plain(text)
    if not users or not plan.text.strip() or k <= 0:
        return []
    names = [u.display_name for u in users] if settings.MEMORY_SEARCH_WITHOUT_NAMES else []
    unnamed = without_names(plan.text, names)
    if unnamed and unnamed not in plan.parts:
        # Searched as one more part: fusion keeps each candidate's best, so the names' own matches still stand.
        plan = dataclasses.replace(plan, parts=(*plan.parts, unnamed))
    pending = embed_soon([plan.text, *plan.parts])
    now = clock.now()
    user_ids = [str(u.pk) for u in users]
    replaced = plan.earlier and as_of is None  # the question asks what held before: superseded values too
    cands = _candidates(tenant=tenant, user_ids=user_ids, plan=plan, pending=pending, now=now, as_of=as_of,
                        exclude_session_id=exclude_session_id, skip_ids=skip_ids, replaced=replaced)
    if not cands:
        return []
    part_max = settings.MEMORY_EXCERPT_MAX_TOKENS if token_budget is not None else 0
    ranked = _ranked(tenant=tenant, user_ids=user_ids, cands=cands, k=k, token_budget=token_budget, part_max=part_max,
                     now=now, as_of=as_of, thread=plan.thread and settings.MEMORY_THREAD_QUESTIONS, replaced=replaced)
    expand = neighbours is not None and token_budget is not None and settings.MEMORY_NEIGHBOUR_EXPANSION_HITS > 0
    walk = _BudgetWalk(
        block=BlockBudget(token_budget), k=k, part_max=part_max,
        weights=key_weights(query_keys(plan.text), [r["text"] for _, r in ranked]) if part_max else {},
        nearby=_nearby(tenant=tenant, ranked=ranked, users=users, turns_around=neighbours) if expand else None,
        parts=functools.partial(_score_parts, cands, now), names=tuple(u.display_name or "" for u in users))
    cut = walk.run(ranked)
    out = walk.shown
    if left_out is not None and cut is not None and len(out) < k:
        left_out += _next_best(ranked[cut:], limit=k - len(out), block=walk.block, shown=walk.shown_turns,
                               parts=walk.parts)
    if record_access and out:
        _access_record_later(tenant_id=str(tenant.pk), memory_ids=[m.memory_id for m in out], at=now)
    return out


def _candidates(*, tenant, user_ids: list[str], plan: QueryPlan, pending, now: datetime, as_of: datetime | None,
                exclude_session_id, skip_ids, replaced: bool = False) -> dict[str, Candidate]:
    """Every search of the plan (the text, then each part), fused, without the excluded session and skipped ids.

    The keyword searches need only the text: they run, as one batch, while the query is embedded (`pending`); then
    the dense searches, as another."""
    gather = functools.partial(candidates_gather, tenant=tenant, user_ids=user_ids,
                               limit=settings.MEMORY_RETRIEVAL_CANDIDATES, now_epoch=now.timestamp(),
                               kinds=retrieved_kinds(),
                               statuses=("active", "superseded") if as_of is not None or replaced else ("active",))
    searches = [Found() for _ in (plan.text, *plan.parts)]
    window = said_window(plan.text, now) if settings.MEMORY_SEARCH_NAMED_DATES else None
    # The question names a time: what was said then is searched on its own, and its best stands beside the best of
    # all time (ranked in turn with it), since a question about a day is most often about that day.
    said = (window[0].timestamp(), window[1].timestamp()) if window is not None else None
    then = Found()
    if settings.MEMORY_KEYWORD_SEARCH:
        texts = [Ask(found, text=t) for found, t in zip(searches, (plan.text, *plan.parts))]
        gather([*texts, *([Ask(then, text=plan.text, said_between=said)] if said else [])])
    try:
        vector, *part_vectors = pending.result()
    except Exception as exc:
        raise ServiceUnavailable(f"Embedding the query failed: {exc.__class__.__name__}", code="embedder_unavailable") \
            from exc
    dense = [Ask(found, vector=v) for found, v in zip(searches, (vector, *part_vectors))]
    gather([*dense, *([Ask(then, vector=vector, said_between=said)] if said else [])])
    if exclude_session_id is not None:
        def kept(found: Found) -> Found:
            return Found({mid: c for mid, c in found.items() if c.payload.get("session_id") != str(exclude_session_id)},
                         keywords_complete=found.keywords_complete)

        searches, then = [kept(found) for found in searches], kept(then)
    cands = candidates_fuse(*searches, by_rank=then)
    if skip_ids:
        skip = {str(i) for i in skip_ids}
        cands = {mid: c for mid, c in cands.items() if mid not in skip}
    return cands


def retrieved_kinds() -> tuple[str, ...]:
    """The kinds of memory a retrieval returns. A session note's lines are sentences quoted from the session's turns
    without the turn around them: read as evidence they stand in for the turn that says more (who asked, what was
    answered), and a reader may take a quoted reaction for a fact; yet a note lifts the sentence that corrects a value
    above the rest of a long message. MEMORY_RETRIEVE_NOTES decides; off, notes serve the bridge and the admin only."""
    return tuple(k for k in MemoryKind.values if k != MemoryKind.NOTE or settings.MEMORY_RETRIEVE_NOTES)


def _ranked(*, tenant, user_ids: list[str], cands: dict[str, Candidate], k: int, token_budget: int | None,
            part_max: int, now: datetime, as_of: datetime | None, thread: bool = False,
            replaced: bool = False) -> list[tuple[float, dict]]:
    """(final score, row) of the shortlisted candidates that the database still holds, best first within each tier:
    each candidate's adjusted score is computed once and shown as it ranked. part_max: the most a memory is shown
    with (0: whole)."""
    shortlist = candidates_shortlist(sorted(cands.values(), key=lambda c: c.score, reverse=True), k=k,
                                     token_budget=token_budget, shown_max=part_max or None)
    # The database is the truth: a row changed since the point was written (deleted, superseded, expired, moved)
    # does not come back, whatever the payload says.
    rows = memory_rows(tenant=tenant, user_ids=user_ids, memory_ids=[c.memory_id for _, c in shortlist], now=now,
                       as_of=as_of, replaced=replaced)
    if settings.MEMORY_LINES_AS_TURNS and as_of is None and not replaced:
        shortlist = lines_as_turns(tenant=tenant, user_ids=user_ids, shortlist=shortlist, rows=rows, cands=cands,
                                   now=now)
    scored = [(tier, score_adjusted(c, rows[c.memory_id], now), c) for tier, c in shortlist if c.memory_id in rows]
    if settings.MEMORY_SESSION_DIVERSITY:
        scored = scores_diversify(scored)
    ordered = scores_thread_order(scored) if thread else sorted(scored, key=lambda tsc: (tsc[0], -tsc[1]))
    return [(score, rows[c.memory_id]) for _, score, c in ordered]


# Extractors whose lines quote a turn's own words: the rules' typed lines ("[preference] Ada loves hiking") and an
# extractive session note's lines. Such a line says less than its turn and, cut out of it, can read wrongly ("A loves
# the thought B"); a model's statement or an abstractive note's line says something the turn does not in so many words.
QUOTING_EXTRACTORS = frozenset({"rules", "session_note:extractive"})


def _quotes_a_turn(row: dict) -> bool:
    return row["kind"] != MemoryKind.EVENT and row.get("extractor") in QUOTING_EXTRACTORS \
        and bool(row["source_message_id"])


def lines_as_turns(*, tenant, user_ids: list[str], shortlist: list[tuple[int, Candidate]], rows: dict[str, dict],
                   cands: dict[str, Candidate], now: datetime) -> list[tuple[int, Candidate]]:
    """The shortlist with each line that quotes a turn (QUOTING_EXTRACTORS) standing for that turn: the line is a key
    the turn is found by, and the turn is what is shown (its passage that holds the line's words, for a long message).
    The turn takes the best score and tier of itself and its lines. A line whose turn has no active memory (retired
    by a change, deleted), or that replaced an earlier value, stays as it is. `rows` and `cands` receive the turns'
    rows and the candidates they rank by."""
    quoting = [rows[c.memory_id] for _, c in shortlist if c.memory_id in rows and _quotes_a_turn(rows[c.memory_id])]
    # A line that replaced an earlier value says what holds now ("Ada's destination is Newark."), which its turn
    # alone ("Change the destination to Newark.") does not: it stays a line.
    current = replacing_ids(tenant=tenant, memory_ids=[r["id"] for r in quoting])
    quoting = [r for r in quoting if r["id"] not in current]
    if not quoting:
        return shortlist
    keys = {r["id"]: r for r in quoting}
    events = turn_event_ids(tenant=tenant, user_ids=user_ids, message_ids={r["source_message_id"] for r in quoting},
                            now=now)
    missing = [mid for ids in events.values() for mid in ids if mid not in rows]
    if missing:
        rows.update(memory_rows(tenant=tenant, user_ids=user_ids, memory_ids=missing, now=now))
    best: dict[str, tuple[int, Candidate]] = {}
    for tier, c in shortlist:
        row = keys.get(c.memory_id)
        if row is not None:
            passages = [rows[mid] for mid in events.get(row["source_message_id"], []) if mid in rows]
            if passages:
                words = content_words(row["text"])
                turn = max(passages, key=lambda p: len(words & content_words(p["text"])))
                c = dataclasses.replace(c, memory_id=turn["id"])
        held = best.get(c.memory_id)
        if held is None:
            best[c.memory_id] = (tier, c)
        else:
            best[c.memory_id] = (min(tier, held[0]), c if c.score > held[1].score else held[1])
    for mid, (_, c) in best.items():
        cands[mid] = c
    return list(best.values())


def _nearby(*, tenant, ranked: list[tuple[float, dict]], users,
            turns_around: TurnsAround) -> dict[str, list[tuple[str, str, bool]]]:
    """The turns around the best few episodic hits, rendered with their speakers' names, for the walk to show."""
    names = {str(u.pk): (u.display_name or "").strip() or "The user" for u in users}
    events = [r for _, r in ranked if r["kind"] == MemoryKind.EVENT]
    top_events = events[:settings.MEMORY_NEIGHBOUR_EXPANSION_HITS + 1]
    return _neighbours(tenant=tenant, rows=top_events, names=names, turns_around=turns_around)


def _score_parts(cands: dict[str, Candidate], now: datetime, row: dict) -> dict:
    return score_parts(cands[row["id"]], row, now)


def _retrieved(row: dict, score: float, parts: dict) -> RetrievedMemory:
    """A ranked row as a result, before it is cut to the budget and given its provenance."""
    primary = row["source_message_id"]  # the reads give ids as strings (or None)
    return RetrievedMemory(
        memory_id=row["id"], kind=row["kind"], text=row["text"], score=round(score, 4),
        source_type=row["source_type"], created_at=row["created_at"], session_id=row["session_id"],
        source_message_id=primary, provenance="", user_id=row["user_id"], confidence=row["confidence"],
        source_message_ids=row["source_message_ids"] or ([primary] if primary else []),
        session_number=row["session_number"], dates=list(row["dates"] or []), score_parts=parts)


def _said(row: dict) -> str:
    return " ".join(row["text"].lower().split())


@dataclass
class _BudgetWalk:
    """The ranked memories taken best first until k or the budget, stopping at the first that does not fit (cut to
    its best sentences when that still says something): skipping it for a smaller one further down would let a
    larger budget, which takes the first, lose the smaller one. So a larger budget always returns everything a
    smaller one does, and more."""
    block: BlockBudget
    k: int
    part_max: int  # the longest a memory is shown under a budget (0: whole, no budget)
    weights: dict[str, float]  # the query's words, weighted, that pick a long memory's best sentences
    nearby: dict[str, list[tuple[str, str, bool]]] | None  # turns around the best episodic hits; None: no expansion
    parts: Callable[[dict], dict]  # row -> the terms of its score (score_parts)
    names: tuple[str, ...] = ()  # the people in scope: a turn that only greets or thanks them is never shown
    shown: list[RetrievedMemory] = field(default_factory=list)
    shown_turns: set[str] = field(default_factory=set)  # messages in the result (own memory or shown as a neighbour)
    shown_texts: set[str] = field(default_factory=set)  # words shown (both people's copy of a turn is said once)
    shown_sentences: set[str] = field(default_factory=set)  # every sentence shown so far (sentences_said)

    def run(self, ranked: list[tuple[float, dict]]) -> int | None:
        """Takes what fits; returns where the budget stopped the walk (the memories from there on were left out
        for it), or None when k or the ranking ran out first."""
        cut = self._walk(ranked, more_passages=False)
        if cut is None and not self.part_max and len(self.shown) < self.k:
            # A list without a budget (a search for k memories) that found fewer than k turns: the other passages of
            # the long messages it shows are separate memories, each saying something of its own, and come next in
            # their rank order (a search of one long write-up lists its best parts).
            self._walk(ranked, more_passages=True)
        return cut

    def _walk(self, ranked: list[tuple[float, dict]], *, more_passages: bool) -> int | None:
        for pos, (score, row) in enumerate(ranked):
            if len(self.shown) >= self.k:
                return None
            if self.block.full():
                return pos
            if self._repeats(row, more_passages=more_passages) or is_phatic(row["text"], names=self.names):
                continue
            m = _retrieved(row, score, self.parts(row))
            m.valid_from, m.valid_to = row.get("valid_from"), row.get("valid_to")
            if self.part_max:
                m.text = _excerpt(m, weights=self.weights, limit=self.part_max)
            says = sentences_said(m.text)
            if says and says <= self.shown_sentences:
                # Nothing it would show is new: the same sentences were shown from another turn (a paragraph the
                # user pastes into every session, a line a note quotes). Decided on what it shows at any budget, so
                # a larger budget still returns everything a smaller one does.
                continue
            fitted = self._fitted(m)
            if fitted is None:
                return pos
            cost, last = fitted
            if (self.nearby is not None and not last and len(self.shown) < settings.MEMORY_NEIGHBOUR_EXPANSION_HITS
                    and row["kind"] == MemoryKind.EVENT):
                cost, last = self._with_neighbours(m, cost)
            self._show(m, cost, said=_said(row), says=says)
            if last:
                return pos + 1
        return None

    def _repeats(self, row: dict, *, more_passages: bool) -> bool:
        """One memory per source turn: a turn's event, the facts drawn from it, its other passages and a session
        note's line citing it say the same thing or sit in the same message; a second one spends tokens that a memory
        of another turn would spend on news, and k results then cover as many turns as k whole turns would. A note
        line stands for every turn it cites, so it comes in while one of them is not shown yet. Nor the same words
        twice."""
        if more_passages and row.get("passage") is not None:
            return _said(row) in self.shown_texts
        turns = turns_of(kind=row["kind"], primary=row["source_message_id"], cited=row["source_message_ids"])
        return bool(turns and turns <= self.shown_turns) or _said(row) in self.shown_texts

    def _fitted(self, m: RetrievedMemory) -> tuple[int, bool] | None:
        """The memory's cost (its text already cut to its best sentences when memories are shown in part), cut to what
        is left of the budget if need be, and whether it was cut (then nothing after it is shown); None when not even
        its best sentences fit."""
        cost = self.block.cost(m)
        if self.block.fits(cost):
            return cost, False
        # What is left for the memory's words once its heading, marker and dates are paid for.
        room = self.block.room() - (cost - count_tokens(m.text))
        m.text = _excerpt(m, weights=self.weights, limit=room) if self.part_max and room > 0 else ""
        if not m.text:
            return None
        cost = self.block.cost(m)
        return (cost, True) if self.block.fits(cost) else None

    def _with_neighbours(self, m: RetrievedMemory, cost: int) -> tuple[int, bool]:
        """The memory with the turns around it not shown yet, when they fit; when they do not, it is shown alone and
        nothing after it is."""
        turns = [(mid, t, before) for mid, t, before in self.nearby.get(m.memory_id, []) if mid not in self.shown_turns]
        if not turns:
            return cost, False
        m.neighbours, m.neighbour_message_ids = [t for _, t, _ in turns], [mid for mid, _, _ in turns]
        m.neighbours_before = sum(before for _, _, before in turns)
        with_turns = self.block.cost(m)
        if self.block.fits(with_turns):
            return with_turns, False
        m.neighbours, m.neighbour_message_ids, m.neighbours_before = [], [], 0
        return cost, True

    def _show(self, m: RetrievedMemory, cost: int, *, said: str, says: set[str]) -> None:
        """says: the sentences of what it shows (sentences_said, read before any cut to the budget; a memory cut to fit
        is the last one shown)."""
        self.shown_turns.update(turns_of(kind=m.kind, primary=m.source_message_id, cited=m.source_message_ids))
        self.shown_turns.update(m.neighbour_message_ids)
        self.shown_texts.add(said)
        self.shown_sentences.update(says)
        for turn in m.neighbours:
            self.shown_sentences.update(sentences_said(turn))
        self.block.add(m, cost)
        m.token_count = cost
        m.provenance = provenance_line(source_type=m.source_type, created_at=m.created_at,
                                       session_number=m.session_number, dates=m.dates)
        if m.valid_to is not None:  # asked as of a past time: say when it stopped holding
            m.provenance += f"; superseded on {m.valid_to.day} {m.valid_to:%B %Y}"
        self.shown.append(m)


_WORDS = re.compile(r"[^\W_]+")
SAID_MIN_WORDS = 3  # a shorter sentence ("Thanks so much!") says too little to count as news or as a repeat


def sentences_said(text: str) -> set[str]:
    """The sentences a shown text says, each as its lowercased words: a speaker's name or a note's label before ": "
    and the markers where text was cut left aside, sentences of fewer than SAID_MIN_WORDS words left out."""
    out = set()
    for sentence in sentences(text.replace(CUT, "\n")):
        head, colon, rest = sentence.partition(": ")
        words = _WORDS.findall((rest if colon and len(head) <= 40 else sentence).lower())
        if len(words) >= SAID_MIN_WORDS:
            out.add(" ".join(words))
    return out


def turns_of(*, kind: str, primary: str | None, cited) -> set[str]:
    """The turns a memory stands for in the one-memory-per-turn rule: its source turn, and every turn a session note's
    line cites (the line is read in their place)."""
    if kind == MemoryKind.NOTE:
        return {*(cited or []), *([primary] if primary else [])}
    return {primary} if primary else set()


def _next_best(rest: list, *, limit: int, block: BlockBudget, shown: set, parts) -> list[RetrievedMemory]:
    """The best rows after the budget filled up, at most `limit` (what k had room for): what a larger budget would
    have shown next, each with what it would have cost."""
    found = []
    for score, row in rest:
        if len(found) >= limit:
            break
        turns = turns_of(kind=row["kind"], primary=row["source_message_id"], cited=row["source_message_ids"])
        if turns and turns <= shown:
            continue
        m = _retrieved(row, score, parts(row))
        m.token_count = block.cost(m)
        found.append(m)
    return found


def _access_record_later(*, tenant_id: str, memory_ids: list[str], at: datetime) -> None:
    """Access counts are bookkeeping: a task after commit, never a write on the request path."""
    def enqueue():
        try:
            task_enqueue("memory.tasks.memory_access_record_task", tenant_id, memory_ids,
                         at.astimezone(timezone.utc).isoformat())
        except Exception as exc:  # a broker hiccup loses a counter increment, never the answer
            log.warning("access counts not recorded: %s", exc)

    transaction.on_commit(enqueue)
