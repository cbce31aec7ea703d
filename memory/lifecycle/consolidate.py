"""Consolidate job: repeated episodic events of a user become one semantic fact.

With an LLM, clusters of similar events are offered to it (structured output) and it names the lasting facts
they show. Without one, only the safe case is handled: the user said the very same preference in several events
("I prefer aisle seats", twice). Either way the events are superseded by the fact, which carries all of their
source messages as provenance, so history and evidence are kept.
"""
from __future__ import annotations

import logging
import re

import numpy as np
from django.conf import settings
from django.db.models import Count, Exists, OuterRef, Q

from infra.embedder import get_embedder
from infra.errors import AppError, ValidationFailed
from infra.llm import llm_configured, structured_completion
from tenants.models import EndUser, Tenant

from ..actions import PENDING_MARK, fact_from_events
from ..models import MemoryKind, MemoryRecord, MemoryStatus, SourceType
from .runs import JobResult, UserPass

log = logging.getLogger(__name__)

PER_USER_CAP = 500
# An LLM call sees at most this many events of one cluster.
LLM_CLUSTER_CAP = 20

_PREFERENCE = re.compile(
    r"\b(i|we)\s+(really\s+|usually\s+|always\s+|generally\s+)?(prefer|like|love|enjoy|hate|dislike|"
    r"can't stand|cannot stand|avoid|want|never|always)\b", re.IGNORECASE)

FACTS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["facts"],
    "properties": {"facts": {"type": "array", "maxItems": LLM_CLUSTER_CAP, "items": {
        "type": "object", "additionalProperties": False,
        "required": ["text", "kind", "event_numbers", "confidence"],
        "properties": {
            "text": {"type": "string", "maxLength": 300},
            "kind": {"type": "string", "enum": ["preference", "fact", "procedure", "goal"]},
            "event_numbers": {"type": "array", "maxItems": LLM_CLUSTER_CAP, "items": {"type": "integer"}},
            "confidence": {"type": "number"},
        }}}},
}

SYSTEM_PROMPT = (
    "You consolidate a user's long-term memory. You get numbered episodic events the user stated over time. "
    "Name only lasting facts or preferences about the user that at least two events support, each as one short "
    "sentence in the third person ('The user prefers aisle seats.'). List the supporting event numbers. "
    "Do not invent anything the events do not say; return no facts when none are clearly repeated.")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s']", " ", (text or "").lower())).strip()


def repeated_preferences(events: list[MemoryRecord], *, min_repeats: int) -> list[list[MemoryRecord]]:
    """Groups of events saying the very same preference, oldest first."""
    groups: dict[str, list[MemoryRecord]] = {}
    for e in events:
        if _PREFERENCE.search(e.text):
            groups.setdefault(_norm(e.text), []).append(e)
    return [sorted(g, key=lambda r: (r.created_at, r.pk)) for g in groups.values() if len(g) >= min_repeats]


