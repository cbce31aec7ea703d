"""How a retrieval's candidates are found and ranked: dense and BM25 searches per user in scope, fused on standardised
scores, a session prior for topic locality, a tiered shortlist, and small bounded adjustments (recency, confidence,
importance, access count) whose terms are kept for the context's receipt."""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from infra.errors import ServiceUnavailable
from infra.vector_store import Scope, get_vector_store
from infra.vector_store.base import Search

SESSION_PRIOR_TOP = 3  # a session's strength: the mean of its best few candidates
RECENCY_HALF_LIFE_DAYS = 180.0
WEIGHT_RECENCY, WEIGHT_CONFIDENCE, WEIGHT_IMPORTANCE, WEIGHT_ACCESS = 0.2, 0.3, 0.2, 0.05


@dataclass
class Candidate:
    memory_id: str
    payload: dict
    dense: float | None = None
    sparse: float | None = None
    fused: float = 0.0
    score: float = 0.0


def _standardise(values: dict[str, float]) -> tuple[dict[str, float], float]:
    """z-scores of one retriever's scores, and the floor given to candidates it did not return."""
    if not values:
        return {}, 0.0
    xs = list(values.values())
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs)) or 1.0
    z = {k: (v - mean) / sd for k, v in values.items()}
    return z, min(z.values())


# What retrieval reads from a hit's payload (the store adds the keys its scope guard needs): the memory text and
# the other display fields come from the database rows, so they are not copied out of the store for every hit.
HIT_PAYLOAD_KEYS = ("session_id", "tokens")
SHORTLIST_MIN = 40
TIER_TOKENS = 250  # tier 0 covers twice this: about what the smallest useful memory section (500 tokens) reads
UNSIZED_TOKENS = 20  # a point written before sizes were kept in its payload counts as a short memory


