"""Whether a sentence is supported by source texts: the share of its content words the sources also contain.

One measure for every check that asks "does this come from there" (an answer's claims against what the tools
returned, a bridge's sentences against the session's turns, which memories an answer used). Words are compared
lightly stemmed, without stopwords and without the words any summary uses to frame what was said ("the user asked
..."), which say nothing about whether its content was said.
"""
from __future__ import annotations

import re

# A sentence is supported when at least half its content words occur in the sources: then it is mostly about what
# they say; below half it mostly says something they do not.
SUPPORTED_SHARE = 0.5

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOPWORDS = frozenset("""a an the and or but if then so as of at by for with about against between into through
during before after above below to from up down in out on off over under again further once here there when where
why how all any both each few more most other some such no nor not only own same than too very s t can will just
don t should now i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves what which who whom this that these those am is are was
were be been being have has had having do does did doing would could might must shall may also still yet ok okay
yes please thanks thank hi hello let let's i'm i've i'd i'll you're you've you'll it's that's there's here's
don't doesn't didn't won't can't isn't aren't wasn't weren't""".split())
# Words a note or an answer frames content with: they are about the conversation, not what it contained.
_FRAMING = frozenset("""user users assistant assistants asked ask asks asking wants want wanted wanting would like
said says say told tell mentioned mention mentions discussed discuss discussion noted note session sessions
conversation conversations request requested requests question questions know knows knew wondering
remember remembers record recorded""".split())


def _stem(word: str) -> str:
    """A light suffix stripper: enough that "seats", "seat" and "prefers", "preferred", "prefer" meet."""
    w = word.split("'")[0]
    for suffix, keep in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("ly", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: len(w) - len(suffix)] + keep
            break
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":  # "preferr" -> "prefer"
        w = w[:-1]
    return w


def content_words(text: str, *, ignore: tuple[str, ...] | frozenset = ()) -> set[str]:
    """The stemmed content words of a text; `ignore` adds words of the caller's (a user's name)."""
    skip = {w.lower() for w in ignore}
    out = set()
    for word in _WORD.findall((text or "").lower()):
        if word in _STOPWORDS or word in _FRAMING or word in skip or word.split("'")[0] in skip:
            continue
        out.add(_stem(word))
    return out


def support_share(text: str, sources, *, ignore: tuple[str, ...] | frozenset = ()) -> float:
    """The share of the text's content words found in any of the sources (1.0 for a text with none)."""
    words = content_words(text, ignore=ignore)
    if not words:
        return 1.0
    pool = set()
    for source in sources:
        pool |= content_words(source, ignore=ignore)
    return len(words & pool) / len(words)


def is_supported(text: str, sources, *, ignore: tuple[str, ...] | frozenset = ()) -> bool:
    return support_share(text, sources, ignore=ignore) >= SUPPORTED_SHARE
