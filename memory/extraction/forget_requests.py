"""The user's own request to forget ("please forget my favourite band", "forget that I work at Acme"), read without a
model: what it names is retired from memory, and the request itself is no memory."""
from __future__ import annotations

import re

from infra.sentences import sentences
from infra.support import content_words

_FORGET = re.compile(
    r"^\s*(?:(?:ok(?:ay)?|so|and|also|actually|please|kindly|can\s+you|could\s+you|would\s+you|i\s+want\s+you\s+to|"
    r"i'd\s+like\s+you\s+to)[,\s]+)*"
    r"(?:forget|stop\s+remembering|do\s+not\s+remember|don't\s+remember|"
    r"(?:delete|erase|remove)(?=\s.*\bfrom\s+(?:your\s+)?memory\b))\s+"
    r"(?:(?:all\s+)?about\s+|that\s+|what\s+i\s+(?:said|told\s+you)\s+about\s+|everything\s+about\s+)?"
    r"(?P<what>[^.!?]{2,160}?)(?:\s+from\s+(?:your\s+)?memory)?\s*(?:,?\s*please)?[.!?]*\s*$", re.I)


def forget_requests(text: str) -> list[str]:
    """What each sentence of the text asks to forget, in its own words ("my favourite band"); none when it asks
    nothing of the kind, or names nothing a memory could be about ("forget it")."""
    out = []
    for sentence in sentences(text or ""):
        m = _FORGET.match(sentence)
        if m and content_words(m.group("what")):
            out.append(m.group("what").strip())
    return out


def is_forget_request(sentence: str) -> bool:
    return bool(forget_requests(sentence))


_REPORTED = re.compile(
    r"\b(?:asked|asks|wants|wanted|would\s+like)\b[^.!?]{0,40}?\bto\s+(?:forget|stop\s+remembering)\b", re.I)


def asks_to_forget(statement: str) -> bool:
    """A request to forget, or a line that reports one ("The user asked me to forget their favourite band"): what
    forgetting leaves of the request itself, never to be taken out with what it named."""
    return is_forget_request(statement) or bool(_REPORTED.search(statement or ""))


def names_it(what: str, text: str, *, who: str = "") -> bool:
    """Whether a memory's text is about what the request names: every content word of the request is in it."""
    wanted = content_words(what, ignore=tuple(who.split()))
    return bool(wanted) and wanted <= content_words(text)
