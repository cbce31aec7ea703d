"""Bridge summaries: what a closed session hands to the user's next one, written exactly once.

bridge_write is safe to run any number of times, concurrently or after a crash part-way: the bridge row is
OneToOne with the session (the database keeps one), and a rerun finds the bridge and returns it.
"""
from __future__ import annotations

import logging
import re

from django.db import IntegrityError, transaction

from infra import llm
from infra.embedder import get_embedder
from infra.errors import AppError
from infra.secrets import secrets_redacted
from infra.sentences import sentences
from infra.tokens import count_tokens, truncate_to_tokens
from sessions.models import Message, Session
from webhooks.events import webhook_event_emit

from .anchors import sentence_score
from .buffer_rebuild import buffer_build_from_db
from .grounded_notes import note_ground, sentence_supported
from .models import BridgeSummary

log = logging.getLogger(__name__)

# What someone says when they settle something: the bridge's "decided" and a session note's decision lines.
DECISION_CUE = re.compile(r"\b(let's|let us|decided|decide|go with|i'll take|i will take|book it|book the|choose|chose|"
                       r"pick|confirm|settle|agreed|switch|change (?:it|the)|i'll go|yes,? (?:please|do it))\b", re.I)
_FINDING = re.compile(r"\b(found|there (?:is|are)|available|costs?|priced|option|departs?|arrives?|comes to|"
                      r"total|returns?|shows?)\b|\$|€|£|\d", re.I)
_PART_TOKENS = 40


def _clean(text: str) -> str:
    return " ".join(text.split()).strip().rstrip(".;:,! ")


def _part(items: list[str]) -> str:
    return truncate_to_tokens(" / ".join(_clean(i) for i in items if _clean(i)), _PART_TOKENS)


def _sentence(text: str) -> str:
    text = text.rstrip(".;:, ")
    text = text[:1].upper() + text[1:]
    return text if text.endswith(("?", "…")) else text + "."


def bridge_parts(doc: dict, messages: list[dict]) -> dict:
    """Goal, what was found, what was decided and what is open, from the buffer state and the transcript."""
    users = [m for m in messages if m["role"] == "user"]
    assistants = [m for m in messages if m["role"] in ("assistant", "tool")]
    goal = doc.get("goal") or ""
    if not goal and users:
        goal = next((s for m in users for s in sentences(m["content"]) if sentence_score(s) >= 2),
                    sentences(users[0]["content"])[0] if sentences(users[0]["content"]) else "")
    notes = doc.get("notes") or {}
    found = list(notes.get("key_findings") or [])
    if not found:
        found = [f"{t['tool']}: {t['outcome']}" for t in (doc.get("tools") or []) if t.get("status") == "ok"][-2:]
    if not found:
        found = [f["text"] for f in (doc.get("facts") or [])][:2]
    if not found:
        found = [s for m in assistants[-6:] for s in sentences(m["content"]) if _FINDING.search(s)][-2:]
    decided = [s["text"] for s in doc.get("subgoals") or [] if s.get("status") == "done"][-2:]
    decided += [s for m in users for s in sentences(m["content"]) if DECISION_CUE.search(s)][-2:]
    open_items = list(notes.get("open_questions") or [])
    if not open_items:
        open_items = [s["text"] for s in doc.get("subgoals") or [] if s.get("status") != "done"]
    if not open_items:
        open_items = [s for m in users[-2:] for s in sentences(m["content"]) if s.endswith("?")][-2:]
    return {"goal": _part([goal]) if goal else "", "found": _part(found[:2]), "decided": _part(decided[-2:]),
            "open": _part(open_items[:2])}


def extractive_bridge(parts: dict) -> str:
    """Three sentences: the goal, what was found and decided, what is still open."""
    first = _sentence(f"Goal: {parts['goal']}") if parts["goal"] else "No clear goal was stated."
    middle = "; ".join(x for x in (f"found: {parts['found']}" if parts["found"] else "",
                                   f"decided: {parts['decided']}" if parts["decided"] else "") if x)
    second = _sentence(middle) if middle else "Nothing was found or decided yet."
    third = _sentence(f"Still open: {parts['open']}") if parts["open"] else "Nothing was left open."
    return " ".join((first, second, third))


# Bounds in characters: a part is kept to _PART_TOKENS tokens and the summary to 160 (~4 characters a token).
_PART = {"type": "string", "maxLength": 4 * _PART_TOKENS}
# The summary comes first: a grammar-constrained model writes the fields in this order, and the note the next
# session reads is then written straight from the transcript. After four fields in its own words a small model
# drifts (it wrote the parts in the user's voice, then a summary that repeated one of them).
_BRIDGE_SCHEMA = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "maxLength": 640},
        "goal": _PART,
        "found": _PART,
        "decided": _PART,
        "open": _PART,
    },
    "required": ["summary", "goal", "found", "decided", "open"],
    "additionalProperties": False,
}