def similar_clusters(events: list[MemoryRecord], *, threshold: float, min_size: int) -> list[list[MemoryRecord]]:
    if len(events) < min_size:
        return []
    vectors = np.asarray(get_embedder().embed([e.text for e in events]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
    sims = vectors @ vectors.T
    taken, clusters = [False] * len(events), []
    for i in range(len(events)):
        if taken[i]:
            continue
        members = [j for j in range(len(events)) if not taken[j] and sims[i, j] >= threshold]
        if len(members) >= min_size:
            for j in members:
                taken[j] = True
            clusters.append(sorted((events[j] for j in members), key=lambda r: (r.created_at, r.pk))[:LLM_CLUSTER_CAP])
    return clusters


def _llm_facts(cluster: list[MemoryRecord]) -> list[tuple[dict, list[MemoryRecord]]]:
    listing = "\n".join(f"{n}. ({e.created_at:%Y-%m-%d}) {e.text}" for n, e in enumerate(cluster, start=1))
    answer = structured_completion(system=SYSTEM_PROMPT, user=listing, schema_name="consolidated_facts",
                                   schema=FACTS_SCHEMA, kind="consolidate")
    out = []
    for fact in answer.get("facts") or []:
        members = [cluster[n - 1] for n in sorted(set(fact.get("event_numbers") or [])) if 1 <= n <= len(cluster)]
        text = (fact.get("text") or "").strip()
        if text and len(members) >= 2 and fact.get("kind") in MemoryKind.values:
            out.append(({"text": text[:2000], "kind": fact["kind"],
                         "confidence": min(1.0, max(0.0, float(fact.get("confidence") or 0.7)))}, members))
    return out


def memories_consolidate(*, tenant: Tenant, limit: int, cursor: str | None = None) -> JobResult:
    min_repeats = max(2, settings.MEMORY_CONSOLIDATE_MIN_REPEATS)
    use_llm = llm_configured()
    run = UserPass.resume(job="consolidate", tenant=tenant, cursor=cursor)
    users = (EndUser.objects.for_tenant(tenant)
             .annotate(n=Count("memories", filter=Q(memories__status=MemoryStatus.ACTIVE,
                                                    memories__kind=MemoryKind.EVENT)))
             .filter(n__gte=min_repeats).order_by("pk"))
    if run.since is not None:  # only users with a new or changed event since the last complete pass
        users = users.filter(Exists(MemoryRecord.objects.filter(
            user=OuterRef("pk"), kind=MemoryKind.EVENT, status=MemoryStatus.ACTIVE, updated_at__gte=run.since)))
    if run.after:
        users = users.filter(pk__gt=run.after)
    stats = {"examined": 0, "facts": 0, "events_superseded": 0, "method": "llm" if use_llm else "rules",
             **run.stats()}
    last_user, more = None, False
    for user in users.iterator(chunk_size=100):
        if stats["examined"] >= limit:
            more = True
            break
        events = list(MemoryRecord.objects.for_tenant(tenant).filter(user=user, kind=MemoryKind.EVENT,
                                                  status=MemoryStatus.ACTIVE)
                      .exclude(**{f"metadata__{PENDING_MARK}__isnull": False})
                      .order_by("-created_at")[:PER_USER_CAP])
        stats["examined"] += len(events)
        last_user = user.pk
        plans: list[tuple[dict, list[MemoryRecord]]] = []
        for group in repeated_preferences(events, min_repeats=min_repeats):
            plans.append(({"text": group[-1].text, "kind": MemoryKind.PREFERENCE,
                           "confidence": max(e.confidence for e in group), "source_type": SourceType.USER_STATED},
                          group))
        if use_llm:
            claimed = {e.pk for _, group in plans for e in group}
            rest = [e for e in events if e.pk not in claimed]
            for cluster in similar_clusters(rest, threshold=settings.MEMORY_CONSOLIDATE_SIMILARITY,
                                            min_size=min_repeats):
                try:
                    for fact, members in _llm_facts(cluster):
                        plans.append(({**fact, "source_type": SourceType.INFERRED}, members))
                except (AppError, ValueError) as exc:
                    log.warning("consolidate: LLM unavailable for user %s (%s); rules only this pass", user.pk, exc)
                    stats["llm_errors"] = stats.get("llm_errors", 0) + 1
        used: set = set()
        for fact, members in plans:
            members = [m for m in members if m.pk not in used]
            if len(members) < 2:
                continue
            try:
                made = fact_from_events(tenant=tenant, text=fact["text"], kind=fact["kind"],
                                        confidence=fact["confidence"], source_type=fact["source_type"],
                                        event_ids=[m.pk for m in members], actor_id="lifecycle.consolidate")
            except ValidationFailed as exc:  # e.g. a proposed fact that is only a secret: never stored
                log.info("consolidate: fact refused for user %s: %s", user.pk, exc.message)
                stats["refused"] = stats.get("refused", 0) + 1
                continue
            if made is None:
                continue
            used.update(m.pk for m in members)
            stats["facts"] += 1
            if made.status == MemoryStatus.ACTIVE:
                stats["events_superseded"] += len(members)
            else:
                stats["held_for_review"] = stats.get("held_for_review", 0) + 1
    return JobResult(stats=stats, more=more, cursor=run.cursor_after(last_user) if more and last_user else None)
