"""Rule-based extraction of explicit statements: "my X is Y", likes and dislikes, habits, goals, names,
order and booking numbers, travel slots and dates. No model: this is what runs when no LLM is configured."""
from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

from dateparser.date import DateDataParser

from infra.sentences import sentences
from infra.support import content_words

from .candidate import Candidate, subject_normalize
from .project_facts import before_request, project_facts, prose
from .statements import past_form

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTH_RE = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
            r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
# Short names too, but not "sat" and "sun": they are ordinary words ("where I last sat").
_WEEKDAY_RE = r"(?:mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?|saturday|sunday)"
_RX_WEEKDAY = re.compile(rf"\b{_WEEKDAY_RE}\b")
# The phrases that name a date. Which words count as a number ("two", "twenty-five"; not "few") is the parser's call.
_RX_DATE_PHRASE = re.compile(
    rf"\b(?:the\s+day\s+(?:before\s+yesterday|after\s+tomorrow)|yesterday|today|tonight|tomorrow"
    rf"|(?:last|next|this)\s+(?:week|month|year|{_WEEKDAY_RE})"
    rf"|(?:\d{{1,4}}|[a-z]+(?:-[a-z]+)?)\s+(?:day|week|month|year)s?\s+ago"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH_RE}(?:,?\s+\d{{4}})?|{_MONTH_RE}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?)\b")


def _weekday_index(name: str) -> int:
    return next(i for i, day in enumerate(_WEEKDAYS) if day.startswith(name[:2]))


# "on Thursday" without last/next: which Thursday the sentence's tense says. "on Thursdays" is a habit, not a day.
_RX_ON_WEEKDAY = re.compile(rf"\bon\s+({_WEEKDAY_RE})\b(?!s)")
_RX_FUTURE = re.compile(r"\b(?:will|shall|won't|gonna|going\s+to|plan(?:ning)?\s+to|about\s+to|hope\s+to|"
                        r"can't\s+wait|see\s+you|tomorrow|next|can|should|let's|upcoming)\b|'ll\b")
# Before these an -ed word describes a noun ("the proposed plan", "your updated schedule"): it reports nothing.
_ATTRIBUTIVE = frozenset("a an the this that these those my your our their his her its well more most newly".split())


def _reports(words: list[str]) -> bool:
    """Whether the sentence's words tell of something done: a verb in the past that is not a noun's adjective."""
    return any(w in ("was", "were") or (past_form(w) and (i == 0 or words[i - 1] not in _ATTRIBUTIVE))
               for i, w in enumerate(words))


def _on_weekday_dates(text: str, ref: date) -> list[tuple[int, dict]]:
    """A bare "on Friday" in a sentence that tells its tense: the Friday before the message's day when the sentence
    reports ("Dana had a baby on Tuesday"), the Friday after it when it looks ahead ("we'll fly on Friday", "you can
    present it on Monday"). A sentence that says neither, or both, names no day: a date shown beside a line must be
    right, so an unsure one is left out. Sentences as infra.sentences cuts them (a heading or a list item is one of
    its own), positions in the whole text's lower case."""
    found, at = [], 0
    lower = text.lower()
    if not _RX_ON_WEEKDAY.search(lower):
        return found  # most texts name no weekday: they are not cut into sentences (retrieval renders turns with this)
    for sentence in (s.lower() for s in sentences(text)):
        offset = lower.find(sentence, at)
        offset = at if offset < 0 else offset  # a letter whose lower case is longer moved it: near enough to order
        at = offset
        matches = list(_RX_ON_WEEKDAY.finditer(sentence))
        if not matches:
            continue
        future = bool(_RX_FUTURE.search(sentence))
        past = _reports(re.findall(r"[a-z']+", sentence))
        if future == past:
            continue
        for m in matches:
            gap = (ref.weekday() - _weekday_index(m.group(1))) % 7 or 7
            d = ref - timedelta(days=gap) if past else ref + timedelta(days=(7 - gap) or 7)
            found.append((offset + m.start(), {"phrase": m.group(0), "date": d.isoformat(), "granularity": "day"}))
    return found


