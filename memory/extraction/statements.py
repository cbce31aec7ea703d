"""A memory is a statement about the user: stored in the third person, with a subject and a predicate.

"I prefer aisle seats" is stored as "Dana prefers aisle seats": read back in a later turn, a first-person memory
reads as the assistant speaking. A fragment ("aisle seats", "never United") says nothing on its own: who prefers or
avoids it, and whether it is still so, is lost, so it is refused (events, which are the user's own words under
their name, are not statements and are not checked here).

Without a parser, both checks are shallow and say so: a subject is a mention of the user (their name, "the user",
or a personal pronoun), and a predicate is a verb-like word after it that is not the statement's last word (an
auxiliary or modal, a common irregular past, or a word ending in -s or -ed).
"""
from __future__ import annotations

import re

_MODALS = frozenset("""can could will would should must might may shall can't won't cannot couldn't wouldn't
shouldn't mustn't""".split())
_AUXILIARIES = frozenset("""is are was were be been being am has have had do does did isn't aren't wasn't weren't
hasn't haven't hadn't doesn't don't didn't""".split()) | _MODALS
_IRREGULAR_PAST = frozenset("""went had did got saw made took came gave found bought flew drove met left said told
thought felt knew became began ran wrote ate drank sat stood spent sent paid kept lost won heard held brought built
caught chose fell forgot grew hid hung led lent lit meant rode rang rose sang sold shot shut slept spoke stole swam
taught threw understood woke wore""".split())
# Verbs whose base form names a state or habit of a plural subject ("Dana's kids love pottery").
_BASE_VERBS = frozenset("""love like hate prefer want need enjoy avoid go have get make take keep use eat drink play
live work own plan visit fly travel attend study teach""".split())
_ADVERBS = frozenset("""really always never usually often also just still rarely sometimes mostly generally
definitely absolutely totally strongly sincerely truly only""".split())
_PRONOUN_SUBJECTS = frozenset("he she they his her their".split())
_WORD = re.compile(r"[A-Za-z$€£0-9][\w'’$€£.-]*")


def past_form(word: str) -> bool:
    """A verb in the past ("tried", "went"): said after "never" or "always" it reports what happened, not a habit."""
    w = word.lower()
    # "need", "feed", "proceed" end in -ed too, in their base form.
    return w in _IRREGULAR_PAST or (w.endswith("ed") and not w.endswith("eed") and len(w) > 3)


def _conjugated(verb: str) -> str:
    v = verb.lower()
    if v in ("be", "am"):
        return "is"
    if v == "have":
        return "has"
    if v in ("do", "go"):
        return verb + "es"
    if re.search(r"[^aeiou]y$", v):
        return verb[:-1] + "ies"
    if re.search(r"(?:s|sh|ch|x|z|o)$", v):
        return verb + "es"
    return verb + "s"


def possessive(who: str) -> str:
    return f"{who}'" if who.endswith("s") else f"{who}'s"


def third_person(text: str, *, who: str) -> str:
    """The statement with the speaker named: "I prefer aisle seats, and never United" -> "Dana prefers aisle seats,
    and never United"; "my budget" -> "Dana's budget". Text with no first person comes back as it was."""
    who = who.strip() or "The user"
    out = text
    fixed = [(r"\bI'm\b|\bI am\b", f"{who} is"), (r"\bI've\b|\bI have\b", f"{who} has"),
             (r"\bI'd\b", f"{who} would"), (r"\bI'll\b", f"{who} will"), (r"\bI was\b", f"{who} was"),
             (r"\bI don't\b|\bI do not\b", f"{who} doesn't"), (r"\bI do\b", f"{who} does")]
    for pattern, replacement in fixed:
        out = re.sub(pattern, replacement, out)

    def verb_after_i(m: re.Match) -> str:
        adverb, verb = m.group("adverb") or "", m.group("verb")
        lowered = verb.lower()
        if lowered in _AUXILIARIES or past_form(lowered) or not lowered.isalpha():
            return f"{who} {adverb}{verb}"
        return f"{who} {adverb}{_conjugated(verb)}"

    adverbs = "|".join(sorted(_ADVERBS))
    out = re.sub(rf"\bI\s+(?P<adverb>(?:(?:{adverbs})\s+)*)(?P<verb>[a-z][a-z'’]*)", verb_after_i, out)
    out = re.sub(r"\bI\b", who, out)
    out = re.sub(r"\b[Mm]y\b|\b[Mm]ine\b", possessive(who), out)
    # "myself" points back at the sentence's subject, already named: "themselves" (the user's gender is unknown), so
    # "if I repeat myself" reads "if Dana repeats themselves", not "if Dana repeats Dana". "me" in a compound
    # ("me-time") is a word of its own.
    out = re.sub(r"\b[Mm]yself\b", "themselves", out)
    out = re.sub(r"\bme\b(?!-)", who, out)
    return out[:1].upper() + out[1:] if out else out


def _mentions(words: list[str], who: str) -> int | None:
    """The index of the first word that names the user, or None."""
    names = {w.lower() for w in who.split()} | {"user", "user's"}
    if who.strip().lower() in ("", "the user") and words and words[0][:1].isupper() and \
            words[0].lower() not in _ADVERBS:
        return 0  # the user's name is not known: a statement opening with a name ("Ada is vegetarian") has one
    for i, word in enumerate(words):
        w = word.lower().rstrip(".,;:!?").replace("’", "'")
        if w in names or w.split("'")[0] in names or (w in _PRONOUN_SUBJECTS):
            return i
    return None


def _verb_like(word: str) -> bool:
    w = word.lower().rstrip(".,;:!?").replace("’", "'")
    return (w in _AUXILIARIES or w in _IRREGULAR_PAST or w in _BASE_VERBS
            or (w.isalpha() and len(w) > 3 and (w.endswith("ed") or w.endswith("s"))))


def statement_complete(text: str, *, who: str) -> bool:
    """Whether the text names the user and says something of them: a subject and a verb-like word after it."""
    words = _WORD.findall(text)
    first = _mentions(words, who)
    if first is None:
        return False
    after = [w for w in words[first + 1:] if w.lower() not in _ADVERBS]
    return any(_verb_like(w) for w in after[:-1]) or (len(after) >= 1 and after[-1].lower() in _AUXILIARIES)


def statement_normalize(text: str, *, who: str) -> str | None:
    """The statement in the third person, its subject restored when only the user's name is missing ("Prefers
    aisle seats" -> "Dana prefers aisle seats"); None when it is no statement about the user."""
    who = who.strip() or "The user"
    text = third_person(text.strip(), who=who)
    if statement_complete(text, who=who):
        return text
    words = text.split()
    opening = words[0].lower() if words else ""
    if words and (opening in _ADVERBS or _verb_like(words[0])) and opening not in _AUXILIARIES:
        repaired = f"{who} {words[0].lower()} {' '.join(words[1:])}".strip()
        if statement_complete(repaired, who=who):
            return repaired
    return None
