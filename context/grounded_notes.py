"""Notes written by a model about a session (a bridge, a summary anchor) keep only what the session supports.

A sentence stands when at least half its content words occur in the session's turns (infra/support.py) and every
action it claims ("the assistant found a flight") was done by a successful tool call of the session (by the tool's
name, infra/claims.py). A small model writing a hand-over note fills gaps with what usually happens next; such a
sentence is dropped, and the caller falls back to its extractive note when nothing is left.
"""
from __future__ import annotations

from infra.claims import action_claims, actions_of_tool
from infra.sentences import sentences
from infra.support import is_supported


def sentence_supported(sentence: str, *, sources: list[str], tools_done: list[str], ignore: tuple = ()) -> bool:
    done = set().union(*(actions_of_tool(name) for name in tools_done)) if tools_done else set()
    if any(claim.action not in done for claim in action_claims(sentence)):
        return False
    return is_supported(sentence, sources, ignore=ignore)


def note_ground(text: str, *, turns: list[dict], tools_done: list[str], ignore: tuple = ()) -> tuple[str, list[str]]:
    """(the note's supported sentences joined, the sentences dropped). turns: {"content": ...} of the session."""
    sources = [str(m.get("content") or "") for m in turns]
    kept, dropped = [], []
    for sentence in sentences(text):
        ok = sentence_supported(sentence, sources=sources, tools_done=tools_done, ignore=ignore)
        (kept if ok else dropped).append(sentence)
    return " ".join(kept), dropped
