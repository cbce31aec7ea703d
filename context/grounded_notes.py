"""Notes written by a model about a session (a bridge, a summary anchor) keep only what the session supports.

A sentence stands when at least half its content words occur in the session's turns (infra/support.py) and every
action it claims ("the assistant found a flight") was done by a successful tool call of the session, on what the
claim names (infra/claims.py: "updated the goal to Newark" needs a call that took or returned Newark). A small
model writing a hand-over note fills gaps with what usually happens next; such a sentence is dropped, and the
caller falls back to its extractive note when nothing is left.

`tools_done`: the session's successful calls, each (tool name, the text of what it took and returned).
"""
from __future__ import annotations

from infra.claims import action_claims, actions_of_tool, claim_covered
from infra.sentences import sentences
from infra.support import is_supported


def sentence_supported(sentence: str, *, sources: list[str], tools_done: list[tuple[str, str]],
                       ignore: tuple = ()) -> bool:
    calls = [(actions_of_tool(name), text) for name, text in tools_done]
    if any(not claim_covered(claim, calls, ignore=ignore) for claim in action_claims(sentence)):
        return False
    return is_supported(sentence, sources, ignore=ignore)


def note_ground(text: str, *, turns: list[dict], tools_done: list[tuple[str, str]],
                ignore: tuple = ()) -> tuple[str, list[str]]:
    """(the note's supported sentences joined, the sentences dropped). turns: {"content": ...} of the session."""
    sources = [str(m.get("content") or "") for m in turns]
    kept, dropped = [], []
    for sentence in sentences(text):
        ok = sentence_supported(sentence, sources=sources, tools_done=tools_done, ignore=ignore)
        (kept if ok else dropped).append(sentence)
    return " ".join(kept), dropped


def tool_calls_done(rows: list[dict]) -> list[tuple[str, str]]:
    """A session's successful tool calls from its message rows (role, name, content, tool_calls, tool_call_id):
    (the tool's name, its arguments and its result). A tool message whose result opens with an error did nothing."""
    arguments = {}
    for m in rows:
        for call in (m.get("tool_calls") or []) if m["role"] == "assistant" else []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                arguments[call.get("id")] = str(call["function"].get("arguments") or "")
    return [(m["name"], f"{arguments.get(m.get('tool_call_id'), '')} {m['content'] or ''}") for m in rows
            if m["role"] == "tool" and m.get("name") and '"error"' not in (m["content"] or "")[:20]]
