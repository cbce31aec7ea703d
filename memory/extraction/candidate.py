"""What an extractor proposes: a memory not yet verified against what the user already has."""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Candidate:
    kind: str
    text: str
    source_type: str = "user_stated"
    subject: str = ""  # the slot a contradiction is about ("destination"); empty for episodic events
    value: str = ""
    confidence: float = 0.8
    importance: float = 0.5
    extractor: str = "rules"
    metadata: dict = field(default_factory=dict)


_ARTICLES = re.compile(r"^(?:the|a|an|my|our|your)\s+")


def subject_normalize(subject: str) -> str:
    """One spelling per slot: "The Destination " and "destination" are the same subject."""
    s = re.sub(r"\s+", " ", (subject or "").strip().lower())
    s = _ARTICLES.sub("", s)
    return s[:200]


# Words that name a person, not an attribute of one. A slot is what a later statement could change (destination,
# editor); a small model often fills `subject` with the user's name, and every statement about the user then shares
# one slot, so each new one superseded all the others: unrelated memories were lost.
_PERSON_SUBJECTS = frozenset({"user", "the user", "i", "me", "myself", "he", "she", "they", "them", "person",
                              "assistant", "the assistant", "you"})


def slot_of(subject: str, who: str) -> str:
    """The model's subject as a slot, or '' when it names the person (their name, a part of it, a pronoun)."""
    s = subject_normalize(subject)
    name = subject_normalize(who)
    if s in _PERSON_SUBJECTS or s.removesuffix("'s") in (name, *name.split()):
        return ""
    return s


def value_normalize(value: str) -> str:
    return re.sub(r"[\s.!?]+$", "", re.sub(r"\s+", " ", (value or "").strip().lower()))
