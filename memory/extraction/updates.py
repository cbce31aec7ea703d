"""When a later telling updates an earlier one: a near-duplicate that changes a number, a name or a negation, or a
statement that says in words that something changed ("I stopped eating meat", "sorry, I meant Munich"). What the
user says last is then the current memory, and the older one is superseded (kept in its history), never reinforced
with words it does not hold."""
from __future__ import annotations

import re
from collections.abc import Callable

from infra.sentences import sentence_spans, sentences, sentences_join
from infra.support import content_words

from .classify import informative_text
from .statements import past_form

_WORDS = re.compile(r"[\w$€£%.,:/'’-]*\w")
_NAME = re.compile(r"[^\W\d_][^\W_]*(?:['’][^\W_]+)*")
_I_CONTRACTION = re.compile(r"I['’][a-z]+$")  # "I'm", "I've", "I'd": the speaker, no name
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
             if m.group(0)[0].isupper() and not m.group(0).isupper() and not _I_CONTRACTION.match(m.group(0))
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


# Words that say a state changed or that what follows is its current value: a verb of change ("moved", "switched to",
# "migrating from"; its other forms only before where it goes, since "changes" and "moves" are nouns as often), "now"
# as the time a state holds, an update or correction announced, "instead", "from now on". Alone they prove nothing
# (people say "now" about anything); `replaces` also asks for a subject both statements share and a value that differs.
_CHANGE_VERB = r"(?:chang|mov|migrat|replac|upgrad|downgrad|relocat|transferr?|swapp?|convert|shift|switch|updat)"
_CHANGE_MARKER = re.compile(
    rf"\b(?:{_CHANGE_VERB}e?d(?!\s+by\b)|{_CHANGE_VERB}(?:e|es|s|ing)?\s+(?:to|from|over|into|back|again)|"
    r"update(?=\s*[:—–-])|correction|instead|no\s+longer|anymore|any\s+more|these\s+days|nowadays|"
    r"(?:stopped|quit|gave\s+up)\s+\w+ing|i\s+meant|scratch\s+that|from\s+now\s+on|going\s+forward|"
    r"(?<!until\s)(?<!up\sto\s)(?<!by\s)(?<!just\s)now(?!\s+that\b))\b", re.I)
# Before its change, a sentence that only plans, wishes, supposes or asks it: the change has not happened. ("May" and
# "Will" capitalised are a month and a name.)
_NOT_DONE = re.compile(
    r"\b(?:(?-i:will|may)|won't|'ll|going\s+to|gonna|plan(?:s|ning)?\s+to|want(?:s|ed)?\s+to|would|'d|might|could|"
    r"should|thinking\s+(?:of|about)|consider(?:s|ing)?|hope\s+to|about\s+to|if|unless|whether|maybe|perhaps)\b",
    re.I)
# A "from X to Y" names the value it changes from and the one it changes to.
_FROM_TO = re.compile(r"\bfrom\s+(?:the\s+)?(?P<old>[^\s,;:.!?]+(?:\s+[^\s,;:.!?]+){0,2}?)\s+(?:to|into|over\s+to)\s+"
                      r"(?:the\s+)?(?P<new>[^\s,;:.!?]+)", re.I)
# Two sentences that name different values on a shared word are about the same thing when they mean at least this
# alike (cosine of their embeddings, without the speaker's name): a statement and its change read well above it, two
# remarks that share a word and a number or name by chance well below.
SAME_SUBJECT_SIMILARITY = 0.5
# Present-tense forms: a sentence with one states what holds (it can stop holding); one with only past forms
# reports what happened, which a later change does not undo ("I saw a band in Boston" stays true).
_PRESENT = frozenset("""is are am isn't aren't has have hasn't haven't do does don't doesn't now currently usually
always every it's that's he's she's there's""".split())
_PAST = frozenset("was were wasn't weren't had hadn't did didn't".split())
# The words of a change itself name no subject ("moved", "update") and a number's digits name none either.
_CHANGE_WORDS = frozenset(content_words("change changed changes changing move moved moves moving migrate migrated "
                                        "migrating replace replaced replacing upgrade upgraded downgrade downgraded "
                                        "relocate relocated switch switched switching update updated updates "
                                        "correction instead longer anymore nowadays days forward"))


def _stated(sentence: str) -> bool:
    return not sentence.rstrip().endswith("?")


