"""The context composer: a session's buffer, linked bridges and long-term memories turned into the model's
messages under a token budget.

Sections in priority order: system prompt and tools; the user's standing profile (instructions, preferences and key
facts, shown on every turn whatever it is about); the linked sessions' bridges (first turn only); summary anchors;
goal stack and session facts; retrieved memories with provenance; recent turns. Each section has its allowance
from context.budget; when the total is still over budget, the lowest-priority section shrinks first. The total is
counted with the tokenizer over the final messages, so the result never exceeds the budget.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings

from infra.errors import ValidationFailed
from infra.tokens import count_message_tokens, count_tokens, count_tokens_known, message_tokens, truncate_to_tokens

from .anchors import anchor_label
from .budget import SECTIONS, as_budget, tool_tokens
from .buffer import Buffer, buffer_get
from .links import LinkedBridge, links_bridges_for
from .memory_section import memories_render, profile_section_render, with_profile

log = logging.getLogger(__name__)

_CONTEXT_SECTIONS = SECTIONS[:-1]  # rendered into the system message; recent turns are messages of their own
_KIND_LABEL = {"same_user": "previous session", "similar_goal": "earlier session with a similar goal",
               "referenced_context": "the session the user refers to"}


@dataclass
class TurnContext:
    """Everything a turn needs from memory, built once."""

    messages: list[dict]  # OpenAI chat format
    breakdown: dict  # section → tokens
    memories: list  # the RetrievedMemory objects that made it into the context
    total_tokens: int  # messages (tokenizer count, with framing) + tool definitions
    budget: int
    memory_status: str = "ok"  # "ok" | "unavailable"
    tools: list[dict] = field(default_factory=list)
    first_turn: bool = False
    bridges: list[LinkedBridge] = field(default_factory=list)
    goal: str = ""
    caps: dict = field(default_factory=dict)
    echoed: bool = False  # the input is already the session's last message (stored by the client, or a retried turn)
    profile: list = field(default_factory=list)  # the standing profile entries shown (memory.profile.ProfileEntry)


# --- rendering, each within a token limit ----------------------------------------------------------------------


def _fit(header: str, items: list[str], limit: int, *, footer: str = "",
         newest_first: bool = False) -> tuple[str, list[int], int]:
    """header + as many items as fit (+ footer) within limit tokens: the text, the kept indexes, its tokens.

    Items are taken in order (or newest first, then shown in order); the first that does not fit is cut
    short when there is room for a useful part of it, and nothing after it is taken. The token figure is the
    sum of the parts (a join can tokenize a little differently; the composer counts the final messages).
    """
    if limit <= 0 or not items:
        return "", [], 0
    fixed = count_tokens(header) + (count_tokens(footer) + 1 if footer else 0)
    room = limit - fixed
    if room <= 1:
        return "", [], 0
    order = list(range(len(items)))[::-1] if newest_first else list(range(len(items)))
    kept: dict[int, str] = {}
    for i in order:
        cost = count_tokens(items[i]) + 1
        if cost <= room:
            kept[i] = items[i]
            room -= cost
            continue
        if room >= 12:
            kept[i] = truncate_to_tokens(items[i], room - 1)
            room -= count_tokens(kept[i]) + 1
        break
    if not kept:
        return "", [], 0
    keys = sorted(kept)
    text = "\n".join([header, *(kept[k] for k in keys), *([footer] if footer else [])])
    return text, keys, limit - room


def _render_bridges(bridges: list[LinkedBridge], limit: int) -> tuple[str, int]:
    items = []
    for b in bridges:
        when = f", closed {b.closed_at.day} {b.closed_at:%b %Y}" if b.closed_at else ""
        items.append(f"- From the {_KIND_LABEL.get(b.kind, 'linked session')}{when}: {b.text}")
    text, _, tokens = _fit("## Where earlier sessions left off", items, limit)
    return text, tokens


def _render_anchors(buf: Buffer, limit: int) -> tuple[str, int]:
    items = [f"- {anchor_label(a.get('first_turn', 0), a.get('last_turn', 0))}: {a['text']}" for a in buf.anchors]
    text, _, tokens = _fit("## Earlier in this session", items, limit, newest_first=True)
    return text, tokens


def _render_state(buf: Buffer, limit: int) -> tuple[str, int]:
    items = []
    if buf.goal:
        items.append(f"Goal: {buf.goal}")
    items += [f"Subgoal (open): {s}" for s in buf.open_subgoals]
    items += [f"Finding: {s}" for s in buf.notes.get("key_findings", [])]
    items += [f"Open question: {s}" for s in buf.notes.get("open_questions", [])]
    items += [f"Fact: {f['text']}" for f in buf.facts]
    items += [f"Done: {s}" for s in buf.done_subgoals]
    for t in reversed(buf.tools):
        times = f" ×{t['count']}" if int(t.get("count") or 1) > 1 else ""
        items.append(f"Tool: {t['tool']}({t['args']}) → {t['outcome']} [{t['status']}]{times}")
    text, _, tokens = _fit(f"## This session (turn {buf.turns})", items, limit)
    return text, tokens


def _openai_message(m: dict) -> dict:
    out = {"role": m["role"], "content": m.get("content") or ""}
    if m["role"] == "tool":
        out["tool_call_id"] = m.get("tool_call_id") or ""
    elif m.get("name"):
        out["name"] = m["name"]
    if m["role"] == "assistant" and m.get("tool_calls"):
        out["tool_calls"] = m["tool_calls"]
    return out


def _paired(messages: list[dict]) -> list[dict]:
    """Keep the tool-call protocol valid: no tool message without its call, no call without its answer."""
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    called = set()
    out = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = {c.get("id") for c in m["tool_calls"]}
            if not ids <= answered:
                m = {k: v for k, v in m.items() if k != "tool_calls"}
            else:
                called |= ids
        if m["role"] == "tool" and m.get("tool_call_id") not in called:
            continue
        out.append(m)
    return out


def _turn_groups(recent: list[dict]) -> list[list[dict]]:
    groups: list[list[dict]] = []
    for m in recent:
        if m["role"] == "user" or not groups:
            groups.append([m])
        else:
            groups[-1].append(m)
    return groups


def _render_recent(groups: list[list[dict]], limit: int) -> list[dict]:
    """Whole turns, newest first, while they fit; when even the newest does not, its user message cut short."""
    chosen: list[dict] = []
    used = 0
    for group in reversed(groups):
        msgs = _paired([_openai_message(m) for m in group])
        cost = sum(message_tokens(m) for m in msgs)
        if used + cost <= limit:
            chosen = msgs + chosen
            used += cost
            continue
        if not chosen and msgs and msgs[0]["role"] == "user":
            first = dict(msgs[0])
            room = limit - (message_tokens({**first, "content": ""}))
            if room >= 8:
                first["content"] = truncate_to_tokens(first["content"], room)
                if message_tokens(first) <= limit:
                    chosen = [first]
        break
    return chosen


# --- composing -------------------------------------------------------------------------------------------------


@dataclass
class Rendered:
    """One section as rendered within its limit."""

    text: str = ""
    tokens: int = 0
    messages: list = field(default_factory=list)  # recent turns
    kept: list = field(default_factory=list)  # memories that made it in


def memory_query(new_input: str, buf: Buffer) -> str:
    """What long-term memory is searched with for a turn: the new input, or the session's goal without one."""
    return (new_input or "").strip() or buf.goal


