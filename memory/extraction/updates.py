"""When a later telling updates an earlier one: a near-duplicate that changes a number, a name or a negation, or a
statement that says in words that something changed ("I stopped eating meat", "sorry, I meant Munich"). What the
user says last is then the current memory, and the older one is superseded (kept in its history), never reinforced
with words it does not hold."""
from __future__ import annotations

import re

from infra.support import content_words

_WORDS = re.compile(r"[\w$€£%.,:/'’-]*\w")
_NAME = re.compile(r"[^\W\d_][^\W_]*(?:['’][^\W_]+)*")
_NEGATIONS = frozenset("not no never nor neither none nothing nobody without cannot".split())

# Phrases that say the statement replaces what held before. Each names a change of state or a correction in so many
# words; "now" or "actually" alone do not (people say them about anything).
_CHANGE = re.compile(
    r"\b(?:no\s+longer|anymore\b|any\s+more(?=\s*(?:[.!?,;]|$))|these\s+days|nowadays|i\s+meant|scratch\s+that|"
    r"correction:|changed\s+my\s+mind|switched\s+(?:to|from|over)|(?:stopped|quit|gave\s+up)\s+\w+ing)", re.I)


def _words(text: str) -> set[str]:
    return {w.replace("’", "'") for w in _WORDS.findall((text or "").lower())}


def _negated(words: set[str]) -> bool:
    return bool(words & _NEGATIONS) or any(w.endswith("n't") for w in words)


def says_no_more(text: str, stored: str) -> bool:
    """Whether `text` says nothing that `stored` does not: every word of it is a word of the stored statement, and
    neither negates anything. A later telling of part of a statement ("Ada would rather keep the code boring than
    clever." of the same words followed by why) is that statement again, whatever slot a model files it under; one
    word of its own ("has" a desk where the statement "wants" one, another sum) is news. Words alone cannot tell what
    a "not" applies to, so a negation on either side is never folded this way."""
    said, known = _words(text), _words(stored)
    return bool(said) and said <= known and not _negated(said) and not _negated(known)


def _particulars(text: str) -> tuple[set[str], set[str], bool]:
    """What a near-duplicate may not change without being news: its numbers, its names (capitalised words that do
    not open a sentence; "I" is no name), and whether it negates."""
    text = text or ""
    words = _words(text)
    numbers = {w for w in words if any(ch.isdigit() for ch in w)}
    names = {m.group(0) for m in _NAME.finditer(text)
             if m.group(0)[0].isupper() and not m.group(0).isupper()
             and text[:m.start()].rstrip()[-1:] not in (".", "!", "?", ":", "")}
    return numbers, names, _negated(words)


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
