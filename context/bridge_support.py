"""Which sentences of a bridge summary rest on what happened in its session.

A sentence is supported when at least half of its content words (stemmed, stopwords aside) were said by the user or
returned by a tool in that session. A bridge condenses, so not every word need appear; a sentence most of whose words
appear nowhere there was written from the assistant's own words or from nothing: a small model writes "I found a
flight" after merely setting a goal, and the next session would start from that claim. Such sentences are marked for
the reader; nothing is changed.
"""
from __future__ import annotations

from dataclasses import dataclass

from infra.sentences import sentences
from infra.vector_store.sparse import query_sparse
from sessions.models import Message, Session
from tenants.models import Tenant

SUPPORT_SHARE = 0.5
MESSAGES_READ_MAX = 500
# The words a bridge frames its parts with say nothing about the session.
_FRAME = "goal found decided still open nothing was left yet no clear stated"


@dataclass(frozen=True)
class BridgeSentence:
    text: str
    supported: bool


def _terms(text: str) -> set[int]:
    vector = query_sparse(text)
    return set(vector.indices) if vector is not None else set()


def bridge_support(*, tenant: Tenant, session: Session, text: str) -> list[BridgeSentence]:
    said: set[int] = set()
    for content in (Message.objects.for_tenant(tenant).filter(session=session, role__in=["user", "tool"])
                    .order_by("seq").values_list("content", flat=True)[:MESSAGES_READ_MAX]):
        said |= _terms(content)
    frame = _terms(_FRAME)
    out = []
    for sentence in sentences(text):
        terms = _terms(sentence) - frame
        out.append(BridgeSentence(sentence, not terms or len(terms & said) / len(terms) >= SUPPORT_SHARE))
    return out
