"""Summary anchors: the oldest turns of a session folded into one "turns 1–12: …" note, kept in the database.

A fold is due every CONTINUUM_ANCHOR_EVERY_TURNS turns beyond the CONTINUUM_ANCHOR_KEEP_TURNS newest ones, or
earlier when the unfolded turns pass CONTINUUM_ANCHOR_TOKEN_THRESHOLD tokens. What to fold is decided from the
database (the truth), so two folds racing agree on the range and the unique (session, first_seq) keeps one.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import IntegrityError, transaction

from infra import llm
from infra.errors import AppError
from infra.redis_client import Keys, get_redis, held_lock
from infra.secrets import secrets_redacted
from infra.sentences import sentences
from infra.task_queue import task_enqueue
from infra.tokens import count_tokens, truncate_to_tokens
from sessions.models import Message

from .grounded_notes import note_ground, tool_calls_done
from .models import SummaryAnchor

log = logging.getLogger(__name__)

_CHATTER = re.compile(r"^(hi|hello|hey|thanks|thank you|ok|okay|great|cool|sure|yes|no|yep|nope|bye|good|nice|"
                      r"perfect|got it|sounds good|awesome)\b[\s!.,]*$", re.I)
_CUES = (
    # goals
    (re.compile(r"\b(i want|i need|i'd like|i would like|looking for|trying to|help me|plan(?:ning)?|goal|"
                r"hoping to|find me|searching for)\b", re.I), 3.0),
    # preferences
    (re.compile(r"\b(prefer|like|love|hate|don't like|do not like|dislike|favou?rite|rather|allergic|always|never|"
                r"usually|can't stand|avoid)\b", re.I), 3.0),
    # decisions
    (re.compile(r"\b(let's|let us|decided|decide|go with|i'll take|i will take|book|choose|chose|pick|confirm|"
                r"settle|agreed|switch|change)\b", re.I), 3.0),
    # constraints
    (re.compile(r"\b(budget|at most|at least|no more than|under|maximum|minimum|max|deadline|must|has to|"
                r"have to|only)\b", re.I), 2.0),
    # numbers, money, dates
    (re.compile(r"\d|\$|€|£|\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|"
                r"next week|january|february|march|april|may|june|july|august|september|october|november|"
                r"december)\b", re.I), 2.0),
)


def sentence_score(sentence: str) -> float:
    """How much a user sentence says about goals, preferences, decisions, numbers or open questions."""
    if _CHATTER.match(sentence) or len(sentence.split()) < 2:
        return 0.0
    score = sum(weight for pattern, weight in _CUES if pattern.search(sentence))
    if sentence.rstrip().endswith("?"):
        score += 2.0
    return score + min(len(sentence.split()) / 20.0, 0.5)


def extractive_summary(texts: list[str], *, max_tokens: int, min_score: float = 2.0) -> str:
    """Keep the informative sentences, in order, within max_tokens; the best ones win when they do not all fit."""
    sents = [s for t in texts for s in sentences(t)]
    scored = [(i, s, sentence_score(s)) for i, s in enumerate(sents)]
    keep = [x for x in scored if x[2] >= min_score]
    if not keep:
        keep = [x for x in scored if x[2] > 0][:1]
    chosen, used = [], 0
    for i, s, _ in sorted(keep, key=lambda x: (-x[2], x[0])):
        cost = count_tokens(s) + 1
        if used + cost > max_tokens:
            continue
        chosen.append((i, s))
        used += cost
    if not chosen and keep:
        return truncate_to_tokens(keep[0][1], max_tokens)
    return " ".join(s for _, s in sorted(chosen))


_ANCHOR_SCHEMA = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "maxLength": 1200},
        "decisions": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 200}},
        "open_questions": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 200}},
    },
    "required": ["summary", "decisions", "open_questions"],
    "additionalProperties": False,
}


def abstractive_summary(messages: list[dict], *, max_tokens: int) -> str:
    """An LLM's note on the turns (structured output). Raises ServiceUnavailable or ValueError on failure."""
    transcript = truncate_to_tokens("\n".join(f"{m['role']}: {m['content']}" for m in messages if m["content"]), 6000)
    words = max(20, int(max_tokens * 0.7))
    out = llm.structured_completion(
        system=("You compress part of a conversation into a short factual note for the assistant's own use later. "
                "Keep the user's goals, preferences, decisions, numbers, dates and open questions; drop chatter. "
                f"At most {words} words in all. Report what was said: a request in the transcript is something the "
                "user or the assistant asked for, written as such ('The user asked for ...')."),
        user=f"Transcript:\n<transcript>\n{transcript}\n</transcript>",
        schema_name="summary_anchor", schema=_ANCHOR_SCHEMA, kind="anchor")
    if not isinstance(out, dict) or not isinstance(out.get("summary"), str):
        raise ValueError("anchor summary missing")
    text = out["summary"].strip()
    decisions = [d for d in out.get("decisions") or [] if isinstance(d, str) and d.strip()]
    questions = [q for q in out.get("open_questions") or [] if isinstance(q, str) and q.strip()]
    if decisions:
        text += " Decided: " + "; ".join(decisions) + "."
    if questions:
        text += " Open: " + "; ".join(questions)
    return truncate_to_tokens(text.strip(), max_tokens)