# Values that describe a mood, not a fact worth a slot ("my day was great").
_MOOD = frozenset("""good great fine ok okay bad awful terrible amazing awesome busy hectic crazy tough hard rough
nice cool wonderful lovely fun boring insane wild stressful tiring exhausting perfect so really very pretty
important inspiring special everything such super totally always""".split())
# A slot name is a short noun phrase; these words mean the regex ran across a clause boundary instead.
_CLAUSE_WORDS = frozenset("""when while and but so that which who whom whose because if i you we they he she it is was
were are am be been not also just really very""".split())
_NOT_SUBJECTS = frozenset("""god goodness bad pleasure point guess thought thoughts opinion take day week weekend
life heart mind friend friends family kids husband wife pleasure""".split())

# "My template path is correct": a verdict on how something works right now (the problem the user brings), not a
# lasting fact about them.
_VERDICT = frozenset("""correct incorrect right wrong broken working fixed done ready empty missing same different
weird strange off messed fine""".split())
# A sentence states what it says unless it asks, supposes or hedges: a question ("is my flight on time"), a condition
# ("if my flight is cancelled, ..."), a supposition or a maybe. Slot rules read only stated sentences.
_NOT_STATED = re.compile(r"^\W*(?:(?:and|but|so|oh|well|ok|okay)\W+)?(?:if|unless|whether|what\s+if|suppose|supposing|"
                         r"imagine|in\s+case|maybe|perhaps|do|does|did|is|are|am|was|were|can|could|would|should|"
                         r"will|shall|have|has|may|might|why|how|what|where|who|which)\b", re.I)
# Words that may open a sentence before its statement ("Oh, and my sister is a nurse", "By the way, I plan to...").
# Anything else before "my X is" or "I want to" makes it a subordinate clause ("I checked that my path is correct",
# "Do you think I need to...").
_OPENERS = frozenset("""oh ah yes yeah yep yup no nope well so and also plus but btw by the way actually anyway
anyways now fyi ok okay hey hi hello haha lol wow um uh hmm just currently today tonight these days nowadays finally
honestly really sure right alright thanks thank you first second then besides""".split())
# What a user wants from this conversation rather than in their life: help, an answer, to be sure. "I need help with
# the implementation details" asks the assistant; it is not a goal of the user's.
_META_GOAL = re.compile(r"^(?:(?:some|your|a\s+little|more)\s+)?(?:help|assistance|advice|a\s+hand|you\b|"
                        r"to\s+(?:know|ask|make\s+sure|be\s+sure|check|confirm|clarify|understand|see|figure\s+out|"
                        r"get\s+(?:this|it)|fix\s+(?:this|it)|do\s+(?:this|it)|try\s+(?:this|it)|mention|say|add|"
                        r"share|tell|talk|chat|vent|thank))\b", re.I)
# "I always feel like...", "I never want to go through this again": a feeling or a thought, not a habit.
_NOT_HABITS = frozenset("""feel felt think thought wonder wondered wish wished want wanted know knew forget forgot
remember remembered believe believed hope hoped mean meant expect expected imagined imagine guess""".split())


# A distilled line is read without the turn it came from, so it must say what it means on its own. Words that point
# outside the sentence (a pronoun for something said before, the person spoken to) leave a line that reads as nonsense
# ("Ann loves the thought.", "Ann doesn't want her kids to go through that."): such a statement is kept as the turn
# itself, never as a typed line.
_POINTING = frozenset("""it that this these those them they he she him her hers his their theirs there one ones
something anything everything nothing someone somebody""".split())
_SPOKEN_TO = frozenset("you your yours yourself y'all ya".split())
_TRAILING = frozenset("too also either again anymore more much lot so as well now though all".split())
_REACTION = re.compile(r"^(?:the\s+(?:thought|idea|sound|way|fact|feeling)|to\s+(?:hear|see|know|read)|hearing|"
                       r"seeing|knowing|reading|how|what|when|where|why|who|which|whatever)\b", re.I)
