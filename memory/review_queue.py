"""What waits for a reviewer: memories held for review, and one user's repeated memories shown side by side.

A repeat is the same text stored twice, or nearly the same (a word or a few letters apart), passages of the
transcript included; or two rows with one subject and one value, however worded. The rules the merge job keeps hold
here too (same kind; a contradiction, one subject with two values, is never a duplicate).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from django.db.models import OuterRef, QuerySet, Subquery, UUIDField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce

from tenants.models import EndUser, Tenant

from .lifecycle.merge import contradicts, support_key
from .models import MemoryKind, MemoryRecord, MemoryStatus

# The most recent active memories of a user compared on one page view (comparing their texts is the page's cost).
DUPLICATES_SCAN_MAX = 400
DUPLICATE_PAIRS_MAX = 50
# Two texts this alike are one text told again: a word or a few letters apart.
NEAR_IDENTICAL = 0.9


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
    similarity: float  # of the two texts' words and letters, 1.0 for the same text
    same_subject: bool
    automatic: bool  # the same text: the merge job folds it without a reviewer (its notes aside)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", (text or "").lower()).split())


# The letters of a long text compared (a pasted file is kept whole, and aligning two of them costs seconds).
COMPARED_CHARS = 2000


def text_similarity(a: str, b: str, *, words_a: frozenset | None = None, words_b: frozenset | None = None) -> float:
    """How nearly two normalised texts are the same words in the same order (difflib's ratio over their openings),
    with cheap bounds first: most pairs of a user's memories differ in length or words and are never aligned."""
    if a == b:
        return 1.0
    if not a or not b or 2 * min(len(a), len(b)) / (len(a) + len(b)) < NEAR_IDENTICAL:
        return 0.0
    words_a = frozenset(a.split()) if words_a is None else words_a
    words_b = frozenset(b.split()) if words_b is None else words_b
    if 2 * len(words_a & words_b) / (len(words_a) + len(words_b)) < NEAR_IDENTICAL - 0.15:
        return 0.0
    matcher = SequenceMatcher(None, a[:COMPARED_CHARS], b[:COMPARED_CHARS], autojunk=False)
    if matcher.quick_ratio() < NEAR_IDENTICAL:
        return 0.0
    return matcher.ratio()


def near_duplicate_pairs(*, tenant: Tenant, user: EndUser, floor: float | None = None,
                         limit: int = DUPLICATE_PAIRS_MAX) -> list[DuplicatePair]:
    """Pairs of the user's active memories, passages included, that say the same thing: the same text, near the
    same text (a word or a few letters apart), or one subject with one value however worded; most alike first.
    Meaning alone is not enough: two unrelated goals phrased alike ("needs help with the implementation details",
    "needs to plan tasks") sit close in vector space and are no repeat."""
    floor = NEAR_IDENTICAL if floor is None else floor
    rows = list(MemoryRecord.objects.for_tenant(tenant)
                .filter(user=user, status=MemoryStatus.ACTIVE)
                .select_related("source_message").order_by("-created_at", "id")[:DUPLICATES_SCAN_MAX])
    texts = [_norm(r.text) for r in rows]
    words = [frozenset(t.split()) for t in texts]
    pairs = []
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            a, b = rows[i], rows[j]
            if a.kind != b.kind or contradicts(a, b):
                continue
            same_subject = bool(a.subject and _norm(a.subject) == _norm(b.subject)
                                and _norm(a.value) == _norm(b.value))
            sim = text_similarity(texts[i], texts[j], words_a=words[i], words_b=words[j])
            if sim < floor and not same_subject:
                continue
            keeper, other = (a, b) if support_key(a) >= support_key(b) else (b, a)
            pairs.append(DuplicatePair(keeper=keeper, other=other, similarity=sim, same_subject=same_subject,
                                       automatic=sim == 1.0 and a.kind != MemoryKind.NOTE))
    pairs.sort(key=lambda p: (-p.similarity, str(p.keeper.pk)))
    return pairs[:limit]