class Found(dict):
    """One search's candidates by memory id (Candidate), and the users whose keyword search came back complete (fewer
    hits than its limit): every memory of theirs that shares a word with the query is among its hits."""

    def __init__(self, *args, keywords_complete=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.keywords_complete: set[str] = set(keywords_complete)


@dataclass(frozen=True)
class Ask:
    """One search of a retrieval: dense (vector) or BM25 (text), optionally only what was said in a window (epoch
    times), its hits added to `into` (a search's own candidates, fused on their own)."""
    into: dict
    vector: list[float] | None = None
    text: str | None = None
    said_between: tuple[float, float] | None = None


def candidates_gather(asks: list[Ask], *, tenant, user_ids: list[str], limit: int, now_epoch: float,
                      statuses=("active",), kinds: tuple[str, ...] | None = None) -> None:
    """Every ask for every user in scope, as one batch over the shard (one planned pass, one call), each hit added
    to its ask's `into` as a Candidate with its dense or sparse score. kinds: only memories of these kinds (None:
    any)."""
    store = get_vector_store()
    tenant_id = str(tenant.pk)
    searches, targets = [], []
    for ask in asks:
        for user_id in user_ids:
            searches.append(Search(Scope(tenant_id=tenant_id, user_id=user_id), dense=ask.vector, text=ask.text,
                                   limit=limit, statuses=statuses, kinds=kinds, not_expired_at=now_epoch,
                                   payload_keys=HIT_PAYLOAD_KEYS, said_between=ask.said_between))
            targets.append((ask.into, "dense" if ask.vector is not None else "sparse", user_id))
    if not searches:
        return
    try:
        answers = store.search_batch(searches)
    except ServiceUnavailable:
        raise
    except Exception as exc:
        raise ServiceUnavailable(f"Memory search failed: {exc.__class__.__name__}", code="vector_store_unavailable") \
            from exc
    for (found, attr, user_id), hits in zip(targets, answers, strict=True):
        if attr == "sparse" and len(hits) < limit and isinstance(found, Found):
            found.keywords_complete.add(user_id)
        for hit in hits:
            # Second guard after the store's own: a hit outside this tenant and these users is dropped.
            if hit.payload.get("tenant_id") != tenant_id or hit.payload.get("user_id") not in user_ids:
                continue
            c = found.get(hit.memory_id)
            if c is None:
                c = found[hit.memory_id] = Candidate(hit.memory_id, hit.payload)
            setattr(c, attr, float(hit.score))


def _fused(cands: dict[str, Candidate]) -> dict[str, float]:
    """Each candidate's dense and keyword z-scores added; one that a retriever did not return gets that retriever's
    floor, its lowest z-score (what it left out scored no higher).

    Keyword hits without spread (a single hit, or hits that tie) all standardise to 0, the floor itself: the one
    passage of a long message that holds the query's rare word would count for no more than its passages without it.
    When the keyword search came back complete for a candidate's user, that candidate is known to score 0, and those
    zeros give the hits their place."""
    zd, floor_d = _standardise({k: c.dense for k, c in cands.items() if c.dense is not None})
    sparse = {k: c.sparse for k, c in cands.items() if c.sparse is not None}
    if len(set(sparse.values())) == 1 and isinstance(cands, Found):
        sparse.update({k: 0.0 for k, c in cands.items()
                       if k not in sparse and c.payload.get("user_id") in cands.keywords_complete})
    zs, floor_s = _standardise(sparse)
    return {k: zd.get(k, floor_d) + (zs.get(k, floor_s) if zs else 0.0) for k in cands}


def session_of(c: Candidate) -> str:
    """The session a candidate came from; one with none (a memory given by hand) is a session of its own."""
    return c.payload.get("session_id") or c.memory_id


def candidates_fuse(cands: dict[str, Candidate], *more: dict[str, Candidate],
                    by_rank: dict[str, Candidate] | None = None) -> dict[str, Candidate]:
    """Fused scores and session priors; with several searches (a question's parts), each is fused on its own and a
    candidate keeps its best, so every part's best hits stand as high as the whole question's.

    by_rank: a search narrowed to a few points (what was said on a day the question names): z-scores over so few
    say little, so its n-th best takes the n-th best score of all the others, and the two rankings interleave."""
    def keep_best(found: dict[str, Candidate], scores) -> None:
        for mid, score in scores:
            if mid in cands:
                cands[mid].fused = max(cands[mid].fused, score)
            else:
                cands[mid] = found[mid]
                cands[mid].fused = score

    for c, score in _fused(cands).items():
        cands[c].fused = score
    for other in more:
        keep_best(other, _fused(other).items())
    if by_rank:
        ladder = sorted((c.fused for c in cands.values()), reverse=True)
        own = _fused(by_rank)
        keep_best(by_rank, zip(sorted(own, key=own.get, reverse=True), ladder))
    groups: dict[str, list[Candidate]] = defaultdict(list)
    for c in cands.values():
        groups[session_of(c)].append(c)
    for members in groups.values():
        best = sorted((m.fused for m in members), reverse=True)[:SESSION_PRIOR_TOP]
        prior = sum(best) / len(best)
        for m in members:
            m.score = m.fused + prior
    return cands


def candidates_shortlist(ordered: list[Candidate], *, k: int, token_budget: int | None,
                         shown_max: int | None = None) -> list[tuple[int, Candidate]]:
    """The best candidates, each with its tier: enough of them to fill k, or the token budget twice over by their
    own sizes.

    Tiers make a larger budget's ranking extend a smaller one's: tier 0 is the best candidates up to twice
    TIER_TOKENS (and at least SHORTLIST_MIN of them), each further tier doubles the tokens covered, and a budget takes
    whole tiers until they cover twice the budget. The final ranking reorders within a tier only, so a candidate
    that only a larger budget reads can never push one that a smaller budget shows further down.
    The rows read for them can still be dropped (changed since the point was written, a second memory of one turn)
    and the final ranking moves them a little: the margin covers that.
    shown_max: the most tokens one memory is shown with under the budget (a longer one is shown as its best
    sentences), so a candidate counts at most that: a pasted log counted at its full length would end a tier
    after a handful of candidates, while the budget would read a few lines of it.
    """
    depth = max(4 * k, SHORTLIST_MIN)
    if token_budget is None:
        return [(0, c) for c in ordered[:depth]]
    out, used, tier, bound = [], 0, 0, 2 * TIER_TOKENS
    for i, c in enumerate(ordered[:depth]):
        if used >= bound and i >= SHORTLIST_MIN:
            if bound >= 2 * token_budget:
                break
            tier, bound = tier + 1, 2 * bound
        out.append((tier, c))
        size = c.payload.get("tokens") or UNSIZED_TOKENS
        used += min(size, shown_max) if shown_max else size
    return out


def scores_diversify(scored: list[tuple[int, float, Candidate]]) -> list[tuple[int, float, Candidate]]:
    """The session prior counts once per session and tier: a session's best candidate keeps it, the others stand on
    their own score. The prior says a session is about the topic; once one of its memories is in, a second one must
    earn its place against the best of other sessions, so a topic that runs across sessions comes back from many of
    them (a thread) instead of several times from the one that discussed it most."""
    best: dict[tuple, str] = {}
    for tier, score, c in sorted(scored, key=lambda tsc: -tsc[1]):
        best.setdefault((tier, session_of(c)), c.memory_id)
    return [(tier, score if best[(tier, session_of(c))] == c.memory_id
             else score - (c.score - c.fused), c) for tier, score, c in scored]


def scores_thread_order(scored: list[tuple[int, float, Candidate]]) -> list[tuple[int, float, Candidate]]:
    """The order for a question that asks for a thread across time: within each tier, the candidates at or above the
    tier's median score come one session at a time (every session's best, then every session's second, ...), the
    rest after them by score. The median is the tier's own, so it holds whatever the scores' scale; below it a
    candidate is a weak match, and spreading weak matches over sessions would only add noise."""
    out = []
    for tier in sorted({t for t, _, _ in scored}):
        members = sorted((tsc for tsc in scored if tsc[0] == tier), key=lambda tsc: -tsc[1])
        median = members[len(members) // 2][1]
        seen: dict[str, int] = defaultdict(int)
        strong = []
        for t, score, c in (m for m in members if m[1] >= median):
            session = session_of(c)
            strong.append(((seen[session], -score), (t, score, c)))
            seen[session] += 1
        out += [tsc for _, tsc in sorted(strong, key=lambda e: e[0])] + [m for m in members if m[1] < median]
    return out


def score_adjusted(c: Candidate, row: dict, now: datetime) -> float:
    created = row["created_at"]
    age_days = max(0.0, (now - created).total_seconds() / 86400.0) if created else 0.0
    recency = 0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS)
    return (c.score + WEIGHT_RECENCY * recency + WEIGHT_CONFIDENCE * (row["confidence"] - 0.7)
            + WEIGHT_IMPORTANCE * (row["importance"] - 0.5) + WEIGHT_ACCESS * math.log1p(row["access_count"]))


def score_parts(c: Candidate, row: dict, now: datetime) -> dict:
    """The terms of a candidate's final score (score_adjusted), each as it was added: raw dense and keyword scores,
    their fusion, the session prior, and the recency, confidence, importance and access adjustments."""
    created = row["created_at"]
    age_days = max(0.0, (now - created).total_seconds() / 86400.0) if created else 0.0
    return {"dense": c.dense, "keyword": c.sparse, "fused": round(c.fused, 4),
            "session_prior": round(c.score - c.fused, 4),
            "recency": round(WEIGHT_RECENCY * 0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS), 4),
            "confidence": round(WEIGHT_CONFIDENCE * (row["confidence"] - 0.7), 4),
            "importance": round(WEIGHT_IMPORTANCE * (row["importance"] - 0.5), 4),
            "access": round(WEIGHT_ACCESS * math.log1p(row["access_count"]), 4)}
