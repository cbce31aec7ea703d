"""What waits for a reviewer: memories held for review, and one user's near-duplicates shown side by side.

The merge job folds pairs at or above MEMORY_MERGE_SIMILARITY by itself. Closer than MEMORY_REVIEW_SIMILARITY but
below that, two memories are likely the same thing said differently, and likely enough not to be that a person
decides: those pairs are proposed here, with the same rules the merge job keeps (same kind; a contradiction, one
subject with two values, is never a duplicate). Two rows with one subject and one value are always proposed,
however differently worded.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db.models import OuterRef, QuerySet, Subquery, UUIDField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce

from infra.embedder import get_embedder
from tenants.models import EndUser, Tenant

from .lifecycle.merge import contradicts, support_key
from .models import MemoryKind, MemoryRecord, MemoryStatus

# The most recent active memories of a user compared on one page view (embedding them is the page's cost).
DUPLICATES_SCAN_MAX = 300
DUPLICATE_PAIRS_MAX = 50


def review_pending(*, tenant: Tenant | None = None, queryset: QuerySet | None = None) -> QuerySet:
    """Memories held for review, oldest first (the longest waiting); `queryset` narrows an already scoped one.

    Each carries `replaces_text`: the active value it would supersede once approved (a held correction names its
    target; an inferred value replaces the active row with its subject and another value), or None."""
    qs = queryset if queryset is not None else MemoryRecord.objects.for_tenant(tenant)
    active = MemoryRecord.objects.unscoped().filter(tenant=OuterRef("tenant"), user=OuterRef("user"),
                                                    status=MemoryStatus.ACTIVE).exclude(pk=OuterRef("pk"))
    named = active.filter(pk=Cast(KT("metadata__supersedes__0"), UUIDField()))
    same_subject = active.filter(subject=OuterRef("subject")).exclude(subject="").exclude(value=OuterRef("value"))
    return (qs.filter(status=MemoryStatus.PENDING_REVIEW)
            .annotate(replaces_text=Coalesce(Subquery(named.values("text")[:1]),
                                             Subquery(same_subject.order_by("-created_at").values("text")[:1])))
            .order_by("created_at", "id"))


@dataclass(frozen=True)
class DuplicatePair:
    keeper: MemoryRecord  # the better supported of the two: what a merge keeps
    other: MemoryRecord
    similarity: float
    same_subject: bool
    automatic: bool  # the merge job would fold it without a reviewer


def _norm(text: str) -> str:
    return " ".join((text or "").lower().split())


def near_duplicate_pairs(*, tenant: Tenant, user: EndUser, floor: float | None = None,
                         limit: int = DUPLICATE_PAIRS_MAX) -> list[DuplicatePair]:
    """Pairs of the user's active memories (events aside) that may say the same thing, most similar first."""
    floor = settings.MEMORY_REVIEW_SIMILARITY if floor is None else floor
    rows = list(MemoryRecord.objects.for_tenant(tenant)
                .filter(user=user, status=MemoryStatus.ACTIVE).exclude(kind=MemoryKind.EVENT)
                .select_related("source_message").order_by("-created_at", "id")[:DUPLICATES_SCAN_MAX])
    if len(rows) < 2:
        return []
    vectors = np.asarray(get_embedder().embed([r.text for r in rows]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
    sims = vectors @ vectors.T
    pairs = []
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            a, b = rows[i], rows[j]
            if a.kind != b.kind or contradicts(a, b):
                continue
            same_subject = bool(a.subject and _norm(a.subject) == _norm(b.subject)
                                and _norm(a.value) == _norm(b.value))
            sim = float(sims[i, j])
            if sim < floor and not same_subject:
                continue
            keeper, other = (a, b) if support_key(a) >= support_key(b) else (b, a)
            pairs.append(DuplicatePair(keeper=keeper, other=other, similarity=sim, same_subject=same_subject,
                                       automatic=sim >= settings.MEMORY_MERGE_SIMILARITY))
    pairs.sort(key=lambda p: (-p.similarity, str(p.keeper.pk)))
    return pairs[:limit]