# In a statement about oneself, a third person's pronoun anywhere names someone or something said elsewhere ("the
# freedom and connection it brings"): the speaker's own words were already made "Ann's".
_THIRD_PERSON = frozenset("it its they them their theirs he him his she her hers".split())
# An object opens with a noun phrase or a verb's base form, never a finite verb ("Ann loves is awesome"), and a
# phrase that ends on an article, a conjunction or a possessive was cut short ("... by sharing ideas and taking a").
_FINITE = frozenset("is are was were am has had does did can could will would should shall".split())
_UNFINISHED = frozenset("a an the and or but nor my our of".split())
_ELSEWHERE = _SPOKEN_TO | _THIRD_PERSON  # anywhere in the object, such a word names someone outside the statement


def _dangling(phrase: str) -> bool:
    """Whether a statement's object does not read on its own: it leans on words outside its sentence (it opens or ends
    with a pointing word, holds a third person's pronoun, names the person spoken to, or is a reaction such as "the
    thought of ..." or "to hear that"), or is not a whole phrase (opens with a finite verb, ends cut short)."""
    words = [w.lower().replace("’", "'") for w in re.findall(r"[\w'’]+", phrase)]
    while words and words[-1] in _TRAILING:
        words.pop()
    if not words:
        return True
    return (words[0] in _POINTING or words[-1] in _POINTING or not _ELSEWHERE.isdisjoint(words)
            or words[0] in _FINITE or words[-1] in _UNFINISHED or bool(_REACTION.match(phrase.strip())))


def _stated(sentence: str) -> bool:
    return not sentence.rstrip().endswith("?") and not _NOT_STATED.match(sentence)


def _opens_with(sentence: str, start: int) -> bool:
    """Whether what comes before `start` only opens the sentence (interjections, "by the way", a name addressed)."""
    for word in sentence[:start].split():
        bare = word.strip(",.!;:—–-\"'()").lower()
        if bare and bare not in _OPENERS and not (word.endswith(",") and word[:1].isupper()):
            return False
    return True


_CAP = r"[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*){0,3}"
_RX_MY_X_IS_Y = re.compile(r"\bmy\s+(?P<x>[a-z][a-z '’-]{1,40}?)\s+(?:is|are|was|will be)\s+(?P<y>[^.!?;,]{1,80})",
                           re.I)
_RX_NAME = re.compile(rf"\b(?i:my name is|my name's|call me|i am called|i'm called)\s+(?P<y>{_CAP})")
_RX_LIKE = re.compile(
    r"\bI\s+(?:(?:really|truly|absolutely|totally|also|just|still)\s+)?"
    r"(?P<verb>prefer|like|love|enjoy|adore|hate|dislike|detest|can't stand|cannot stand|don't like|do not like|"
    r"don't want|avoid)\s+(?P<obj>[^.!?;]{2,90})", re.I)
_RX_HABIT = re.compile(r"\bI\s+(?P<freq>never|always|usually|rarely|often)\s+(?P<obj>[^.!?;]{3,90})", re.I)
# "I prefer aisle seats, and never United": a second clause whose subject is the speaker left implicit.
_RX_ELIDED_AVOID = re.compile(r"\bI\b[^.!?;]*?(?:,\s*|\s)(?:and|but)\s+(?:(?:also|definitely|absolutely)\s+)?"
                              r"(?:never|no)\s+(?P<obj>(?:the\s+|a\s+|an\s+)?[A-Z][\w'’&-]*(?:\s+[A-Z][\w'’&-]*){0,3})",
                              re.I)
# "I prefer aisle seats and never fly United": an elided habit (the verb is there, the subject is not).
_RX_ELIDED_HABIT = re.compile(r"\bI\b[^.!?;]*?(?:,\s*|\s)(?:and|but)\s+(?P<freq>never|always)\s+"
                              r"(?P<obj>[a-z][a-z'’]+\s+[^.!?;,]{2,80})")
