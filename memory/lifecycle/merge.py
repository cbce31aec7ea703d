"""Merge job: near-duplicate active memories of one user fold into the best-supported one.

The keeper absorbs the others' support (reinforcements, accesses, source messages); the others become
`superseded` by it, with history on every record. Two records with the same subject but different values are a
contradiction, not duplicates, and are never merged here.
"""
from __future__ import annotations

import re

import numpy as np
from django.conf import settings
from django.db.models import Count, Exists, OuterRef, Q

from infra.embedder import get_embedder
from tenants.models import EndUser, Tenant

from ..actions import memories_fold
from ..models import MemoryKind, MemoryRecord, MemoryStatus, SourceType
from .runs import JobResult, UserPass

# How many of a user's most recent active memories one pass compares.
PER_USER_CAP = 1000

_SOURCE_RANK = {SourceType.USER_STATED: 3, SourceType.TOOL_RESULT: 2, SourceType.SYSTEM: 1, SourceType.INFERRED: 0}


def support_key(record: MemoryRecord) -> tuple:
    """Most evidence first; then the stronger source, the higher confidence, and the older record."""
    evidence = record.reinforcement_count + len(record.source_message_ids or []) + record.access_count
    return (evidence, _SOURCE_RANK.get(record.source_type, 0), record.confidence, -record.created_at.timestamp())


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", (text or "").lower())).strip()


def contradicts(a: MemoryRecord, b: MemoryRecord) -> bool:
    return bool(a.subject and b.subject and _norm(a.subject) == _norm(b.subject) and _norm(a.value) != _norm(b.value))


def duplicate_clusters(records: list[MemoryRecord], *, threshold: float) -> list[list[MemoryRecord]]:
    """Greedy clusters around the best-supported record: every member is near the keeper itself, so a chain of
    pairwise-similar records cannot drag in one unlike the keeper. The keeper is first in each cluster."""
    clusters = []
    by_kind: dict[str, list[MemoryRecord]] = {}
    for r in records:
        by_kind.setdefault(r.kind, []).append(r)
    for group in by_kind.values():
        if len(group) < 2:
            continue
        group.sort(key=support_key, reverse=True)
        vectors = np.asarray(get_embedder().embed([r.text for r in group]), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
        sims = vectors @ vectors.T
        taken = [False] * len(group)
        for i, keeper in enumerate(group):
            if taken[i]:
                continue
            taken[i] = True
            members = [keeper]
            for j in range(i + 1, len(group)):
                same = group[j].content_hash and group[j].content_hash == keeper.content_hash
                if not taken[j] and (same or sims[i, j] >= threshold) and not contradicts(keeper, group[j]):
                    taken[j] = True
                    members.append(group[j])
            if len(members) > 1:
                clusters.append(members)
    return clusters


def memories_merge(*, tenant: Tenant, limit: int, cursor: str | None = None) -> JobResult:
    """One bounded run of a pass over users (in id order) until about `limit` memories were compared. A pass
    visits only users with an active memory changed since the previous complete pass began."""
    run = UserPass.resume(job="merge", tenant=tenant, cursor=cursor)
    users = (EndUser.objects.for_tenant(tenant)
             .annotate(n=Count("memories", filter=Q(memories__status=MemoryStatus.ACTIVE))).filter(n__gte=2)
             .order_by("pk"))
    if run.since is not None:
        users = users.filter(Exists(MemoryRecord.objects.filter(user=OuterRef("pk"), status=MemoryStatus.ACTIVE,
                                                                updated_at__gte=run.since)))
    if run.after:
        users = users.filter(pk__gt=run.after)
    compared, merged, clusters_n, last_user, more = 0, 0, 0, None, False
    for user in users.iterator(chunk_size=100):
        if compared >= limit:
            more = True
            break
        # A session note's lines summarise their own session: two alike from two sessions are two sessions' notes,
        # and a folded line would stand for the turns of both in retrieval.
        records = list(MemoryRecord.objects.for_tenant(tenant).filter(user=user, status=MemoryStatus.ACTIVE)
                       .exclude(kind=MemoryKind.NOTE).order_by("-created_at")[:PER_USER_CAP])
        compared += len(records)
        last_user = user.pk
        for cluster in duplicate_clusters(records, threshold=settings.MEMORY_MERGE_SIMILARITY):
            folded = memories_fold(tenant=tenant, keeper_id=cluster[0].pk, other_ids=[r.pk for r in cluster[1:]],
                                   actor_id="lifecycle.merge", note="merged near-duplicates")
            merged += folded
            clusters_n += 1 if folded else 0
    return JobResult(stats={"compared": compared, "clusters": clusters_n, "superseded": merged, **run.stats()},
                     more=more, cursor=run.cursor_after(last_user) if more and last_user else None)
