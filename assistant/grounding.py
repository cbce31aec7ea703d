"""Grounded answers: a sentence that claims an action stands only when a tool call of the turn did it.

The prompt asks the model to claim only what its tools did; a small model claims anyway ("I found a flight" after
a memory search). So every sentence of the answer is checked in code, as it streams, against the turn's tool
calls (infra/claims.py: which verbs claim which action, and which tools can do it):

- a claim some successful call of the turn covers stands: the call can do the action, and what it took or returned
  holds the names the claim's clause gives ("I set the goal to Newark" after a goal set to NYC is not covered);
- "I found that X" without a covering call becomes "X" (the assertion, without the action);
- a claimed search whose object is on record (what the tools returned, the standing profile, the turn's context)
  becomes "From what I have on record: <object>." (the memory search found it; nothing else searched);
- any other uncovered claim is dropped.

`recall` searches memory only: it covers a claimed finding when the sentence says it comes from memory ("you told
me", "in my notes"); a bare "I found a flight" claims a search of the world, which no memory tool did.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable

from infra.claims import SEARCH, action_claims, claim_covered
from infra.support import is_supported

RECALL = "recall"  # the action of a memory search: covers a claimed finding framed as remembered
ON_RECORD = "From what I have on record: "
_MEMORY_FRAMING = re.compile(r"\b(?:memor(?:y|ies)|remember(?:ed|s)?|recall(?:ed)?|on record|records?|notes?|"
                             r"profile|history|you (?:told|said|mentioned|shared|asked)|told me|earlier|last time|"
                             r"previous(?:ly)?|before|saved|stored)\b", re.I)
# The splitter of infra/sentences.py, kept with its separators so the answer's own layout survives.
_BOUNDARY = re.compile(r"(?<=[.!?…])\s+|\n+")


def _done(record) -> bool:
    """A call that did what it was asked: it ran, raised no error and its result does not say it refused."""
    observation = record.observation if isinstance(record.observation, dict) else {}
    return record.status == "ok" and not observation.get("error") and not any(
        observation.get(flag) is False for flag in ("stored", "forgotten"))


def _observation_texts(records) -> list[str]:
    out = []
    for record in records:
        if not _done(record):
            continue
        observation = record.observation if isinstance(record.observation, dict) else {}
        memories = observation.get("memories")
        if isinstance(memories, list):
            out += [m["text"] for m in memories if isinstance(m, dict) and isinstance(m.get("text"), str)]
        else:
            out.append(json.dumps(observation, ensure_ascii=False, default=str))
    return out


def _ended(text: str) -> str:
    text = text.strip().strip(":;,- ").strip()
    if not text:
        return ""
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def _as_sentence(text: str) -> str:
    text = _ended(text)
    return text[:1].upper() + text[1:]


@dataclass
class Grounding:
    """What an answer may draw on beyond its tool calls, and which actions each tool can do."""

    actions_of: Callable[[str], set[str]]  # tool name -> the actions it can do (infra/claims.py names, or RECALL)
    sources: list[str] = field(default_factory=list)  # the standing profile, the composed memories, the turns
    ignore: tuple[str, ...] = ()  # words that support nothing (the user's name)
    changes: list[tuple[str, str]] = field(default_factory=list)  # (sentence, what replaced it; "" when dropped)

    def _calls(self, sentence: str, records) -> list[tuple[set[str], str]]:
        """The turn's successful calls as claim_covered reads them; a memory search also counts as a search when
        the sentence frames its finding as remembered."""
        framed = bool(_MEMORY_FRAMING.search(sentence))
        calls = []
        for record in records or ():
            if not _done(record):
                continue
            actions = set(self.actions_of(record.name))
            if framed and RECALL in actions:
                actions.add(SEARCH)
            text = json.dumps([record.arguments, record.observation], ensure_ascii=False, default=str)
            calls.append((actions, text))
        return calls

    def sentence(self, sentence: str, records) -> str | None:
        """None when the sentence stands as written; otherwise what replaces it ("" to drop it)."""
        claims = action_claims(sentence)
        if not claims:
            return None
        calls = self._calls(sentence, records)
        uncovered = [c for c in claims if not claim_covered(c, calls, ignore=self.ignore)]
        if not uncovered:
            return None
        claim = uncovered[0]
        replacement = ""
        if len(uncovered) == 1 and not claim.passive:
            rest = claim.rest
            if rest.lower().startswith("that "):
                replacement = _as_sentence(rest[5:])
            elif claim.action == SEARCH and is_supported(
                    rest, [*self.sources, *_observation_texts(records)], ignore=self.ignore):
                replacement = ON_RECORD + _ended(rest) if _ended(rest) else ""
        # What replaces a claim must claim nothing uncovered itself.
        if replacement and self.sentence(replacement, records) is not None:
            replacement = ""
        return replacement

    def text(self, content: str, records) -> str:
        """The grounded answer; what changed is kept in `changes`."""
        out: list[str] = []
        stream = GroundedStream(self, out.append, records, log=True)
        stream(content or "")
        stream.flush()
        return "".join(out)

    def dropped(self) -> list[str]:
        """The sentences removed from the answers checked so far (not those restated)."""
        return [sentence for sentence, replacement in self.changes if not replacement]

    def stream(self, on_delta: Callable[[str], None], records) -> GroundedStream:
        return GroundedStream(self, on_delta, records)

    def used(self, answer: str, memories: list) -> list:
        """The memories an answer drew on: at least half of each one's content words are in it."""
        if not answer.strip():
            return []
        return [m for m in memories if is_supported(m.text, [answer], ignore=self.ignore)]


class GroundedStream:
    """Passes streamed text on a sentence at a time, each one grounded; `flush` sends the last one. The same
    sentences come out whether the text arrives whole or in pieces."""

    def __init__(self, grounding: Grounding, on_delta: Callable[[str], None], records, *, log: bool = False):
        self._grounding = grounding
        self._on_delta = on_delta
        self._records = records  # the loop's own list: calls made before the text was written
        self._log = log
        self._pending = ""

    def __call__(self, text: str) -> None:
        self._pending += text
        cut = 0
        for m in _BOUNDARY.finditer(self._pending):
            if m.end() < len(self._pending):  # the separator is complete once something follows it
                cut = m.end()
        if cut:
            self._send(self._pending[:cut])
            self._pending = self._pending[cut:]

    def flush(self) -> None:
        if self._pending:
            self._send(self._pending)
            self._pending = ""

    def _send(self, text: str) -> None:
        out, start = [], 0
        pieces = []
        for m in _BOUNDARY.finditer(text):
            pieces.append((text[start:m.start()], m.group(0)))
            start = m.end()
        if start < len(text):
            pieces.append((text[start:], ""))
        for sentence, separator in pieces:
            replacement = self._grounding.sentence(sentence, self._records) if sentence.strip() else None
            if replacement is None:
                out.append(sentence + separator)
                continue
            change = (sentence.strip(), replacement)
            if self._log and change not in self._grounding.changes:  # a closing call repeating a claim is one change
                self._grounding.changes.append(change)
            if replacement:
                out.append(replacement + separator)
        if "".join(out):
            self._on_delta("".join(out))