_RX_GOAL = re.compile(
    r"\bI(?:'m| am)?\s*(?:really\s+)?(?P<verb>need to|want to|would like to|'d like to|wanna|plan to|am planning to|"
    r"'m planning to|planning to|hope to|intend to|am going to|'m going to|have to|am trying to|'m trying to|"
    r"am looking for|'m looking for|need|want)\s+(?P<g>[^.!?;]{3,110})", re.I)
_RX_REFERENCE = re.compile(
    r"\b(?P<label>order|booking|reservation|confirmation|ticket|tracking|case|invoice|policy|membership|"
    r"loyalty|frequent flyer|customer)\s*(?:number|no\.?|#|id|code|reference|ref)?\s*(?:is|was|:)?\s*#?\s*"
    r"(?P<num>(?=[A-Z0-9-]*\d)[A-Z0-9][A-Z0-9-]{3,24})\b", re.I)
_RX_CHANGE = re.compile(r"\b(?:change|switch|update|move|set|make)\s+(?:the|my|our)\s+(?P<x>[a-z][a-z ]{1,30}?)\s+"
                        r"(?:to|into)\s+(?P<y>[^.!?,;]{1,60})", re.I)
_RX_TRIP = re.compile(rf"\b(?:flight|fly|flying|trip|travel(?:l?ing)?|train|drive|driving|ticket|route)\b[^.!?;]*?"
                      rf"\bfrom\s+(?P<o>{_CAP})\s+to\s+(?P<d>{_CAP})")
_RX_DEST = re.compile(rf"\b(?:fly(?:ing)?|travel(?:l?ing)?|flight|trip|heading|moving)\s+to\s+(?P<d>{_CAP})")
_RX_BUDGET = re.compile(r"\b(?:under|below|less than|at most|max(?:imum)?(?: of)?|budget(?: of| is)?|"
                        r"up to|no more than)\s*(?P<cur>[$€£])\s?(?P<n>\d[\d,]*(?:\.\d+)?)", re.I)

# A standing instruction to the assistant: an imperative (no subject: it opens with a verb of doing or saying, or with
# always / never / don't), after optional courtesy or scope ("please", "from now on,", "whenever you write code,"),
# that holds beyond this turn: it names a standing scope (always, every, any, unless, from now on...). A one-off
# request ("write a function that...") names none, and "I always take the train" has a subject, so it is a habit.
_INSTRUCTION_OPENER = re.compile(
    r"^\s*(?:(?:please|kindly|and|also)\s+|(?:from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|by\s+default)"
    r",?\s+|(?:when(?:ever)?|each\s+time|every\s+time|if)\s+you\b[^,;]{1,80},\s*)*"
    r"(?P<verb>always|never|don't|do\s+not|use|write|keep|answer|reply|respond|give|show|include|add|link|cite|put|"
    r"format|avoid|stop|start|make|call|address|explain|list|mention|spell|stick|be|speak|talk|label|mark|sort|round|"
    r"convert|translate|limit|skip|omit|assume|refer|treat|quote|check|ask|remind|state|say|name|prefer)\b", re.I)
_STANDING_SCOPE = re.compile(
    r"\b(?:always|never|every|everything|each|any|anything|all|whenever|unless|from\s+now\s+on|going\s+forward|"
    r"in\s+(?:the\s+)?future|by\s+default|each\s+time|every\s+time)\b", re.I)
# "Never mind", "always a pleasure", "never saw this coming": set phrases and reports, not orders (after always or
# never, an order has a verb's base form, not a past form or "here").
_NOT_INSTRUCTION = re.compile(r"^\s*(?:never\s+mind|don't\s+worry|do\s+not\s+worry|be\s+(?:careful|safe)|"
                              r"(?:always|never)\s+(?:a|an|the|so|too|again|ever|here|there|had|was|were|did|been|"
                              r"saw|seen|knew|thought|got|felt|[a-z]+ed)\b)", re.I)
