"""Session links: a new session points at the user's previous one (same_user), at an older one with a
semantically close goal (similar_goal), and at one the user refers back to (referenced_context).

same_user is made when the session opens; the other two need the first user message, so they are made when it
is appended (orchestration.messages calls links_create_for_first_message). Candidates are the user's closed sessions
that have a bridge; each bridge carries an embedding of its goal and text, written with it.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet

from infra.embedder import get_embedder
from infra.sentences import sentences
from infra.support import support_share
from memory.selectors import memory_replaced_texts
from sessions.models import Session
from sessions.services import session_links_claim

from .models import BridgeSummary, SessionLink
from .selectors import bridge_summaries

log = logging.getLogger(__name__)

# Phrases by which a user points back at an earlier conversation. The optional group is the thing referred to.
_REFERENCE_PATTERNS = [
    re.compile(r"\b(?:like|as|same as)\s+(?:last|the other|that)\s+time\b", re.I),
    re.compile(r"\blast time\b", re.I),
    re.compile(r"\bthe\s+((?:[\w'-]+\s+){0,3}?[\w'-]+)\s+(?:that\s+)?(?:we|you|i)\s+(?:had\s+)?"
               r"(?:discussed|talked about|mentioned|looked at|planned|booked|found|chose|picked|went over|"
               r"spoke about)\b", re.I),
    re.compile(r"\b(?:we|you)\s+(?:discussed|talked about|mentioned|looked at)\s+(?:it\s+)?(?:before|earlier|"
               r"previously|last week|yesterday)\b", re.I),
    re.compile(r"\b(?:remember|recall)\s+(?:the|when|that|our|what)\b", re.I),
    re.compile(r"\b(?:our|the)\s+(?:previous|earlier|last)\s+(?:conversation|chat|session|discussion)\b", re.I),
    re.compile(r"\b(?:continue|pick up)\s+(?:where|from where)\s+we\s+left\s+off\b", re.I),
]
_STOP = frozenset("a an the this that these those it its we you i me my our your to of for in on at with and or "
                  "but is was were be been do did done have had has like last time about".split())
_KIND_ORDER = {SessionLink.Kind.REFERENCED_CONTEXT: 0, SessionLink.Kind.SIMILAR_GOAL: 1, SessionLink.Kind.SAME_USER: 2}


@dataclass(frozen=True)
class LinkSuggestion:
    kind: str
    session_id: str
    score: float


@dataclass(frozen=True)
class LinkedBridge:
    """A linked session's bridge, as the composer injects it into the first turn."""

    kind: str
    session_id: str
    text: str
    goal: str
    closed_at: datetime | None
    score: float


def reference_in(text: str) -> tuple[bool, list[str]]:
    """Whether the text refers back to an earlier conversation, and the words naming what it refers to."""
    words: list[str] = []
    hit = False
    for pattern in _REFERENCE_PATTERNS:
        for m in pattern.finditer(text or ""):
            hit = True
            if m.groups() and m.group(1):
                words += [w for w in re.findall(r"[\w'-]+", m.group(1).lower()) if w not in _STOP]
    return hit, words


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def bridge_embedding_text(bridge: BridgeSummary) -> str:
    return f"{bridge.goal}\n{bridge.text}".strip()


def _candidates(session: Session) -> list[BridgeSummary]:
    return list(BridgeSummary.objects.for_tenant(session.tenant_id).filter(session__user_id=session.user_id,
                                                                          session__state=Session.State.CLOSED)
                .exclude(session_id=session.pk).select_related("session")
                .order_by("-session__opened_at")[: settings.CONTINUUM_LINK_CANDIDATES])


def _vectors(bridges: list[BridgeSummary], *, save: bool) -> list[list[float]]:
    """Each bridge's stored embedding; missing ones are embedded now (and stored when save)."""
    missing = [b for b in bridges if not b.goal_embedding]
    if missing:
        vecs = get_embedder().embed([bridge_embedding_text(b) for b in missing])
        for b, v in zip(missing, vecs):
            b.goal_embedding = v
            if save:
                BridgeSummary.objects.for_tenant(b.tenant_id).filter(pk=b.pk, goal_embedding__isnull=True) \
                    .update(goal_embedding=v)
    return [b.goal_embedding for b in bridges]


def links_suggest(*, session: Session, text: str, save_embeddings: bool = False) -> list[LinkSuggestion]:
    """similar_goal and referenced_context candidates for a session whose first user message is text."""
    text = (text or "").strip()
    if not text:
        return []
    bridges = _candidates(session)
    if not bridges:
        return []
    query = get_embedder().embed([text])[0]
    sims = [_cosine(query, v) for v in _vectors(bridges, save=save_embeddings)]
    out: list[LinkSuggestion] = []
    best = max(range(len(bridges)), key=lambda i: sims[i])
    if sims[best] >= settings.CONTINUUM_LINK_SIMILARITY_THRESHOLD:
        out.append(LinkSuggestion(SessionLink.Kind.SIMILAR_GOAL, str(bridges[best].session_id), round(sims[best], 4)))
    referenced, words = reference_in(text)
    if referenced:
        scores = []
        for b, sim in zip(bridges, sims):
            body = set(re.findall(r"[\w'-]+", bridge_embedding_text(b).lower()))
            overlap = sum(1 for w in words if w in body or w.rstrip("s") in body)
            scores.append(sim + (0.3 if overlap else 0.0))
        pick = max(range(len(bridges)), key=lambda i: (scores[i], -i))
        if scores[pick] >= settings.CONTINUUM_LINK_REFERENCE_THRESHOLD:
            out.append(LinkSuggestion(SessionLink.Kind.REFERENCED_CONTEXT, str(bridges[pick].session_id),
                                      round(scores[pick], 4)))
        elif not words:
            # "like last time" with nothing more to go on: the latest earlier session is the one meant.
            out.append(LinkSuggestion(SessionLink.Kind.REFERENCED_CONTEXT, str(bridges[0].session_id),
                                      round(scores[0], 4)))
    return out