@dataclass
class FoldPlan:
    first_seq: int
    last_seq: int
    first_turn: int
    last_turn: int
    messages: list[dict]


def _turns(messages: list[dict]) -> list[list[dict]]:
    """Group messages into turns, each starting at a user message (anything before the first joins it)."""
    turns: list[list[dict]] = []
    prefix: list[dict] = []
    for m in messages:
        if m["role"] == "user":
            turns.append(prefix + [m])
            prefix = []
        elif turns:
            turns[-1].append(m)
        else:
            prefix.append(m)
    return turns


def anchor_plan(*, tenant_id, session_id) -> FoldPlan | None:
    """The next range of turns to fold, from the database; None when nothing is due."""
    last = (SummaryAnchor.objects.for_tenant(tenant_id).filter(session_id=session_id).order_by("-last_seq")
            .values("last_seq", "last_turn").first())
    anchored, base_turns = (last["last_seq"], last["last_turn"]) if last else (0, 0)
    rows = list(Message.objects.for_tenant(tenant_id).filter(session_id=session_id, seq__gt=anchored).order_by("seq")
                .values("seq", "role", "name", "content", "token_count", "tool_calls", "tool_call_id"))
    turns = _turns(rows)
    every, keep = settings.CONTINUUM_ANCHOR_EVERY_TURNS, settings.CONTINUUM_ANCHOR_KEEP_TURNS
    if len(turns) - keep >= every:
        fold = turns[:every]
    else:
        tokens = sum(m["token_count"] for m in rows)
        threshold = settings.CONTINUUM_ANCHOR_TOKEN_THRESHOLD
        if tokens <= threshold or len(turns) < 2:
            return None
        fold, remaining = [], tokens
        for turn in turns[:-1]:  # the newest turn may still be in progress: never fold it
            if remaining <= threshold // 2:
                break
            fold.append(turn)
            remaining -= sum(m["token_count"] for m in turn)
    messages = [m for t in fold for m in t]
    return FoldPlan(first_seq=messages[0]["seq"], last_seq=messages[-1]["seq"], first_turn=base_turns + 1,
                    last_turn=base_turns + len(fold), messages=messages)


def anchor_label(first_turn: int, last_turn: int) -> str:
    return f"turn {first_turn}" if first_turn == last_turn else f"turns {first_turn}–{last_turn}"