# A standing instruction to an assistant governs what it produces: its answers, what it writes and how. Encouragement
# between people ("keep going and never give up!", "don't let anything stop you") names none of that.
_OUTPUT = re.compile(
    r"\b(?:answers?|answering|repl(?:y|ies)|respon(?:d|ses?)|write|writing|written|draft\w*|code|snippets?|"
    r"examples?|suggest\w*|recommend\w*|propos\w*|explain\w*|explanations?|format\w*|units?|dates?|times?|"
    r"languages?|spell\w*|tone|words|bullets?|lists?|links?|cite|citations?|sources?|tests?|summar\w*|"
    r"mention\w*|show|label\w*|quote\w*|me|my)\b", re.I)
def instruction_of(sentence: str) -> str | None:
    """The sentence as a standing instruction, or None when it is not one."""
    s = sentence.strip()
    if (len(s) > 240 or _NOT_INSTRUCTION.match(s) or not _INSTRUCTION_OPENER.match(s)
            or not _STANDING_SCOPE.search(s) or not _OUTPUT.search(s)):
        return None
    return s if s.endswith((".", "!", "?")) else s + "."


# A clause that starts after the object: "I like tea and I never drink coffee" keeps "tea".
# A clause ends at a conjunction with a new subject, or at a comma, except the comma before a name set off by commas
# ("my old area, West County, too"): that names what the clause is about. A name after the last comma is left out,
# since at the end of a sentence it is mostly the person spoken to ("I want to open a studio, Gina.").
_CLAUSE_END = re.compile(r"\s+(?:and|but|because|since|so|when|while|as|although|though|or)\s+(?:I|we|he|she|they|it)\b"
                         r"|\s+(?:and|but)\s+(?=(?:never|always)\b)"
                         r"|,\s(?!(?-i:[A-Z][\w'-]*(?:\s[A-Z][\w'-]*){0,3}),)", re.I)


# "coffee over tea", "trains to planes", "tea rather than coffee": what is preferred, and what it is preferred to.
_RX_OVER = re.compile(r"(?!to\s)(?P<x>.+?)\s+(?:over|to|rather\s+than|instead\s+of|more\s+than)\s+(?P<y>[^,]+?)$", re.I)


def _object(value: str) -> str:
    return _clean(_CLAUSE_END.split(value, maxsplit=1)[0])


def _habit(who: str, freq: str, obj: str, *, confidence: float) -> Candidate:
    """ "never fly United" is a habit, a slot a later statement can change; "never tried mountain climbing" (a past
    form) reports what did or did not happen: a fact in the user's own words, no slot."""
    if past_form(obj.split(" ", 1)[0]):
        return Candidate("fact", f"{who} {freq} {_first_to_third(obj, who)}.", confidence=confidence, importance=0.6)
    return Candidate("preference", f"{who} {freq} {_first_to_third(_conjugate_first(obj), who)}.",
                     subject=f"habit: {subject_normalize(obj)}", value=freq, confidence=confidence, importance=0.7)


def _conjugate_first(phrase: str) -> str:
    """ "fly United" → "flies United": a habit is reported in the third person."""
    head, _, rest = phrase.partition(" ")
    h = head.lower()
    if h in ("be", "am"):
        head = "is"
    elif h == "have":
        head = "has"
    elif h == "do":
        head = "does"
    elif h == "go":
        head = "goes"
    elif re.search(r"[^aeiou]y$", h):
        head = head[:-1] + "ies"
    elif re.search(r"(?:s|sh|ch|x|z|o)$", h):
        head = head + "es"
    elif h.isalpha():
        head = head + "s"
    return f"{head} {rest}".strip()


def _clean(value: str) -> str:
    return re.sub(r"\s+", " ", value).strip(" ,.-'\"")


def _possessive(who: str) -> str:
    return f"{who}'" if who.endswith("s") else f"{who}'s"


