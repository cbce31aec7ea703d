"""Sentences that claim an action was done ("I found ...", "the assistant booked ...", "your seat has been changed"),
and which tools can have done it.

A small, fixed vocabulary: each action names the past forms that claim it and the word stems of a tool that can do
it (a tool named `book_flight` can book; one named `send_email` can send). A caller whose tools are known by name
only (a client's) matches by these stems; a caller that declares its tools' actions (the built-in memory tools)
passes them explicitly. A claim is about something done, so only affirmative past forms count: "I can search",
"I have not booked" and "I'll send it" claim nothing.

A claim also names what was done ("updated the goal to a flight to Newark", "booked seat 14C"): a call covers it
only when the names in the claim's clause (capitalised words, codes with digits) occur in what that call took or
returned. A call that set the goal to NYC does not cover a note saying it set it to Newark. Names are compared
because a call spells them as the conversation did; plain numbers and dates are left out, since "December 5",
"12/05" and "2026-12-05" name one day in words that do not meet.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

SEARCH, STORE, DELETE, TRANSACT, SEND = "search", "store", "delete", "transact", "send"

# action -> (past forms that claim it, stems of tool names that can do it)
ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    SEARCH: (("found", "searched", "looked up", "looked into", "checked", "retrieved", "pulled up", "researched",
              "compared", "located"),
             ("search", "find", "lookup", "look_up", "query", "fetch", "get", "list", "browse")),
    STORE: (("saved", "stored", "noted", "recorded", "added", "updated", "changed", "set", "marked", "switched",
             "logged"),
            ("remember", "save", "store", "note", "update", "set", "add", "change", "edit", "create", "write",
             "complete", "mark")),
    DELETE: (("deleted", "removed", "forgot", "forgotten", "erased", "cleared"),
             ("forget", "delete", "remove", "erase", "clear")),
    TRANSACT: (("booked", "reserved", "purchased", "bought", "ordered", "paid", "cancelled", "canceled",
                "scheduled", "rebooked", "refunded", "confirmed"),
               ("book", "reserv", "purchas", "buy", "order", "pay", "cancel", "schedul", "refund", "confirm")),
    SEND: (("sent", "emailed", "messaged", "texted", "called", "contacted", "notified", "forwarded", "posted",
            "submitted", "shared"),
           ("send", "email", "mail", "message", "text", "call", "contact", "notify", "forward", "post", "submit",
            "share")),
}
_ACTION_OF = {verb: action for action, (verbs, _) in ACTIONS.items() for verb in verbs}
_VERBS = "|".join(sorted((re.escape(v).replace(r"\ ", r"\s+") for v in _ACTION_OF), key=len, reverse=True))
_ADVERBS = r"(?:(?:just|already|now|also|successfully|quickly|finally)\s+)*"
# Who can claim an action in an answer or a note: the speaker, or the assistant named in the third person.
_ACTOR = r"\b(?:I|we|the\s+assistant|assistant)"
_ACTIVE = re.compile(rf"{_ACTOR}(?:'ve|'d|\s+have|\s+has|\s+had)?\s+{_ADVERBS}(?P<verb>{_VERBS})\b(?P<rest>.*)",
                     re.I | re.S)
_PASSIVE = re.compile(rf"\b(?:has|have|had)\s+{_ADVERBS}been\s+{_ADVERBS}(?P<verb>{_VERBS})\b(?P<rest>.*)"
                      rf"|\b(?:is|are)\s+(?:now\s+)?(?P<verb2>booked|reserved|purchased|ordered|paid|cancelled|"
                      rf"canceled|scheduled|sent|confirmed)\b(?P<rest2>.*)", re.I | re.S)


@dataclass(frozen=True)
class Claim:
    action: str
    verb: str
    rest: str  # what follows the verb in the sentence: what was claimed done
    passive: bool


# Where the clause of a claim ends: what follows is about something else ("found a flight, but Dana wants Boston").
_CLAUSE_END = re.compile(r"[,;:()]|\s(?:but|because|since|while|although|though|whereas|which|who|so that|and then)\s",
                         re.I)
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:['.&-][A-Za-z0-9]+)*")
# Capitalised words that name no thing: calendar words (see above) and the words a sentence may open a clause with.
# Compared without what follows an apostrophe ("I'm" is "i").
_NOT_NAMES = frozenset("""i the a an it its this that these those he she they we you your my our their his her monday
tuesday wednesday thursday friday saturday sunday january february march april may june july august september october
november december today tomorrow yesterday""".split())
_CALENDAR_CODE = re.compile(r"\d+(?:am|pm|st|nd|rd|th|h|hrs?|min)", re.I)  # "7am", "5th": times and dates again


def _word(token: str) -> str:
    return token.lower().split("'")[0]  # "Dana's" is Dana


def _tokens(text: str) -> set[str]:
    return {_word(t) for t in _TOKEN.findall(text or "")}


def claim_names(claim: Claim) -> set[str]:
    """The names and codes in the clause of what a claim says was done, lowercased."""
    clause = _CLAUSE_END.split(claim.rest, maxsplit=1)[0]
    out = set()
    for token in _TOKEN.findall(clause):
        lowered = _word(token)
        if lowered in _NOT_NAMES or _CALENDAR_CODE.fullmatch(token):
            continue
        has_digit, has_alpha = any(c.isdigit() for c in token), any(c.isalpha() for c in token)
        if (token[0].isupper() and not has_digit) or (has_digit and has_alpha):
            out.add(lowered)
    return out


def claim_covered(claim: Claim, calls, *, ignore=()) -> bool:
    """Whether one of the calls, each (the actions it can do, the text of what it took and returned), did the
    claimed action on what the claim names. `ignore`: names every call stands for (the user's own name)."""
    names = claim_names(claim) - {_word(w) for w in ignore}
    return any(claim.action in actions and names <= _tokens(text) for actions, text in calls)


def action_claims(sentence: str) -> list[Claim]:
    """Every affirmative claim of a done action in one sentence, in order."""
    out = []
    for m in _ACTIVE.finditer(sentence):
        verb = " ".join(m.group("verb").lower().split())
        out.append(Claim(_ACTION_OF[verb], verb, m.group("rest").strip(), passive=False))
    for m in _PASSIVE.finditer(sentence):
        verb = " ".join((m.group("verb") or m.group("verb2")).lower().split())
        out.append(Claim(_ACTION_OF[verb], verb, (m.group("rest") or m.group("rest2") or "").strip(), passive=True))
    return out


def actions_of_tool(name: str) -> set[str]:
    """The actions a tool known only by its name can do, from the stems its name contains."""
    lowered = (name or "").lower()
    return {action for action, (_, stems) in ACTIONS.items() if any(stem in lowered for stem in stems)}
