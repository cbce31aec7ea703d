"""The part of a long memory that answers a query: its best sentences, in their order, with a marker where text
was cut.

A long message (code, lists, plans) usually answers a question in a sentence or two; shown whole, one message takes
the room of several, and a budget holds evidence from fewer turns. Sentences are scored by the query's words they
contain, each weighted by how rare it is among the memories being ranked (a word every candidate shares says
nothing about which sentence answers), so no model and no tuning to any conversation is involved.
"""
from __future__ import annotations

import math
import re

from django.conf import settings

from infra.sentences import sentence_spans
from infra.tokens import count_tokens, truncate_to_tokens

CUT = "…"  # what the model reads where a part of the memory was left out
_WORD = re.compile(r"[^\W_]+", re.U)
# Words that carry no topic: they would make every sentence look relevant.
_STOP = frozenset("""a an the and or but if of to in on at by for with from as is are was were be been being it its
this that these those there here what which who whom whose when where why how do does did done have has had i me my
we our you your he she they them their his her not no so than then too very can could would should will shall may
might must about into over after before up down out just also any all some one""".split())


def _key(word: str) -> str:
    """A crude stem: "listens" and "listen", "deployed" and "deploy" meet at their first five letters."""
    return word[:5] if len(word) > 5 else word


def query_keys(query: str) -> set[str]:
    return {_key(w) for w in _WORD.findall(query.lower()) if w not in _STOP and len(w) > 1}


def key_weights(keys: set[str], texts: list[str]) -> dict[str, float]:
    """Inverse document frequency of each query key among the texts being ranked (a key counts where a word starts
    with it: a substring test per key, which runs on every retrieval, costs far less than splitting every text)."""
    lowered = [" " + t.lower() for t in texts]
    n = len(lowered)
    return {k: math.log(1 + n / (1 + sum(_has(low, k) for low in lowered))) for k in keys}


def _has(lowered: str, key: str) -> bool:
    """Whether a word of the lowered text (with a space in front) starts with key."""
    at = lowered.find(key)
    while at != -1:
        if not lowered[at - 1].isalnum():
            return True
        at = lowered.find(key, at + 1)
    return False


def excerpt(text: str, *, weights: dict[str, float], limit: int, prefix: str = "") -> str:
    """`text` when it fits in `limit` tokens, else its best sentences within `limit`, in the text's order, `CUT` where
    text was left out. Sentences are taken best first while the next one fits, and the taking stops at the first one
    that does not: a larger limit therefore always shows everything a smaller one shows. Returns "" when not even the
    best sentence's opening fits."""
    body = text[len(prefix):] if prefix and text.startswith(prefix) else text
    if len(text) <= limit or count_tokens(text) <= limit:  # a token is at least one character
        return text
    spans = sentence_spans(body)
    if not spans:
        return ""
    scored = []
    for i, (a, b) in enumerate(spans):
        low = " " + body[a:b].lower()
        scored.append((-sum(w for k, w in weights.items() if _has(low, k)), i))
    room = limit - count_tokens(prefix) - 2  # the cut markers at either end
    chosen: list[int] = []
    for _, i in sorted(scored):
        a, b = spans[i]
        cost = count_tokens(body[a:b].strip()) + 2
        if cost > room:
            if not chosen and room >= settings.MEMORY_EXCERPT_MIN_TOKENS:
                chosen.append(i)  # the best sentence alone is too long: its opening, cut
            break
        chosen.append(i)
        room -= cost
    if not chosen:
        return ""
    chosen.sort()
    parts, last = [], None
    for i in chosen:
        a, b = spans[i]
        sentence = body[a:b].strip()
        if last is not None:
            parts.append(" " if i == last + 1 else f" {CUT} ")
        parts.append(sentence)
        last = i
    out = "".join(parts)
    if len(chosen) == 1 and count_tokens(out) + 2 > limit - count_tokens(prefix):
        out = truncate_to_tokens(out, max(1, limit - count_tokens(prefix) - 2))
        return f"{prefix}{'' if chosen[0] == 0 else CUT + ' '}{out} {CUT}"
    lead = "" if chosen[0] == 0 else f"{CUT} "
    tail = "" if chosen[-1] == len(spans) - 1 else f" {CUT}"
    return f"{prefix}{lead}{out}{tail}"