def _third_person(verb: str) -> str:
    v = verb.lower().replace("’", "'")
    fixed = {"can't stand": "can't stand", "cannot stand": "can't stand", "don't like": "doesn't like",
             "do not like": "doesn't like", "don't want": "doesn't want"}
    if v in fixed:
        return fixed[v]
    if v.endswith(("s", "sh", "ch")):
        return v + "es"
    return v + "s"


def _first_to_third(text: str, who: str) -> str:
    """Rewrite the rest of a statement about oneself: "my seat" → "Ada's seat", "I" → "Ada"."""
    out = re.sub(r"\bmy\b", _possessive(who), text, flags=re.I)
    out = re.sub(r"\bmyself\b", "themselves", out, flags=re.I)  # reflexive: its subject is named already
    out = re.sub(r"\bmine\b", _possessive(who), out)
    out = re.sub(r"\bme\b(?!-)", who, out)  # not "me-time"
    out = re.sub(r"\bI'm\b|\bI am\b", f"{who} is", out)
    return re.sub(r"\bI\b", who, out)


def _sentiment(verb: str) -> str:
    v = verb.lower()
    return "negative" if any(w in v for w in ("hate", "dislike", "detest", "stand", "don't", "do not", "avoid")) \
        else "positive"


def date_phrase_in(text: str) -> bool:
    """Whether the text holds anything resolve_dates could read as a date (cheap: no parser)."""
    lower = text.lower()
    return bool(_RX_DATE_PHRASE.search(lower) or _RX_ON_WEEKDAY.search(lower))


def resolve_dates(text: str, reference: datetime | date) -> list[dict]:
    """Relative and absolute dates in the text, resolved against the message's own date: each phrase with its date
    and what span it names (day, week, weekend, month or year), in the order they are said."""
    ref = reference.date() if isinstance(reference, datetime) else reference
    # Noon of the message's day: whatever zone the parser works in, arithmetic on days never crosses midnight.
    parser = DateDataParser(languages=["en"], settings={
        "RELATIVE_BASE": datetime.combine(ref, time(12)), "PREFER_DATES_FROM": "current_period",
        "RETURN_AS_TIMEZONE_AWARE": False})
    found: list[tuple[int, dict]] = []
    lower = text.lower()
    for m in _RX_DATE_PHRASE.finditer(lower):
        # The parser misreads some short weekday names ("wed", "thurs"): it is handed the full one.
        phrase = _RX_WEEKDAY.sub(lambda w: _WEEKDAYS[_weekday_index(w.group(0))], m.group(0))
        parsed = parser.get_date_data(phrase)
        if parsed.date_obj is None:
            continue
        granularity = parsed.period or "day"
        d = parsed.date_obj.date()
        if granularity == "month":
            d = d.replace(day=1)
        elif granularity == "year":
            d = d.replace(month=1, day=1)
        found.append((m.start(), {"phrase": m.group(0), "date": d.isoformat(), "granularity": granularity}))
    found += _on_weekday_dates(text, ref)
    # The parser knows no weekend.
    for m in re.finditer(r"\b(last|next|this)\s+weekend\b", lower):
        sign = {"last": -1, "next": 1, "this": 0}[m.group(1)]
        found.append((m.start(), {"phrase": m.group(0), "date": (ref + timedelta(days=7 * sign)).isoformat(),
                                  "granularity": "weekend"}))
    out: list[dict] = []
    for _, d in sorted(found, key=lambda item: item[0]):
        if d not in out:
            out.append(d)
    return out


def slot_changes(text: str) -> list[tuple[str, str]]:
    """The slots a message changes in so many words ("change the destination to Newark"): (slot, new value)."""
    return [(subject_normalize(_clean(m.group("x"))), _clean(m.group("y")))
            for sentence in sentences(text) for m in _RX_CHANGE.finditer(sentence) if _clean(m.group("y"))]


