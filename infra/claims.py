"""Sentences that claim an action was done ("I found ...", "the assistant booked ...", "your seat has been changed"),
and which tools can have done it.

A small, fixed vocabulary: each action names the past forms that claim it and the word stems of a tool that can do
it (a tool named `book_flight` can book; one named `send_email` can send). A caller whose tools are known by name
only (a client's) matches by these stems; a caller that declares its tools' actions (the built-in memory tools)
passes them explicitly. A claim is about something done, so only affirmative past forms count: "I can search",
"I have not booked" and "I'll send it" claim nothing.
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
