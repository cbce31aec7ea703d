"""Statements inside a sentence: "my favourite colour is green and my favourite food is sushi" says two things, so
a caller that must take one back (forgetting) can keep the other.

Without a parser the rule is shallow and general: a sentence divides where a semicolon stands, or where a comma or a
coordinating conjunction ("and", "but", "while", "whereas", "plus") is followed by a new clause, one that opens with
a subject and its verb ("I ...", "she ...", "my sister lives ...", "Ada's favourite food is ...", "Paris is ...").
A conjunction that only joins words ("apples and pears", "I live in Berlin and work at Acme") does not divide: what
shares one subject stays one statement, and a subordinate clause ("because ...", "when ...") stays with its main
clause, whose sense it completes.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from .sentences import sentence_spans

_JOINER = re.compile(r"\s*;\s*|,?\s+(?i:and|but|while|whereas|plus)(?:\s+(?i:also))?\s+|,\s+(?:(?i:also)\s+)?")
_AUX = (r"(?:is|are|was|were|has|have|had|will|would|can|could|does|do|did|isn't|aren't|wasn't|weren't|hasn't|"
        r"haven't|hadn't|doesn't|don't|didn't|won't|can't|couldn't|wouldn't|must|should|might|may)")
_VERB = rf"(?:{_AUX}|[a-z]+s|[a-z]+ed)\b"
# A new clause: a personal pronoun as subject (then any word), or a noun phrase (a determiner or a possessive name,
# one to four words) or a name, followed by a verb (an auxiliary, or a verb in -s or -ed).
_CLAUSE_START = re.compile(
    r"(?:(?i:i|i'm|i've|i'd|i'll|we|we're|we've|he|he's|she|she's|they|they're|they've|you|you're|it's|"
    r"there\s+(?:is|are|was|were))\s+[\w$€£]"
    rf"|(?:(?i:my|our|your|his|her|their|the|this|that)\s+|[A-Z][\w-]*['’]s\s+)(?:[\w'’-]+\s+){{1,4}}?{_VERB}"
    rf"|[A-Z][\w-]+\s+{_VERB})")
# A label a sentence opens with ("Goal: ...", "Ada: ..."): it belongs to the sentence, not to its first statement.
_LABEL = re.compile(r"[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?:\s+")
_END = re.compile(r"[\s.!?…]*$")


def clause_spans(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of each statement of one sentence; the joiners between them and the closing punctuation lie
    outside every span."""
    end = _END.search(sentence).start()
    spans, start = [], len(sentence) - len(sentence.lstrip())
    for m in _JOINER.finditer(sentence, start, end):
        if m.start() <= start or not sentence[start:m.start()].strip():
            continue
        if ";" in m.group() or _CLAUSE_START.match(sentence, m.end()):
            spans.append((start, m.start()))
            start = m.end()
    if sentence[start:end].strip():
        spans.append((start, end))
    return spans


def _unlabelled(text: str) -> str:
    label = _LABEL.match(text)
    return text[label.end():] if label else text


def statements(text: str) -> list[str]:
    """The statements of every sentence of the text, in order, a sentence's label ("Goal: ") left off."""
    out = []
    for start, end in sentence_spans(text or ""):
        sentence = text[start:end]
        spans = clause_spans(sentence)
        out += [_unlabelled(sentence[a:b]) if i == 0 else sentence[a:b] for i, (a, b) in enumerate(spans)]
    return [s for s in out if s.strip()]


def _sentence_rewrite(sentence: str, drop: Callable[[str], bool], marker: str | None) -> str:
    spans = clause_spans(sentence)
    if not spans:
        return sentence
    label = _LABEL.match(sentence, spans[0][0])
    bodies = [sentence[a:b] for a, b in spans]
    if label:
        bodies[0] = sentence[label.end():spans[0][1]]
    dropped = [drop(b) for b in bodies]
    if not any(dropped):
        return sentence
    if all(dropped):
        return marker or ""
    pieces: list[str] = []
    for i, (body, gone) in enumerate(zip(bodies, dropped)):
        joiner = sentence[spans[i - 1][1]:spans[i][0]] if i else ""
        if gone:
            if marker and not (i and dropped[i - 1]):
                pieces.append((joiner or (label.group() if label else "")) + marker)
            continue
        if not pieces:  # the first statement kept opens the sentence (after its label)
            joiner = label.group() if label else ""
            if body[:1].islower() and (bodies[0][:1].isupper()):
                body = body[0].upper() + body[1:]
        pieces.append(joiner + body)
    return sentence[:spans[0][0]] + "".join(pieces) + sentence[spans[-1][1]:]


def statements_rewrite(text: str, drop: Callable[[str], bool], *, marker: str | None = None) -> str:
    """The text with each statement that `drop` is true of taken out, or, given a marker, put in its place (one
    marker for statements side by side); a sentence left with none goes whole. Everything else stays as it was,
    line breaks included."""
    text = text or ""
    out, pos = [], 0
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        new = _sentence_rewrite(sentence, drop, marker)
        if new == sentence:
            continue
        out.append(text[pos:start] + new)
        pos = end
        if not new:  # the space after a sentence that went goes with it
            while pos < len(text) and text[pos] in " \t":
                pos += 1
    out.append(text[pos:])
    return "".join(out) if pos else text