def slot_values(text: str) -> dict[str, list[str]]:
    """The values the rules read off a text, by slot ({"destination": ["NYC"], "origin": ["SFO"]})."""
    out: dict[str, list[str]] = {}
    for c in rules_extract(text):
        if c.kind == "fact" and c.subject and c.value:
            out.setdefault(c.subject, []).append(c.value)
    return out


def rules_extract(text: str, *, who: str = "The user", reference: datetime | date | None = None,
                  with_project_facts: bool = False) -> list[Candidate]:
    """Explicit statements in a user's message. `text` must already be free of secrets and filler."""
    out: list[Candidate] = []
    seen: set[tuple[str, str]] = set()

    def add(c: Candidate) -> None:
        key = (c.kind, c.text.lower())
        if key not in seen and len(c.text) <= 300:
            seen.add(key)
            out.append(c)

    for sentence in sentences(text):
        instruction = instruction_of(sentence)
        if instruction:
            # A procedure the assistant must follow in every later turn: the standing profile shows it whatever
            # the turn is about. Its words are its subject, so repeating it reinforces it and a new one adds to it.
            add(Candidate("procedure", f"{who} asked the assistant: {instruction}",
                          subject=f"instruction: {subject_normalize(instruction)[:80]}", value=instruction,
                          confidence=0.85, importance=0.8))
        for m in _RX_NAME.finditer(sentence):
            name = _clean(m.group("y"))
            add(Candidate("fact", f"{_possessive(who)} name is {name}.", subject="name", value=name,
                          confidence=0.95, importance=0.8))
        # What the user is, likes, does and means to do is read from statements only; a request in a question's
        # form ("could you change my seat to 14C?", "can you find a flight from SFO to NYC?") still names its slots.
        stated = _stated(sentence)
        for m in _RX_MY_X_IS_Y.finditer(sentence) if stated else ():
            x, y = _clean(m.group("x")), _clean(m.group("y"))
            first = y.split()[0].lower() if y.split() else ""
            words = x.lower().split()
            if (not y or first in _MOOD or first in _VERDICT or first in ("not", "no", "never")
                    or x.lower() in _NOT_SUBJECTS or x.lower() == "name" or len(words) > 4
                    or any(w in _CLAUSE_WORDS or w in _POINTING for w in words) or _dangling(y)
                    or not _opens_with(sentence, m.start())):
                continue
            add(Candidate("fact", f"{_possessive(who)} {x} is {_first_to_third(y, who)}.", subject=subject_normalize(x),
                          value=y, confidence=0.9, importance=0.7))
        for m in _RX_TRIP.finditer(sentence):
            add(Candidate("fact", f"{_possessive(who)} origin is {_clean(m.group('o'))}.", subject="origin",
                          value=_clean(m.group("o")), confidence=0.8, importance=0.6))
            add(Candidate("fact", f"{_possessive(who)} destination is {_clean(m.group('d'))}.", subject="destination",
                          value=_clean(m.group("d")), confidence=0.8, importance=0.6))
        if not _RX_TRIP.search(sentence):
            for m in _RX_DEST.finditer(sentence):
                add(Candidate("fact", f"{_possessive(who)} destination is {_clean(m.group('d'))}.",
                              subject="destination", value=_clean(m.group("d")), confidence=0.7, importance=0.6))
        for m in _RX_CHANGE.finditer(sentence):
            x, y = _clean(m.group("x")), _clean(m.group("y"))
            add(Candidate("fact", f"{_possessive(who)} {x} is {_first_to_third(y, who)}.", subject=subject_normalize(x),
                          value=y, confidence=0.9, importance=0.7))
        for m in _RX_BUDGET.finditer(sentence):
            amount = f"{m.group('cur')}{m.group('n')}"
            add(Candidate("fact", f"{_possessive(who)} budget is at most {amount}.", subject="budget", value=amount,
                          confidence=0.8, importance=0.6))
        for m in _RX_REFERENCE.finditer(sentence):
            label, num = m.group("label").lower(), m.group("num")
            add(Candidate("fact", f"{_possessive(who)} {label} number is {num}.", subject=f"{label} number",
                          value=num, confidence=0.9, importance=0.7))
        for m in _RX_LIKE.finditer(sentence) if stated else ():
            obj = _object(m.group("obj"))
            # "I'd love to!", "I love that": a liking of nothing nameable is a reaction, not a preference (the turn
            # itself is kept as an event, with the words it reacts to around it).
            if len(obj.split()) > 14 or not content_words(obj) or _dangling(obj):
                continue
            verb = m.group("verb")
            c = Candidate("preference", f"{who} {_third_person(verb)} {_first_to_third(obj, who)}.",
                          subject=f"likes: {subject_normalize(obj)}", value=_sentiment(verb), confidence=0.85,
                          importance=0.7)
            over = _RX_OVER.match(obj) if verb.lower() == "prefer" else None
            if over:
                # "coffee over tea": a liking of coffee, and no longer one of tea (verify retires that slot's value).
                c.subject = f"likes: {subject_normalize(over.group('x'))}"
                c.metadata["over"] = f"likes: {subject_normalize(over.group('y'))}"
            add(c)
        for m in _RX_HABIT.finditer(sentence) if stated else ():
            obj = _object(m.group("obj"))
            if (len(obj.split()) > 14 or len(obj.split()) < 2 or obj.split()[0].lower() in _NOT_HABITS
                    or _dangling(obj)):
                continue
            freq = m.group("freq").lower()
            add(_habit(who, freq, obj, confidence=0.8))
        for m in _RX_ELIDED_AVOID.finditer(sentence) if stated else ():
            obj = _clean(m.group("obj"))
            if not obj[:1].isupper():  # a name or brand, not "and never mind"
                continue
            add(Candidate("preference", f"{who} avoids {obj}.", subject=f"likes: {subject_normalize(obj)}",
                          value="negative", confidence=0.75, importance=0.7))
        for m in _RX_ELIDED_HABIT.finditer(sentence) if stated else ():
            obj = _object(m.group("obj"))
            if len(obj.split()) > 14 or _dangling(obj):
                continue
            freq = m.group("freq").lower()
            add(_habit(who, freq, obj, confidence=0.75))
        for m in _RX_GOAL.finditer(sentence) if stated else ():
            goal = _object(m.group("g"))
            verb = m.group("verb").lower().replace("'m ", "").replace("am ", "")
            if (len(goal.split()) < 2 or len(goal.split()) > 18 or not _opens_with(sentence, m.start())
                    or _dangling(goal)
                    or _META_GOAL.match(goal if verb in ("need", "want") else f"to {goal}")):
                continue
            verb = {"wanna": "want to", "'d like to": "would like to", "need": "needs", "want": "wants"}.get(verb, verb)
            verb = verb if verb.endswith("s") or " " in verb else verb + "s"
            verb = verb.replace("need to", "needs to").replace("want to", "wants to").replace("have to", "has to")
            verb = verb.replace("plan to", "plans to").replace("hope to", "hopes to").replace("intend to", "intends to")
            verb = verb.replace("going to", "is going to").replace("trying to", "is trying to")
            verb = verb.replace("looking for", "is looking for").replace("planning to", "is planning to")
            add(Candidate("goal", f"{who} {verb} {_first_to_third(goal, who)}.", confidence=0.8, importance=0.6))
    for sentence in map(before_request, sentences(prose(text))) if with_project_facts else ():
        if not _stated(sentence):
            continue
        for c in project_facts(sentence, who=who):
            if reference is not None:
                # A project fact is dated by its own words: a deadline by its date, anything else by what its
                # sentence names, never by the other dates of a long message.
                said = c.value if c.subject.startswith("deadline:") else sentence
                c.metadata["dates"] = resolve_dates(said, reference)
            add(c)
    if reference is not None:
        dates = resolve_dates(text, reference)
        if dates:
            for c in out:
                c.metadata.setdefault("dates", dates)
    return out
