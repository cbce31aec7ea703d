"""The bounded ReAct loop: OpenAI tool calling, parallel calls, step and time limits, loop detection, valid history.

The loop sees only messages, tool definitions and an `execute(name, arguments)` callable: it reads no database and
holds no transaction, so a model call never waits inside one. Around it: the model adapter (infra/llm_chat.py),
calls written as text (text_calls.py), a history a chat API accepts (history.py), what the user is shown
(answers.py) and the loop's vocabulary (loop_types.py).
"""
from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from django.conf import settings

from context.budget import tool_tokens
from infra.errors import AppError
from infra.llm_chat import CANCELLED, TIMEOUT, ModelReply
from infra.tokens import count_message_tokens, count_tokens, truncate_to_tokens

from .answers import HeldDeltas, closing_answer, fallback_answer, is_answer
from .history import calls_normalized, calls_of, fit_to_budget, history_repair
from .loop_types import (
    ANSWER,
    CLIENT_TOOLS,
    LLM_ERROR,
    LOOP_DETECTED,
    MAX_STEPS,
    AnswerCheck,
    ChatModel,
    LoopResult,
    ToolCallRecord,
)
from .text_calls import WrittenCallWatch, content_tool_call, parse_arguments

log = logging.getLogger(__name__)

# A step whose calls all repeat earlier ones is a stall; the model is warned once, then the loop ends.
STALLED_STEPS_LIMIT = 2


