"""A memory's subject and value read from its own text, and the subject's label as the memory says it.

Extraction names a liking's slot "likes: united" whatever the verb, with the verb's sense as its value ("negative"),
and a habit's "habit: want red-eye flights" with its frequency ("never"). Those slots stay as they are (a later
"I like United" must land on the same one); what a person reads is the label, "avoids: United" or "never: wants
red-eye flights". An edited text is read back into a slot the same way extraction reads a message: the third-person
statement is turned back into the user's words and given to the rules.
"""
from __future__ import annotations

import re

from .extraction.candidate import slot_of, subject_normalize
from .extraction.rules import rules_extract

_FREQUENCIES = ("never", "always", "usually", "rarely", "often")
_IRREGULAR = {"is": "am", "has": "have", "does": "do", "goes": "go", "doesn't": "don't", "isn't": "am not",
              "was": "was", "wants": "want"}


def _first_person_verb(word: str) -> str:
    """ "avoids" → "avoid", "flies" → "fly", "watches" → "watch": the verb as the user would say it."""
    low = word.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low.endswith("ies") and len(low) > 4:
        return word[:-3] + "y"
    if re.search(r"(?:ss|sh|ch|x|z|o)es$", low):
        return word[:-2]
    if low.endswith("s") and not low.endswith("ss") and len(low) > 2:
        return word[:-1]
    return word


def _names(who: str) -> list[str]:
    names = [w for w in (who.strip(), "The user", "User") if w]
    return sorted(set(names), key=len, reverse=True)


def first_person(text: str, *, who: str) -> str | None:
    """ "Dana avoids United." → "I avoid United."; "Dana's destination is Boston." → "My destination is Boston.";
    None when the text does not open with the person (a fragment, or a statement about someone else)."""
    stripped = text.strip()
    for name in _names(who):
        if not stripped.lower().startswith(name.lower()):
            continue
        rest = stripped[len(name):]
        if re.match(r"['’]s\s", rest):
            return "My " + rest[3:].lstrip()
        if not rest.startswith(" "):
            continue
        words = rest.split()
        if words and words[0].lower() in _FREQUENCIES and len(words) > 1:
            words[1] = _first_person_verb(words[1])
        elif words:
            words[0] = _first_person_verb(words[0])
        return "I " + " ".join(words)
    return None


def slot_derive(*, text: str, kind: str, who: str) -> tuple[str, str] | None:
    """The (subject, value) extraction would give this statement, or None when it names no slot (its words are not
    a liking, a habit, an instruction or "X is Y" that the rules read)."""
    who = who or "The user"
    said = first_person(text, who=who)
    if said is None:
        return None
    asked = re.match(r"I asked the assistant:\s*(.+)$", said, re.S)
    if asked:  # an instruction is kept as "<who> asked the assistant: <the user's own words>"
        said = asked.group(1)
    found = [c for c in rules_extract(said, who=who) if c.subject and c.kind == kind]
    if not found:
        return None
    subject = slot_of(found[0].subject, who)
    return (subject, found[0].value) if subject else None


def slot_after_edit(*, text: str, kind: str, who: str, subject: str, value: str) -> tuple[str, str]:
    """The subject and value an edited text carries: read from the text when it names a slot; else the old ones while
    the text still says the old value; else none (a slot the text no longer says would mislead every reader)."""
    derived = slot_derive(text=text, kind=kind, who=who)
    if derived is not None:
        return derived
    if subject and value and (value.lower() in text.lower() or _slot_word_in(subject, value, text)):
        return subject, value
    return "", ""


def _slot_word_in(subject: str, value: str, text: str) -> bool:
    """A liking or habit's value is a sense or a frequency, not words of the text: its object must still be there."""
    head, _, obj = subject.partition(": ")
    return head in ("likes", "habit") and bool(obj) and subject_normalize(obj) in subject_normalize(text)


def _as_written(phrase: str, text: str) -> str:
    """The phrase with the letters' case the memory's text gives it ("united" → "United")."""
    found = re.search(re.escape(phrase), text, re.I) if phrase else None
    return found.group(0) if found else phrase


def subject_label(*, subject: str, value: str, text: str) -> str:
    """The subject as the memory reads: "likes: united" with a negative value → "avoids: United" (the text's own
    verb where it has one: "prefers: aisle seats"), "habit: want red-eye flights" → "never: wants red-eye flights",
    "instruction: always answer in french" → "instruction" (its words are the memory's own, beside it). Other subjects
    read as they are."""
    head, sep, obj = subject.partition(": ")
    if not sep:
        return subject
    if head == "likes":
        verb = "avoids" if value == "negative" else "likes"
        said = re.search(r"\b(likes|loves|prefers|enjoys|adores|hates|dislikes|detests|avoids|can't stand|"
                         r"cannot stand|doesn't like|does not like|doesn't want)\s+" + re.escape(obj), text, re.I)
        if said:
            verb = said.group(1).lower()
        return f"{verb}: {_as_written(obj, text)}"
    if head == "instruction":  # its words are the memory's own, shown beside it
        return "instruction"
    if head == "habit" and value:
        said = re.search(rf"\b{re.escape(value)}\s+([^.!?]+)", text, re.I)
        return f"{value}: {said.group(1).strip() if said else obj}"
    return subject


def slot_words(*, subject: str, value: str, text: str) -> str:
    """A slot in one line for a list: "avoids: United" (its value is in the label), "destination → Boston"."""
    if not subject:
        return ""
    label = subject_label(subject=subject, value=value, text=text)
    return label if label != subject or not value else f"{subject} → {value}"