def abstractive_bridge(doc: dict, messages: list[dict]) -> tuple[str, dict]:
    """An LLM's 2–3 sentence bridge (structured output). Raises ServiceUnavailable or ValueError."""
    anchors = "\n".join(f"- {a['text']}" for a in doc.get("anchors") or [])
    transcript = truncate_to_tokens("\n".join(f"{m['role']}: {m['content']}" for m in messages[-60:] if m["content"]),
                                    4000)
    notes = doc.get("notes") or {}
    state = (f"Goal: {doc.get('goal') or '(none)'}\nKey findings: {notes.get('key_findings') or []}\n"
             f"Open questions: {notes.get('open_questions') or []}\nSummaries of earlier turns:\n{anchors}")
    out = llm.structured_completion(
        system=("You write the hand-over note between two conversations with the same user. In 2 or 3 sentences "
                "state the user's goal, what was found, what was decided and what is still open. Be concrete "
                "(names, numbers, dates). Report what was said: a request in the transcript is something the user or "
                "the assistant asked for, written as such ('The user asked for ...')."),
        user=f"<state>\n{state}\n</state>\n<transcript>\n{transcript}\n</transcript>",
        schema_name="bridge_summary", schema=_BRIDGE_SCHEMA, kind="bridge")
    if not isinstance(out, dict) or not str(out.get("summary") or "").strip():
        raise ValueError("bridge summary missing")
    parts = {k: _clean(str(out.get(k) or "")) for k in ("goal", "found", "decided", "open")}
    return truncate_to_tokens(_first_sentences(str(out["summary"]), 3), 160), parts


def _first_sentences(text: str, n: int) -> str:
    """The note's first n distinct sentences (the prompt asks for 2 or 3): a small model that runs on repeats its
    last sentence, or a variant of it, until the length bound stops it mid-word."""
    kept, seen = [], set()
    for sentence in sentences(text.strip()):
        key = " ".join(sentence.lower().split()[:8])
        if key not in seen:
            seen.add(key)
            kept.append(sentence)
    return " ".join(kept[:n])


def _compose(session: Session) -> tuple[str, dict, str]:
    doc = buffer_build_from_db(tenant_id=session.tenant_id, user_id=session.user_id, session_id=session.pk)
    messages = list(Message.objects.for_tenant(session.tenant_id).filter(session=session).order_by("-seq")
                    .values("role", "content")[:500])[::-1]
    parts = bridge_parts(doc, messages)
    if llm.llm_configured() and messages:
        try:
            text, llm_parts = abstractive_bridge(doc, messages)
        except (AppError, ValueError, KeyError, TypeError) as exc:
            log.warning("abstractive bridge for session %s failed (%s); writing it extractively", session.pk, exc)
        else:
            text, llm_parts = _grounded(text, llm_parts, doc=doc, messages=messages, session=session)
            if text:
                return text, {**parts, **{k: v for k, v in llm_parts.items() if v}}, "abstractive"
            log.info("no sentence of session %s's abstractive bridge is supported by its turns; extractive", session.pk)
    return extractive_bridge(parts), parts, "extractive"


def _grounded(text: str, llm_parts: dict, *, doc: dict, messages: list[dict], session: Session) -> tuple[str, dict]:
    """The model's bridge and parts, less every sentence the session's turns and tool calls do not support."""
    tools_done = [(t["tool"], f"{t.get('args') or ''} {t.get('outcome') or ''}") for t in doc.get("tools") or []
                  if t.get("status") == "ok" and t.get("tool")]
    ignore = tuple((session.user.display_name or "").split())
    text, dropped = note_ground(text, turns=messages, tools_done=tools_done, ignore=ignore)
    if dropped:
        log.info("bridge of session %s: %d unsupported sentence(s) dropped", session.pk, len(dropped))
    sources = [m["content"] for m in messages]
    parts = {k: v for k, v in llm_parts.items()
             if v and sentence_supported(v, sources=sources, tools_done=tools_done, ignore=ignore)}
    return text, parts


def _embedding(goal: str, text: str) -> list[float] | None:
    try:
        return get_embedder().embed([f"{goal}\n{text}".strip()])[0]
    except Exception:  # links can embed it later; the bridge must not wait on the embedder
        log.warning("embedding a bridge failed; links will embed it on demand", exc_info=True)
        return None


def _written_announce(bridge: BridgeSummary, session: Session) -> None:
    webhook_event_emit(tenant_id=session.tenant_id, event_type="bridge.written", occurred_at=bridge.created_at, data={
        "bridge_id": bridge.pk, "session_id": session.pk, "user_id": session.user_id, "method": bridge.method,
        "token_count": bridge.token_count, "created_at": bridge.created_at,
    }, content={"text": bridge.text, "goal": bridge.goal, "details": bridge.details})


def bridge_write(*, session: Session) -> BridgeSummary:
    """The closed session's bridge: written the first time, found every time after."""
    bridges = BridgeSummary.objects.for_tenant(session.tenant_id)
    bridge = bridges.filter(session=session).first()
    if bridge is not None:
        return bridge
    text, parts, method = _compose(session)
    text, parts = secrets_redacted(text), secrets_redacted(parts)
    embedding = _embedding(parts.get("goal", ""), text)
    try:
        with transaction.atomic():
            bridge = BridgeSummary.objects.create(
                tenant_id=session.tenant_id, session=session, text=text, goal=parts.get("goal", ""),
                details=parts, goal_embedding=embedding, method=method, token_count=count_tokens(text))
            _written_announce(bridge, session)
            return bridge
    except IntegrityError:  # another run wrote it first: that one stands
        return bridges.get(session=session)