@dataclass(frozen=True)
class LoopLimits:
    max_steps: int
    wall_clock_seconds: float
    max_calls_per_step: int
    token_budget: int
    observation_tokens: int

    @classmethod
    def from_settings(cls, **overrides) -> LoopLimits:
        values = {"max_steps": settings.ASSISTANT_MAX_STEPS,
                  "wall_clock_seconds": settings.ASSISTANT_WALL_CLOCK_SECONDS,
                  "max_calls_per_step": settings.ASSISTANT_MAX_CALLS_PER_STEP,
                  "token_budget": settings.ASSISTANT_LOOP_TOKEN_BUDGET,
                  "observation_tokens": settings.ASSISTANT_OBSERVATION_TOKENS}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def react_run(*, messages: list[dict], tools: list[dict], execute: Callable[[str, dict], tuple[str, dict]],
              model: ChatModel, limits: LoopLimits, on_delta: Callable[[str], None] | None = None,
              cancel: threading.Event | None = None,
              describe: Callable[[str, dict], str] | None = None, grounding: AnswerCheck | None = None,
              closing_note: str = "", client_tools: frozenset[str] = frozenset(), tool_choice: str = "auto",
              parallel: bool = True, resume: list[dict] | None = None) -> LoopResult:
    """Run the model with tools until it answers or a limit stops it; every call of a tool `execute` runs is
    answered before return.

    The reply shown to the user is always words: a call written as text is run as a call, and a reply that is no
    answer (an echoed warning, raw JSON) gets one closing call without tools, then an answer built from what the
    tools found (`describe(name, observation)` words a non-memory observation).

    grounding: every answer sentence is checked against the turn's calls as it streams and once whole; an answer
    left with nothing gets the closing call, then the built one. closing_note: what the closing call is shown
    besides the calls' results (the user's standing profile); its lines also build the last-resort answer.

    A step that calls one of `client_tools` ends the loop (CLIENT_TOOLS) once the step's other calls have run: the
    client runs its calls, and a later loop continues from `resume` (this turn's steps, its results answering
    every call). tool_choice (auto, required) applies to every step; with `required` the last step offers the
    client's tools only. parallel=False keeps each step to its first call."""
    deadline = time.monotonic() + limits.wall_clock_seconds
    # Tool definitions ride with every call; what remains of the budget is for messages.
    budget = max(256, limits.token_budget - tool_tokens(tools))
    base = history_repair(list(messages))
    loop: list[dict] = list(resume or [])
    resumed = len(loop)
    records: list[ToolCallRecord] = []
    seen: dict[tuple[str, str], int] = {}
    used_ids = {c.get("id") for m in base + loop for c in calls_of(m)}
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "model_calls": 0}
    stalled, steps, content, stop, finish, pending = 0, 0, "", None, "stop", []

    def add_usage(reply: ModelReply, window: list[dict]) -> None:
        got = reply.usage or {"prompt_tokens": count_message_tokens(window),
                              "completion_tokens": count_tokens(reply.content) + sum(
                                  count_tokens(c["function"]["arguments"] or "") for c in reply.tool_calls)}
        for key in ("prompt_tokens", "completion_tokens"):
            usage[key] += got.get(key, 0)
        usage["model_calls"] += 1

    while stop is None:
        if steps >= limits.max_steps:
            stop = MAX_STEPS
            break
        if cancel is not None and cancel.is_set():
            stop = CANCELLED
            break
        if time.monotonic() >= deadline:
            stop = TIMEOUT
            break
        steps += 1
        window = fit_to_budget(base, loop, budget)
        checked = grounding.stream(on_delta, records) if grounding is not None and on_delta is not None else None
        held = HeldDeltas(checked or on_delta) if on_delta is not None else None
        offered = tools
        if tool_choice == "required" and client_tools and steps >= limits.max_steps:
            offered = [t for t in tools if (t.get("function") or {}).get("name") in client_tools]
        try:
            # With tools on offer, a reply that writes a whole call as text is read no further.
            reply = model.complete(messages=window, tools=offered, tool_choice=tool_choice, deadline=deadline,
                                   on_delta=held, cancel=cancel, stop_when=WrittenCallWatch() if offered else None)
        except AppError:
            if not records:
                raise  # nothing happened yet: the caller reports the outage instead of a non-answer
            log.warning("model call failed at step %s; ending the turn with a partial answer", steps, exc_info=True)
            stop = LLM_ERROR
            break
        add_usage(reply, window)
        if reply.finish_reason in (CANCELLED, TIMEOUT):
            content, stop = (reply.content if is_answer(reply.content, records, tools) else ""), reply.finish_reason
            finish = "length"  # what was said is cut short
            if held is not None and content:
                held.release()
            if checked is not None:
                checked.flush()
            break
        if not reply.tool_calls:
            written = content_tool_call(reply.content, offered)
            if written is not None:
                reply.tool_calls, reply.content = [written], ""
            else:
                content, stop = reply.content, ANSWER
                finish = "length" if reply.finish_reason == "length" else "stop"
                if not is_answer(content, records, tools):
                    content = ""  # not shown: the closing call below answers instead
                elif held is not None:
                    held.release()
                if checked is not None:
                    checked.flush()
                break
        if checked is not None:
            checked.flush()  # words written before the calls
        calls = calls_normalized(reply.tool_calls, used_ids)
        if not parallel:
            calls = calls[:1]
        loop.append({"role": "assistant", "content": reply.content or None, "tool_calls": calls})
        pending = [c for c in calls if c["function"]["name"] in client_tools]
        fresh = 0
        for position, call in enumerate(c for c in calls if c not in pending):
            record = _run_call(call, position=position, step=steps, seen=seen, execute=execute, limits=limits)
            fresh += record.status in ("ok", "error")
            records.append(record)
            text = truncate_to_tokens(json.dumps(record.observation, ensure_ascii=False, default=str),
                                      limits.observation_tokens)
            loop.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        if pending:
            content, stop, finish = reply.content or "", CLIENT_TOOLS, "tool_calls"
            break
        stalled = 0 if fresh else stalled + 1
        if stalled >= STALLED_STEPS_LIMIT:
            stop = LOOP_DETECTED

    if grounding is not None and content.strip() and stop != CLIENT_TOOLS:
        content = grounding.text(content, records)
    if stop not in (CANCELLED, CLIENT_TOOLS) and not content.strip():
        content, finish = closing_answer(base, loop, stop=stop, tools=tools, model=model, budget=budget,
                                         deadline=deadline, on_delta=on_delta, cancel=cancel, add_usage=add_usage,
                                         records=records, describe=describe,
                                         observation_tokens=limits.observation_tokens, grounding=grounding,
                                         closing_note=closing_note,
                                         refused=grounding.dropped() if grounding is not None else [])
        if stop == MAX_STEPS and content.strip():
            # The steps that may call tools are spent and the call without tools answered: that call is how a turn
            # answers after its last tool step (with the local model's one step, every turn that uses a tool), so
            # the turn ended in an answer. The step limit stands as the reason only when no answer came of it.
            stop = ANSWER
    if stop != CLIENT_TOOLS:
        if not content.strip():
            known = [line for line in closing_note.splitlines() if line.startswith("- ")]
            asked = str((base[-1] if base else {}).get("content") or "").rstrip().endswith("?")
            if grounding is not None and grounding.dropped() and stop == ANSWER and not asked and not records:
                # The model only claimed to have done what the user asked, and nothing did it: a plain
                # acknowledgement is what is true (what is on record answers a question, not a request).
                content = "Understood."
            else:
                content = fallback_answer(stop, records, describe, known)
            finish = "stop"
            if on_delta is not None:
                on_delta(content)
        loop.append({"role": "assistant", "content": content})
    return LoopResult(content=content, messages=loop[resumed:], steps=steps, stop_reason=stop, tool_calls=records,
                      usage=usage, pending_calls=pending, finish_reason=finish)


def _run_call(call: dict, *, position: int, step: int, seen: dict, execute, limits: LoopLimits) -> ToolCallRecord:
    name, raw = call["function"]["name"], call["function"]["arguments"]
    arguments, error = parse_arguments(raw)
    if position >= limits.max_calls_per_step:
        return ToolCallRecord(call["id"], name, arguments, "skipped",
                              {"error": f"At most {limits.max_calls_per_step} tool calls per step; this one was not "
                                        "run. Call it again in the next step if you still need it."}, step)
    signature = (name, json.dumps(arguments, sort_keys=True, default=str) if arguments is not None else raw)
    if signature in seen:
        return ToolCallRecord(call["id"], name, arguments, "repeated",
                              {"error": f"You already called {name} with these arguments in step {seen[signature]}; "
                                        "its result is above. Do not repeat it: use that result or answer the user."},
                              step)
    seen[signature] = step
    if error:
        return ToolCallRecord(call["id"], name, None, "error", {"error": error}, step)
    status, observation = execute(name, arguments)
    return ToolCallRecord(call["id"], name, arguments, status, observation, step)