def context_compose(*, tenant, session, new_input: str, budget=None, tools: list[dict] | None = None,
                    system_prompt: str | None = None, buffer: Buffer | None = None, memories: list | None = None,
                    memory_status: str = "ok", prompt_apart: bool = False, profile: list | None = None,
                    resume_from_seq: int | None = None) -> TurnContext:
    """The model's messages for the session's next turn from its buffer, its linked bridges and the memories
    retrieved for it (orchestration.context finds those). Redis errors propagate (the API answers 503).

    prompt_apart=True puts the system prompt in a message of its own, ahead of a second system message with the
    context sections: the prompt (and the tool definitions a chat template renders after it) is then the same
    prefix on every call, which a model server's prompt cache reuses instead of reading it again each turn.
    profile: the user's standing profile entries (memory.profile.profile_select), most binding first.

    resume_from_seq: the session's turn that starts at this message (the input, already stored) is still open,
    waiting on a client's tool results; it and its steps are left out of the recent turns, for the caller to
    continue from them."""
    plan = as_budget(budget)
    new_input = new_input or ""
    tools = list(tools or [])
    tools_tokens = tool_tokens(tools)
    if tools_tokens > plan.total:
        raise ValidationFailed("The token budget is smaller than the tool definitions.", code="budget_too_small")
    buf = buffer or buffer_get(tenant_id=tenant.pk, user_id=session.user_id, session_id=session.pk,
                               db_seq=session.message_seq)

    recent = list(buf.recent)
    for m in recent:
        if m.get("tokens"):  # counted when stored, with the same tokenizer
            count_tokens_known(m.get("content") or "", int(m["tokens"]))
    echoed = bool(new_input.strip() and recent and recent[-1]["role"] == "user"
                  and recent[-1]["content"].strip() == new_input.strip())
    if resume_from_seq is not None:
        recent, echoed = [m for m in recent if int(m.get("seq") or 0) < resume_from_seq], True
    elif echoed:  # the input was already appended; it goes last as the input, not twice
        recent = recent[:-1]
    first_turn = buf.turns - (1 if echoed else 0) <= 0
    bridges = links_bridges_for(tenant=tenant, session=session, first_message=new_input) if first_turn else []

    memories = list(memories or [])
    groups = _turn_groups(recent)
    prompt = settings.CONTINUUM_SYSTEM_PROMPT if system_prompt is None else system_prompt

    def render(section: str, limit: int) -> Rendered:
        limit = max(0, limit)
        if section == "system":
            if limit <= tools_tokens:
                return Rendered(tokens=tools_tokens)
            text = prompt if count_tokens(prompt) <= limit - tools_tokens else \
                truncate_to_tokens(prompt, limit - tools_tokens)
            return Rendered(text=text, tokens=count_tokens(text) + tools_tokens)
        if section == "profile":
            text, tokens, kept = profile_section_render(profile, limit_tokens=plan.profile_limit(limit))
            return Rendered(text=text, tokens=tokens, kept=kept)
        if section == "bridge":
            return Rendered(*_render_bridges(bridges, limit))
        if section == "anchors":
            return Rendered(*_render_anchors(buf, limit))
        if section == "state":
            return Rendered(*_render_state(buf, limit))
        if section == "memories":
            text, tokens, kept = memories_render(memories, limit)
            return Rendered(text=text, tokens=tokens, kept=kept)
        chosen = _render_recent(groups, limit)
        return Rendered(messages=chosen, tokens=sum(message_tokens(m) for m in chosen))

    values = {s: render(s, plan.section_limit(s)) for s in SECTIONS}
    input_text = new_input

    def assemble() -> list[dict]:
        texts = [with_profile(values["memories"].text, values["profile"].text) if s == "memories" else values[s].text
                 for s in _CONTEXT_SECTIONS if s != "profile"]
        texts = [t for t in texts if t]
        if prompt_apart and values["system"].text:
            context = "\n\n".join(texts[1:])
            msgs = [{"role": "system", "content": texts[0]}] + ([{"role": "system", "content": context}]
                                                                 if context else [])
        else:
            system = "\n\n".join(texts)
            msgs = [{"role": "system", "content": system}] if system else []
        msgs += values["recent"].messages
        if input_text:
            msgs.append({"role": "user", "content": input_text})
        return msgs

    # The total is counted over the final messages, so the budget holds however the parts tokenize together.
    messages = assemble()
    total = count_message_tokens(messages) + tools_tokens
    for _ in range(12):
        if total <= plan.total:
            break
        excess = total - plan.total
        for s in reversed(SECTIONS):  # lowest priority shrinks first
            if values[s].tokens <= (tools_tokens if s == "system" else 0):
                continue
            if s == "system" and input_text:
                # the user's own words go before the system prompt does
                keep = max(0, count_tokens(input_text) - excess - 1)
                input_text = truncate_to_tokens(input_text, keep) if keep > 0 else ""
                break
            before = values[s].tokens
            values[s] = render(s, before - excess - 1)
            excess -= before - values[s].tokens
            if excess <= 0:
                break
        else:
            input_text = ""
        messages = assemble()
        total = count_message_tokens(messages) + tools_tokens
    if total > plan.total:
        raise ValidationFailed("The token budget is too small for this context.", code="budget_too_small")

    breakdown = {s: values[s].tokens for s in SECTIONS}
    breakdown["input"] = message_tokens({"role": "user", "content": input_text}) if input_text else 0
    return TurnContext(messages=messages, breakdown=breakdown, memories=values["memories"].kept,
                       total_tokens=total, budget=plan.total, memory_status=memory_status, tools=tools,
                       first_turn=first_turn, bridges=bridges if values["bridge"].text else [], goal=buf.goal,
                       caps=dict(plan.caps), echoed=echoed, profile=values["profile"].kept)