def _link(session: Session, to_session_id, kind: str, score: float) -> SessionLink:
    try:
        with transaction.atomic():
            link, _ = SessionLink.objects.for_tenant(session.tenant_id).get_or_create(
                tenant_id=session.tenant_id, from_session=session,
                                                        to_session_id=to_session_id, kind=kind,
                                                        defaults={"score": score})
    except IntegrityError:  # a concurrent creator won the unique (from, to, kind)
        link = SessionLink.objects.for_tenant(session.tenant_id).get(from_session=session,
                                                                      to_session_id=to_session_id, kind=kind)
    return link


def links_create_for_new_session(*, tenant_id, session_id) -> list[SessionLink]:
    """same_user: the user's previous session (called after the open commits)."""
    session = Session.objects.for_tenant(tenant_id).filter(pk=session_id).first()
    if session is None or session.previous_id is None:
        return []
    return [_link(session, session.previous_id, SessionLink.Kind.SAME_USER, 1.0)]


def links_create_for_first_message(*, tenant_id, session_id, text: str) -> list[SessionLink]:
    """similar_goal and referenced_context, once per session: the first caller claims the check."""
    if not session_links_claim(tenant_id=tenant_id, session_id=session_id):
        return []
    session = Session.objects.for_tenant(tenant_id).get(pk=session_id)
    return [_link(session, s.session_id, s.kind, s.score)
            for s in links_suggest(session=session, text=text, save_embeddings=True)]


def link_list(*, tenant, session: Session) -> QuerySet[SessionLink]:
    """Links from and to a session, within the tenant."""
    return (SessionLink.objects.for_tenant(tenant).filter(Q(from_session=session) | Q(to_session=session))
            .select_related("from_session", "to_session").order_by("created_at", "id"))


def links_with_bridges(*, tenant, session: Session) -> list[dict]:
    """Links from and to a session, each with its direction, the other session and that session's bridge (text,
    goal, method) when it has one."""
    links = list(link_list(tenant=tenant, session=session))
    other = {link.to_session_id if link.from_session_id == session.pk else link.from_session_id for link in links}
    bridges = bridge_summaries(tenant=tenant, session_ids=other)
    rows = []
    for link in links:
        out = link.from_session_id == session.pk
        sid = link.to_session_id if out else link.from_session_id
        b = bridges.get(sid)
        rows.append({"kind": link.kind, "direction": "out" if out else "in", "session_id": str(sid),
                     "score": link.score, "created_at": link.created_at,
                     "bridge": {"text": b.text, "goal": b.goal, "method": b.method} if b else None})
    return rows


def links_bridges_for(*, tenant, session: Session, first_message: str = "") -> list[LinkedBridge]:
    """Bridges of the sessions this one links to, most specific link first, one per session.

    When the first message has not been appended yet (a client asking for context before posting it), the
    similar_goal and referenced_context links are worked out on the fly and not stored.
    """
    rows = [(link.kind, link.to_session_id, link.score) for link in
            SessionLink.objects.for_tenant(tenant).filter(from_session=session)]
    if first_message and session.links_checked_at is None:
        try:
            rows += [(s.kind, s.session_id, s.score) for s in links_suggest(session=session, text=first_message)]
        except Exception:  # an embedder failure costs the first turn its suggestions, nothing more
            log.exception("suggesting links for session %s failed", session.pk)
    if not rows:
        return []
    bridges = {str(b.session_id): b for b in BridgeSummary.objects.for_tenant(tenant).filter(
        session_id__in={str(r[1]) for r in rows}).select_related("session")}
    replaced = memory_replaced_texts(tenant=tenant, user_id=session.user_id) if bridges else []
    out, seen = [], set()
    for kind, sid, score in sorted(rows, key=lambda r: (_KIND_ORDER.get(r[0], 9), -r[2])):
        b = bridges.get(str(sid))
        if b is None or str(sid) in seen:
            continue
        seen.add(str(sid))
        out.append(LinkedBridge(kind=kind, session_id=str(sid), text=bridge_current(b.text, replaced), goal=b.goal,
                                closed_at=b.session.closed_at, score=score))
    return out


# A bridge line that says what a replaced statement says: most of its words (its "Found:" label and the speaker aside).
REPLACED_SHARE = 0.75
_BRIDGE_LABELS = ("goal", "found", "decided", "still", "open", "done")


def bridge_current(text: str, replaced: list[str]) -> str:
    """The bridge without the sentences that repeat a statement the user has since replaced: a bridge was written when
    the old value held, and the next session must not meet it as current (the replaced value comes back only when a
    question asks what held before, through retrieval)."""
    if not replaced:
        return text
    kept = [s for s in sentences(text) if support_share(s, replaced, ignore=_BRIDGE_LABELS) < REPLACED_SHARE]
    return " ".join(kept)
