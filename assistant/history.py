"""A turn's message history as a chat API accepts it: every tool call answered exactly once and no orphan tool
message (a window cut through a tool exchange is repaired), call ids unique, and the loop's own messages
compressed to fit the model's budget."""
from __future__ import annotations

import json
import uuid

from infra.tokens import count_message_tokens, count_tokens, truncate_to_tokens

COMPRESSED_OBSERVATION_TOKENS = 48


def calls_of(message: dict) -> list[dict]:
    """The tool calls an assistant message makes (none for any other message)."""
    return message.get("tool_calls") or [] if message.get("role") == "assistant" else []


def history_problems(messages: list[dict]) -> list[str]:
    """What makes a message list unacceptable to a chat API: unanswered tool calls and orphan tool messages."""
    problems, i = [], 0
    while i < len(messages):
        message = messages[i]
        if message.get("role") == "tool":
            problems.append(f"tool message {message.get('tool_call_id')!r} answers no preceding call")
            i += 1
            continue
        ids = [c.get("id") for c in calls_of(message)]
        i += 1
        if not ids:
            continue
        answered = []
        while i < len(messages) and messages[i].get("role") == "tool":
            answered.append(messages[i].get("tool_call_id"))
            i += 1
        if len(set(ids)) != len(ids):
            problems.append(f"duplicate tool call ids {ids}")
        for cid in ids:
            if answered.count(cid) != 1:
                problems.append(f"tool call {cid!r} answered {answered.count(cid)} times")
        for cid in set(answered) - set(ids):
            problems.append(f"tool message {cid!r} answers no preceding call")
    return problems


def history_repair(messages: list[dict]) -> list[dict]:
    """Drop what a chat API would reject (a window cut through a tool exchange) and keep everything else."""
    out, i = [], 0
    while i < len(messages):
        message = messages[i]
        if message.get("role") == "tool":
            i += 1
            continue
        calls = calls_of(message)
        i += 1
        if not calls:
            out.append(message)
            continue
        answers: dict[str, dict] = {}
        while i < len(messages) and messages[i].get("role") == "tool":
            answers.setdefault(messages[i].get("tool_call_id"), messages[i])
            i += 1
        kept = [c for c in calls if c.get("id") in answers]
        kept = [c for n, c in enumerate(kept) if c.get("id") not in {k.get("id") for k in kept[:n]}]
        if kept:
            out.append({**message, "tool_calls": kept})
            out.extend(answers[c["id"]] for c in kept)
        elif message.get("content"):
            out.append({k: v for k, v in message.items() if k != "tool_calls"})
    return out


def calls_normalized(calls: list[dict], used_ids: set[str]) -> list[dict]:
    """A step's calls in OpenAI's shape, each with an id no other call of the history has (`used_ids`, updated)."""
    out = []
    for call in calls:
        fn = call.get("function") or {}
        cid = call.get("id") or ""
        if not cid or cid in used_ids:  # an answer must be attributable to exactly one call
            cid = f"call_{uuid.uuid4().hex[:24]}"
        used_ids.add(cid)
        arguments = fn.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments) if arguments is not None else ""
        out.append({"id": cid, "type": "function", "function": {"name": str(fn.get("name") or ""),
                                                                  "arguments": arguments}})
    return out


def fit_to_budget(base: list[dict], loop: list[dict], budget: int) -> list[dict]:
    """The messages for the next model call, with the loop's own older messages compressed when over budget.

    Only a copy is compressed: the recorded transcript keeps every observation as it was.
    """
    window = [dict(m) for m in base + loop]
    if count_message_tokens(window) <= budget:
        return window
    start = len(base)
    last_step = max((i for i in range(start, len(window)) if calls_of(window[i])), default=len(window))
    passes = [
        # Observations the model has already acted on go first; the newest step's results last.
        [(i, COMPRESSED_OBSERVATION_TOKENS) for i in range(start, last_step) if window[i].get("role") == "tool"],
        [(i, COMPRESSED_OBSERVATION_TOKENS) for i in range(start, len(window)) if window[i].get("role") == "assistant"],
        [(i, COMPRESSED_OBSERVATION_TOKENS * 2) for i in range(last_step, len(window))
         if window[i].get("role") == "tool"],
    ]
    for targets in passes:
        for i, tokens in targets:
            content = window[i].get("content") or ""
            if count_tokens(content) > tokens:
                window[i]["content"] = truncate_to_tokens(content, tokens) + " [compressed]"
                if count_message_tokens(window) <= budget:
                    return window
    return window
