"""When a later telling updates an earlier one: a near-duplicate that changes a number, a name or a negation, or a
statement that says in words that something changed ("I stopped eating meat", "sorry, I meant Munich"). What the
user says last is then the current memory, and the older one is superseded (kept in its history), never reinforced
with words it does not hold."""
from __future__ import annotations

import re

from infra.support import content_words

_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_WORD = re.compile(r"[^\W\d_][^\W_]*(?:['’][^\W_]+)*")
_NEGATIONS = frozenset("not no never nor neither none nothing nobody without cannot".split())

# Phrases that say the statement replaces what held before. Each names a change of state or a correction in so many
# words; "now" or "actually" alone do not (people say them about anything).
_CHANGE = re.compile(
    r"\b(?:no\s+longer|anymore\b|any\s+more(?=\s*(?:[.!?,;]|$))|these\s+days|nowadays|i\s+meant|scratch\s+that|"
    r"correction:|changed\s+my\s+mind|switched\s+(?:to|from|over)|(?:stopped|quit|gave\s+up)\s+\w+ing)", re.I)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text or "")


def _particulars(text: str) -> tuple[set[str], set[str], bool]:
    """What a near-duplicate may not change without being news: its numbers, its names (capitalised words that do
    not open a sentence; "I" is no name), and whether it negates."""
    text = text or ""
    tokens = _tokens(text)
    numbers = {t for t in tokens if any(ch.isdigit() for ch in t)}
    names = set()
    for m in _WORD.finditer(text):
        word = m.group(0)
        if word[0].isupper() and not word.isupper() \
                and text[:m.start()].rstrip()[-1:] not in (".", "!", "?", ":", ""):
            names.add(word)
    lowered = {t.lower().replace("’", "'") for t in tokens}
    negated = bool(lowered & _NEGATIONS) or any(t.endswith("n't") for t in lowered)
    return numbers, names, negated


def changes_particulars(text: str, stored: str) -> bool:
    """Whether `text` differs from `stored` in a number, a name or a negation: then it is news about the same thing,
    however alike the two read ("My locker is number 14 now." after "My locker is number 12.")."""
    return _particulars(text) != _particulars(stored)


def says_it_changed(text: str) -> bool:
    """Whether the statement says in words that it replaces what held before."""
    return bool(_CHANGE.search(text or ""))


def same_topic(text: str, stored: str, *, who: str = "") -> bool:
    """Whether the two share a content word besides the speaker's name: a correction restates what it corrects."""
    ignore = tuple(who.split()) if who else ()
    return bool(content_words(text, ignore=ignore) & content_words(stored, ignore=ignore))
