"""Cheap, model-free triage of a message: chatter is dropped before any LLM call, filler sentences are trimmed."""
from __future__ import annotations

import re
from dataclasses import dataclass

from infra.sentences import sentence_spans, sentences_join
from infra.unspaced import UNSPACED_CHAR

# Words that carry no memory-worthy content on their own: greetings, thanks, acknowledgements, praise, farewells.
_FILLER = frozenset("""
a an the and or but so too very really truly totally absolutely definitely super pretty quite just
hi hey hello hiya yo howdy heya greetings morning afternoon evening night good nice great cool awesome amazing
wonderful fantastic fab fabulous lovely sweet neat brilliant excellent perfect beautiful gorgeous incredible
wow whoa woah oh ooh ah aw aww yay hooray haha hahaha hehe lol lmao omg gosh geez
thanks thank thx ty cheers appreciate appreciated it much lot tons bunch
ok okay k kk sure yes yeah yep yup yea no nope nah alright right true exactly indeed agreed agree totally
fine got gotcha understood noted will do done
thing things luck day have has had could can help enjoy fun same pleasure anytime course takes guts
bye goodbye later soon see ya you take care talk catch chat meet again
glad happy hear heard to for from with of at in on about that that's thats this it's its is was be been
sounds sound looks look seems seem feel feels
congrats congratulations welcome np problem worries
me my i i'm im we our us your you're youre
how what's whats up are have doing going new anything since last time long no
well hmm um uh erm
""".split())

_OPENERS = frozenset("hi hey hello hiya yo howdy heya thanks thank thx cheers wow whoa woah oh aw aww yay haha "
                     "congrats congratulations bye goodbye sure yes yeah yep ok okay agreed definitely".split())

# A word of any alphabet; in a script written without spaces, each character counts as one (infra/unspaced.py).
_WORD = re.compile(rf"{UNSPACED_CHAR.pattern}|[^\W\d_](?:(?!{UNSPACED_CHAR.pattern})[^\W\d_]|['’])*|\d+")


@dataclass(frozen=True)
class Triage:
    keep: bool
    text: str  # the message with filler sentences removed
    reason: str


def is_filler_sentence(sentence: str) -> bool:
    """True when every word is filler or a name used as a vocative ("Thanks, Mel!", "Hey Jon, good to see you!")."""
    words = _WORD.findall(sentence)
    if not words:
        return True
    if len(words) > 10:
        return False
    opener = words[0].lower() in _OPENERS
    for i, w in enumerate(words):
        lw = w.lower().replace("’", "'")
        if lw in _FILLER:
            continue
        # After a greeting or thanks, a capitalised word is the addressee's name ("Thanks, Mel!").
        if opener and i > 0 and w[0].isupper():
            continue
        return False
    return True


def informative_text(text: str) -> str:
    """The message without its filler sentences; empty when nothing is left. The layout of what is kept stays (blank
    lines, line breaks, indentation: a list, a code block, paragraphs keep their shape); a code fence is not
    filler."""
    text = text or ""
    kept = [(a, b) for a, b in sentence_spans(text)
            if text[a:b].lstrip().startswith(("```", "~~~")) or not is_filler_sentence(text[a:b])]
    if not any(_WORD.findall(text[a:b]) for a, b in kept):
        return ""
    return sentences_join(text, kept)


_SPEAKER = re.compile(r"^[^:\n]{1,40}:\s")


def is_phatic(text: str, *, names=()) -> bool:
    """A turn that only greets, thanks, praises, agrees or says goodbye, with the names of the people in it (its
    speaker's label, the person spoken to) taken out: "Maria: Take care, John!". It answers no question, and a question
    that names those people would otherwise find it by the names alone."""
    body = _SPEAKER.sub("", text or "", count=1)
    for name in sorted({n.strip() for n in names if n and n.strip()}, key=len, reverse=True):
        body = re.sub(rf"(?<!\w){re.escape(name)}(?:['’]s)?(?!\w)", " ", body, flags=re.I)
    return not informative_text(body)


# Only what the user says is remembered about them; what the assistant said is kept as episodic context (what was
# suggested, what was answered), never as facts.
FACT_ROLES = frozenset({"user"})
EXTRACTED_ROLES = frozenset({"user", "assistant"})


def extracted_roles(tenant) -> frozenset:
    """The roles whose messages wait for extraction in this tenant: the user's always, the assistant's unless the
    tenant keeps only what users say."""
    return EXTRACTED_ROLES if tenant.remember_assistant_turns else FACT_ROLES


def role_extracted(role: str) -> bool:
    """Whether extraction ever reads a message of this role (the user's and the assistant's words; tool results echo
    stored data). Messages of other roles are stored already marked extracted, and no task is queued for them."""
    return role in EXTRACTED_ROLES


def message_triage(*, text: str, role: str) -> Triage:
    """Decide whether a message is worth any further work (rules, LLM, storage)."""
    if not role_extracted(role):
        return Triage(False, "", "not_extracted")
    kept = informative_text(text)
    if not kept:
        return Triage(False, "", "chatter")
    if len(_WORD.findall(kept)) < 2:
        return Triage(False, "", "too_short")
    return Triage(True, kept, "informative")