def _summarize(plan: FoldPlan, *, use_llm: bool) -> tuple[str, str]:
    cap = settings.CONTINUUM_ANCHOR_MAX_TOKENS
    if use_llm:
        try:
            text = abstractive_summary(plan.messages, max_tokens=cap)
        except (AppError, ValueError, KeyError, TypeError) as exc:
            log.warning("abstractive anchor failed (%s); folding extractively", exc)
        else:
            # Only what the folded turns support; tools count by the names their results were recorded under.
            text, _ = note_ground(text, turns=plan.messages, tools_done=tool_calls_done(plan.messages))
            if text:
                return text, "abstractive"
    text = extractive_summary([m["content"] for m in plan.messages if m["role"] == "user"], max_tokens=cap)
    return text or "(small talk)", "extractive"


FOLD_LOCK_SECONDS = 120


def anchors_fold(*, tenant_id, user_id, session_id, use_llm: bool | None = None,
                 max_folds: int = 10) -> list[SummaryAnchor]:
    """Fold every due range of old turns into anchors (bounded), and put them into the buffer.

    One folder per session at a time (a Redis lock); a lost race on the database is harmless because the
    unique (session, first_seq) keeps the first anchor and the loser reuses it.
    """
    from .buffer import buffer_add_anchor  # the buffer reads anchors too: resolved at call time

    use_llm = llm.llm_configured() if use_llm is None else use_llm
    made: list[SummaryAnchor] = []
    with held_lock(Keys.anchor_fold_lock(tenant_id, user_id, session_id), timeout=FOLD_LOCK_SECONDS) as held:
        if not held:
            return []
        for _ in range(max_folds):
            plan = anchor_plan(tenant_id=tenant_id, session_id=session_id)
            if plan is None:
                break
            text, method = _summarize(plan, use_llm=use_llm)
            text = secrets_redacted(text)
            try:
                with transaction.atomic():
                    anchor = SummaryAnchor.objects.create(
                        tenant_id=tenant_id, session_id=session_id, first_seq=plan.first_seq, last_seq=plan.last_seq,
                        first_turn=plan.first_turn, last_turn=plan.last_turn, text=text,
                        token_count=count_tokens(text), method=method)
            except IntegrityError:
                anchor = SummaryAnchor.objects.for_tenant(tenant_id).get(session_id=session_id,
                                                                         first_seq=plan.first_seq)
            made.append(anchor)
            try:
                buffer_add_anchor(tenant_id=tenant_id, user_id=user_id, session_id=session_id, anchor=anchor)
            except redis.exceptions.RedisError:
                log.warning("anchor %s saved but not put into the buffer; the next rebuild picks it up", anchor.pk)
    return made


def anchors_due(*, unanchored_turns: int, unanchored_tokens: int) -> bool:
    """The cheap check the buffer makes after each append (the database decides the exact range)."""
    if unanchored_turns - settings.CONTINUUM_ANCHOR_KEEP_TURNS >= settings.CONTINUUM_ANCHOR_EVERY_TURNS:
        return True
    return unanchored_tokens > settings.CONTINUUM_ANCHOR_TOKEN_THRESHOLD and unanchored_turns >= 2


def anchors_after_append(*, tenant_id, user_id, session_id, unanchored_turns: int, unanchored_tokens: int) -> None:
    """Fold inline without an LLM; with one, hand the fold to a task (inline extractive if it falls far behind)."""
    if not anchors_due(unanchored_turns=unanchored_turns, unanchored_tokens=unanchored_tokens):
        return
    backlog = unanchored_turns >= 3 * settings.CONTINUUM_ANCHOR_EVERY_TURNS + settings.CONTINUUM_ANCHOR_KEEP_TURNS
    if not llm.llm_configured() or backlog:
        anchors_fold(tenant_id=tenant_id, user_id=user_id, session_id=session_id, use_llm=False)
        return
    flag = Keys.anchor_queued_flag(tenant_id, user_id, session_id)
    if get_redis().set(flag, "1", nx=True, ex=300):
        task_enqueue("context.tasks.anchor_fold_task", str(tenant_id), str(session_id))