def change_sentences(text: str) -> list[str]:
    """The sentences of `text` that say something changed, as done (not planned, supposed or asked)."""
    out = []
    for sentence in sentences(text):
        m = _CHANGE_MARKER.search(sentence)
        if m and _stated(sentence) and not _NOT_DONE.search(sentence[:m.start()]):
            out.append(sentence)
    return out


def _holds(sentence: str) -> bool:
    """Whether the sentence states what holds rather than reporting what happened: it has a present form, or no past
    one ("Our service runs on MySQL")."""
    words = [w.strip(".,;:!?\"()").replace("’", "'") for w in sentence.lower().split()]
    if any(w in _PRESENT or w.endswith(("'re", "'m", "'ve")) for w in words):
        return True
    return not any(w in _PAST or past_form(w) for w in words)


def _named(phrase: str, text: str) -> bool:
    return bool(re.search(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])", text, re.I))


def _unprefixed(sentence: str, who: str) -> str:
    """The sentence without the label that opens it with the speaker's name ("Ada: ...", "Ada asked the assistant:
    ..."): the same name before two sentences makes them read alike whatever they say."""
    head, colon, rest = sentence.partition(": ")
    return rest if who and colon and head.startswith(who) and len(head) <= len(who) + 30 else sentence


def replaced_spans(change: str, stored: str, *, who: str = "", alike: Callable[[str, str], float]
                   ) -> list[tuple[int, int]]:
    """The sentences of `stored` (spans, as sentence_spans gives them) for which `change`, a sentence that says
    something changed (change_sentences), gives a new value, however long `stored` is. Such a sentence states what
    holds, and shares a word of its subject with the change (a content word other than the speaker's name, the
    values and the words of change); and either it holds the value the change says it moved from and not the one it
    moved to ("from MySQL to PostgreSQL"), or it names a value (a number or a name) where the change names another
    and the two sentences mean alike (`alike`, a cosine of their embeddings, at least SAME_SUBJECT_SIMILARITY): a
    word in common and two values are also what two sentences about different things have ("our one-year-old is
    Kyle", "he was with us for 10 years")."""
    ignore = tuple(who.split()) if who else ()
    numbers, names, _ = _particulars(change)
    new_values = (numbers | names) - set(ignore)
    moves = [(m.group("old"), m.group("new")) for m in _FROM_TO.finditer(change)]
    moved = {word for move in moves for word in move}
    found = []
    for start, end in sentence_spans(stored):
        sentence = stored[start:end].strip()
        if not _stated(sentence) or not _holds(sentence):
            continue
        numbers, names, _ = _particulars(sentence)
        values = (numbers | names) - set(ignore)
        value_words = content_words(" ".join(new_values | values | moved))
        shared = (content_words(change, ignore=ignore) & content_words(sentence, ignore=ignore)) - value_words \
            - _CHANGE_WORDS
        if not any(not w.isdigit() for w in shared):
            continue  # another subject
        if any(_named(old, sentence) and not _named(new, sentence) for old, new in moves):
            found.append((start, end))
        elif (new_values - values and values - new_values
              and alike(_unprefixed(change, who), _unprefixed(sentence, who)) >= SAME_SUBJECT_SIMILARITY):
            found.append((start, end))
    return found


def replaces(change: str, stored: str, *, who: str = "", alike: Callable[[str, str], float]) -> bool:
    """Whether `change` gives a new value for something `stored` states (replaced_spans)."""
    return bool(replaced_spans(change, stored, who=who, alike=alike))


def statement_remainder(stored: str, replaced: list[tuple[int, int]], *, who: str = "") -> str:
    """What `stored` says besides its replaced sentences, in its own layout and under its speaker's label ("Ada:
    ..."), when that is more than filler; else "". A change retires the statement of the old value, not the other
    things said in the same message ("It has 64 GB of RAM" beside "Our staging server runs on Hetzner")."""
    cut = set(replaced)
    spans = sentence_spans(stored)
    kept = [span for span in spans if span not in cut]
    if not kept or len(kept) == len(spans):
        return ""
    text = sentences_join(stored, kept)
    if not informative_text(text):
        return ""
    first = stored[kept[0][0]:kept[0][1]].strip()
    whole = stored.strip()
    label = whole[:len(whole) - len(_unprefixed(whole, who))]
    if label and _unprefixed(first, who) == first:
        text = label + text  # the label opened a sentence that was cut
    return text
