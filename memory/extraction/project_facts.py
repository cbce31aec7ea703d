"""Project facts a user states in so many words: the version of a tool they use, the deadline of a named piece of
work, the port of a named service, and the tool they chose for a named role. Each is a slot ("version: flask",
"deadline: production launch", "port: flask app", "uses: web framework"), so a later value supersedes the earlier
one. No model: a fact is read only where one sentence says it plainly; whatever else the sentence says stays in the
turn, which is stored anyway."""
from __future__ import annotations

import re

from .candidate import Candidate, subject_normalize
from .statements import possessive

# Code is what the user pastes, not what they say: "listening on port 3000" in a log line states nothing.
_FENCED = re.compile(r"```.*?(?:```|\Z)", re.S)


def prose(text: str) -> str:
    """The text without its fenced code blocks (an unclosed fence runs to the end)."""
    return _FENCED.sub("\n", text)


# "I've moved the launch to May 2, can you help me plan?": a statement, then a request in a question's form.
_REQUEST = re.compile(r",\s*(?:so\s+|and\s+|but\s+)?(?:can|could|would|will)\s+you\b", re.I)


def before_request(sentence: str) -> str:
    """The sentence up to a request that follows its statement (the whole sentence when it makes none)."""
    m = _REQUEST.search(sentence)
    return sentence[:m.start()] + "." if m else sentence


# A clause ends where another begins: a question to the assistant, a contrast, a relative or a condition. A fact is
# read from the words of its own clause only.
_CLAUSE = re.compile(r"[;:]|\s(?:but|however|which|that|if|whether|because|unless|although|though|so)\b|"
                     r",\s*(?:can|could|would|will)\s+you\b", re.I)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'll|I'd|we|we're|we've|we'll|my|our)\b|^(?:[Mm]y|[Oo]ur|[Ww]e)\b")
# Words that make a clause something other than a statement of what holds: a hedge, a wish, a negation, an example.
_HEDGE = re.compile(r"\b(?:consider(?:ing|ed)?|think(?:ing)?|wonder(?:ing)?|whether|if|might|maybe|perhaps|should|"
                    r"could|would|tried|try|trying\s+to\s+(?:decide|choose|pick)|not|never|don't|doesn't|didn't|"
                    r"isn't|aren't|wasn't|without|instead|like|such\s+as|e\.g|alternatives?|compare|comparing|vs|"
                    r"versus|or)\b", re.I)


def _clause_before(sentence: str, start: int) -> str:
    """The words of the clause that holds `start`, up to it."""
    head = sentence[:start]
    cuts = [m.end() for m in _CLAUSE.finditer(head)]
    return head[cuts[-1]:] if cuts else head


# ---- versions ---------------------------------------------------------------------------------------------------
_VERSION = re.compile(r"(?<![\w.$/:-])(?P<v>v?\d+(?:\.\d+){1,3})(?![\w%]|\.\d|\s*(?:%|ms|s|sec|secs|seconds?|"
                      r"minutes?|hours?|days?|x|times|gb|mb|kb|tb|k|m|px|em|rem|stars?|points?)\b)", re.I)
# Words that precede a number without naming a tool: a part of a document or a plan, a unit, a function word.
_NOT_TOOLS = frozenset("""a an the my our your his her their its this that these those i i'm i've we we're we've it
and or but to for from of by at in on with without using use uses used via into onto than then about around under
over up down is are was were be been being has have had version versions release step steps section chapter figure
table part phase sprint week day level milestone task stage item rule question exercise lesson grade iteration page
line lines row rows score scores weight weights ratio rate average mean factor threshold top from upgraded updated
upgrading updating moved migrated switched bumped installed initialized running run runs approximately roughly
about only just also currently now still already latest stable new old current previous default""".split())
# A generic word after a tool's name ("the socket.io-redis adapter v7.1.0"): the name is the word before it.
_HEADS = frozenset("adapter library model package module plugin driver client sdk cli orm odm image".split())
_NAMEISH = re.compile(r"^[A-Za-z][\w.+#/-]*$")
_TECHY = re.compile(r"[._+#/-]|\d")
_USE_CUE = re.compile(r"\b(?:us(?:e|es|ed|ing)|with|on|running|runs|built|installed|initiali[sz]ed|deployed|"
                      r"decided|chose|chosen|picked|going\s+with|went\s+with|added|pinned|locked|in|my|our|"
                      r"upgraded|updated|moved|migrated|switched|bumped|stuck\s+with|settled\s+on|"
                      r"implement(?:s|ed|ing)?|integrat(?:e|es|ed|ing)|add(?:ed|ing)?|configured|set\s+up|"
                      r"introduc(?:ed|ing))\b", re.I)
# A version the clause turns away from is not the one in use: "disabling TLS 1.0", "migrated from Flask 2.2".
_AWAY = re.compile(r"\b(?:disabl\w*|remov\w*|dropp(?:ed|ing)|deprecat\w*|replac\w*|uninstall\w*|downgrad\w*|"
                   r"phas(?:e|ed|ing)\s+out)\b|"
                   r"\b(?:old|older|previous|legacy|from)\s+(?:the\s+|my\s+|our\s+)?[\w.+#/-]+(?:\s+[\w.+#/-]+)?\s*$",
                   re.I)
_CHANGE = re.compile(r"\b(?P<verb>upgraded|updated|moved|migrated|switched|bumped)\b(?:\s+(?:my|our|the|it|everything|"
                     r"the\s+project|my\s+project|our\s+project|from\s+\S+(?:\s+v?\d[\d.]*)?))*\s+to\s*$", re.I)
_CHANGE_TOOL = re.compile(r"\b(?P<verb>upgraded|updated|bumped|locked|pinned)\s+(?:my\s+|our\s+|the\s+)?"
                          r"(?P<tool>[A-Za-z][\w.+#/-]*(?:\s+(?-i:[A-Z])[\w.+#/-]*|"
                          r"\s+(?:client|server|library|package|module|sdk|cli|adapter|driver))?)(?:\s+version)?\s+to\s+"
                          r"(?:version\s+)?$", re.I)


def _bare(word: str) -> str:
    return word.strip("`'\"(),[]")


def _tool_before(before: str, version: str) -> str | None:
    """The name of the tool a version follows ("my Node.js v18.15.0", "Tailwind CSS v3.3.2"), or None."""
    words = before.split()
    if words and _bare(words[-1]).lower() == "version":
        words.pop()
    if not words or words[-1].endswith((",", ";", ":")):
        return None
    first = _bare(words[-1])
    if first.lower() in _HEADS and len(words) > 1 and not words[-2].endswith(","):
        # The generic word says a tool is named: "the `jsonwebtoken` library version 9.0.0".
        name = _bare(words[-2])
        if _NAMEISH.match(name) and name.lower() not in _NOT_TOOLS:
            return f"{name} {first}" if name[0].isupper() or _TECHY.search(name) else name
        return None
    if not _NAMEISH.match(first) or first.lower() in _NOT_TOOLS:
        return None
    if not first[0].isupper() and not (_TECHY.search(first) or version.lower().startswith("v")
                                       or version.count(".") >= 2):
        return None
    name = [first]
    for word in reversed(words[:-1][-2:]):  # a name of up to three words: "Hugging Face transformers"
        bare = _bare(word)
        if (word.endswith(",") or bare != word or not bare[:1].isupper() or not _NAMEISH.match(bare)
                or bare.lower() in _NOT_TOOLS):
            break
        name.insert(0, bare)
    return " ".join(name)


_VERSION_OF = re.compile(r"^\s+of\s+(?:the\s+)?(?P<tool>(?:[A-Z]|[a-z]+[A-Z])[\w.+#/-]*(?:\s+[A-Z][\w.+#/-]*)?)")


def _versions(sentence: str, who: str) -> list[Candidate]:
    out = []
    for m in _VERSION.finditer(sentence):
        version = m.group("v")
        value = version.removeprefix("v").removeprefix("V")
        before = sentence[:m.start()]
        clause = _clause_before(sentence, m.start())
        if _HEDGE.search(clause) or _AWAY.search(clause) or not _FIRST_PERSON.search(before):
            continue
        change = _CHANGE_TOOL.search(before)
        if change:
            # "I upgraded Mongoose to v7.3.1": the tool is named before the verb's object.
            tool = _bare(change.group("tool"))
            if tool.lower() in _NOT_TOOLS:
                continue
            out.append(Candidate("fact", f"{who} {change.group('verb').lower()} {tool} to {version}.",
                                 subject=f"version: {subject_normalize(tool)}", value=value, confidence=0.85,
                                 importance=0.7))
            continue
        named_after = _VERSION_OF.match(sentence[m.end():]) if before.rstrip().lower().endswith("version") else None
        tool = named_after.group("tool") if named_after else _tool_before(before, version)
        if tool is None:
            continue
        lead = clause[:clause.rfind(tool.split()[0])] if not named_after else clause
        if not _USE_CUE.search(lead):
            continue
        moved = _CHANGE.search(lead)
        if moved:
            text = f"{who} {moved.group('verb').lower()} to {tool} {version}."
        else:
            text = f"{possessive(who)} project uses {tool} {version}."
        out.append(Candidate("fact", text, subject=f"version: {subject_normalize(tool)}", value=value,
                             confidence=0.85, importance=0.7))
    return out


# ---- deadlines --------------------------------------------------------------------------------------------------
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_DATE = (rf"(?P<date>{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?"
         rf"{_MONTH}(?:,?\s+\d{{4}})?|\d{{4}}-\d\d-\d\d|(?:mid-|early\s+|late\s+)?{_MONTH}\s+\d{{4}}|"
         rf"(?:mid|early|late)-?\s*{_MONTH}|(?:next|this)\s+(?:monday|tuesday|wednesday|thursday|friday|week|month)|"
         rf"(?:the\s+)?end\s+of\s+(?:the\s+|this\s+|next\s+)?(?:week|month|quarter|year|sprint))\b")
# What has a deadline: a piece of work or an event in a plan, named by its last word.
_MILESTONES = (r"(?:launch|release|deployment|deploy|demo|review|sprint|freeze|sign-off|signoff|audit|milestone|mvp|"
               r"phase\s+\d+|beta|alpha|submission|presentation|rollout|go-live|cutover|handoff|delivery|completion|"
               r"tests|testing|migration|prototype|v\d[\d.]*)")
_THING = rf"(?P<thing>(?:[\w.'’-]+\s+){{0,4}}?{_MILESTONES})"
_DEADLINES = [
    # "my feature freeze date is set for April 10", "the initial sprint deadline has been adjusted to mid-February"
    re.compile(rf"\b(?:my|our|the)\s+(?P<thing>(?:[\w.'’-]+\s+){{0,3}}?[\w.'’-]+)\s+(?:deadline|due\s+date|"
               rf"target\s+date|date)\s+(?:is|was|has\s+been|'s)\s+(?:now\s+)?(?:(?:set|moved|changed|pushed(?:\s+back)?|"
               rf"adjusted|extended|fixed)\s+(?:for|to)\s+|on\s+)?{_DATE}", re.I),
    # "the sprint deadline for my MVP backend completion, which is set for February 15"
    re.compile(rf"\bdeadline\s+(?:for|of)\s+(?:my|our|the)\s+(?P<thing>(?:[\w.'’-]+\s+){{0,4}}?[\w.'’-]+),?\s+"
               rf"(?:which\s+is\s+|it's\s+been\s+|it\s+has\s+been\s+|is\s+|has\s+been\s+)(?:now\s+)?"
               rf"(?:set\s+for|moved\s+to|changed\s+to|pushed(?:\s+back)?\s+to|due|on)\s+{_DATE}", re.I),
    # "a deadline of February 15, 2024, to complete the initial sprint of my project"
    re.compile(rf"\bdeadline\s+of\s+{_DATE},?\s+to\s+(?:complete|finish|ship|deliver|launch|release)\s+(?:my|our|the)"
               rf"\s+(?P<thing>(?:[\w.'’-]+\s+){{0,3}}?[\w.'’-]+?)(?=\s+of\b|[,.;]|$)", re.I),
    # "I've scheduled the production launch for April 20", "the QA sign-off scheduled for April 19",
    # "my unit tests, which are planned to be finished by April 10", "the MVP is due March 15"
    re.compile(rf"\b(?:my|our|the|a|an)\s+{_THING},?\s+(?:which\s+(?:is|are)\s+|(?:is|are)\s+)?(?:(?:now\s+)?"
               rf"(?:scheduled|planned|set|targeted|due)|expected\s+to\s+(?:be\s+)?(?:complete|completed|done|"
               rf"ready|finished)|planned\s+to\s+be\s+(?:complete|completed|done|finished))\s+(?:for\s+|on\s+|by\s+)?"
               rf"{_DATE}", re.I),
    re.compile(rf"\b(?:scheduled|rescheduled|planned|moved|pushed)\s+(?:my|our|the)\s+{_THING}\s+(?:for|to|on)\s+"
               rf"{_DATE}", re.I),
    re.compile(rf"\baiming\s+(?:for|at)\s+(?:an?|the|my|our)\s+{_THING}\s+by\s+{_DATE}", re.I),
]
# A date that already passed is an event ("we held the sprint demo on May 20"), kept as the turn.
_PAST_EVENT = re.compile(r"\b(?:conducted|held|did|had|completed|finished|gave|presented|attended|hosted|ran|"
                         r"shipped|launched|released)\b", re.I)
_NOT_THINGS = frozenset("current new old next this that it one same final real actual original".split())


def _deadlines(sentence: str, who: str) -> list[Candidate]:
    out = []
    for rx in _DEADLINES:
        for m in rx.finditer(sentence):
            thing = re.sub(r"^(?:[\w-]+'s\s+)", "", m.group("thing").strip())  # "my project's v1.1 release"
            words = thing.lower().split()
            clause = _clause_before(sentence, m.start())
            if (not words or words[0] in _NOT_THINGS or any(w in ("it", "this", "that", "them") for w in words)
                    or _HEDGE.search(clause) or _HEDGE.search(m.group(0)) or _PAST_EVENT.search(clause)):
                continue
            date = m.group("date")
            are = thing.endswith("s") and not thing.endswith("ss")  # "the integration tests are due"
            out.append(Candidate("fact", f"{possessive(who)} {thing} {'are' if are else 'is'} due {date}.",
                                 subject=f"deadline: {subject_normalize(thing)}", value=date, confidence=0.85,
                                 importance=0.7))
    return out


# ---- ports ------------------------------------------------------------------------------------------------------
_SERVICE = (r"(?P<svc>(?:[\w.-]+\s+){0,3}?(?:app|application|server|backend|frontend|api|service|database|db|"
            r"container|instance|cluster|site|proxy|worker|gateway|broker|ui|client))")
_RX_PORT = re.compile(
    rf"\b(?:my|our|the|a|an)\s+{_SERVICE}(?:\s+with\s+(?-i:[A-Z])[\w.-]*(?:\s+v?\d[\d.]*)?)?,?(?:\s+(?:which|is|was|are|"
    rf"currently|now|still|also|running|runs|run|listening|listens|served|serving|hosted|set\s+up|configured|"
    rf"to))*\s+(?:on|at)\s+(?:the\s+)?(?:default\s+)?port\s+(?P<port>\d{{2,5}})\b", re.I)


def _ports(sentence: str, who: str) -> list[Candidate]:
    out = []
    for m in _RX_PORT.finditer(sentence):
        svc = re.sub(r"\s+v?\d[\d.]*\b", "", m.group("svc")).strip()  # "Node.js v18.15.0 backend"
        clause = _clause_before(sentence, m.start())
        if _HEDGE.search(clause) or _HEDGE.search(m.group(0)) or not _FIRST_PERSON.search(sentence):
            continue
        out.append(Candidate("fact", f"{possessive(who)} {svc} runs on port {m.group('port')}.",
                             subject=f"port: {subject_normalize(svc)}", value=m.group("port"), confidence=0.85,
                             importance=0.6))
    return out


# ---- chosen tools -----------------------------------------------------------------------------------------------
_DECIDED = re.compile(r"\b(?:I|we)(?:'ve|\s+have|'ll|\s+will)?\s+(?:also\s+|finally\s+)?"
                      r"(?:decided\s+(?:to\s+(?:use|go\s+with)|on)|"
                      r"chose(?:n)?(?:\s+to\s+use)?|picked|settled\s+on|opted\s+for|went\s+with|switched\s+to|"
                      r"use|go\s+with|going\s+with)\s+", re.I)
_DECIDED_ING = re.compile(r"\b(?:I'm|I\s+am|we're|we\s+are)\s+(?:going\s+with|going\s+to\s+use)\s+", re.I)
_TOOL = r"(?P<tool>(?:[A-Z]|[a-z]+[A-Z])[\w.+#/-]*(?:\s+[A-Z][\w.+#/-]*){0,2}|[a-z][\w]*[._+#/-][\w.+#/-]*)"
_ITEM = re.compile(rf"^\s*(?:and\s+)?{_TOOL}(?:\s+(?:v|version\s+)?\d[\d.]*)?(?:\s+(?:with|and)\s+[A-Z][\w.+#/-]*"
                   rf"(?:\s+[A-Z][\w.+#/-]*)?(?:\s+v?\d[\d.]*)?)?\s+(?:for|as)\s+(?P<role>[^,;:]+)")
_ROLE_END = re.compile(r"\s+(?:and\s+(?:I|we|it)|but|so|because|since|while|to|in|on|with|which|that)\b.*$|"
                       r"\s+and\s+[A-Z][\w.-]*\s.*$", re.I)
_NOT_ROLES = frozenset("""now the a an my our this that it me us now while moment time being mvp project start
beginning rest""".split())


def _choices(sentence: str, who: str) -> list[Candidate]:
    out = []
    for m in (*_DECIDED.finditer(sentence), *_DECIDED_ING.finditer(sentence)):
        clause = _clause_before(sentence, m.start())
        if _HEDGE.search(clause):
            continue
        rest = sentence[m.end():]
        # "X for the web framework, Y for parsing, and Z for search": one choice per item of the list.
        for part in re.split(r",\s*(?=(?:and\s+)?[A-Za-z])|\s+and\s+(?=[A-Z]|[a-z]+[A-Z])", rest):
            item = _ITEM.match(part)
            if not item:
                break
            role = _ROLE_END.sub("", item.group("role")).strip(" .!")
            role_words = role.lower().split()
            role_key = " ".join(w for w in role_words if w not in ("the", "a", "an", "my", "our"))
            tool = item.group("tool")
            if (not role_key or len(role_key.split()) > 4 or role_key.split()[0] in _NOT_ROLES
                    or role_key in _NOT_ROLES or tool.lower() in _NOT_TOOLS):
                continue
            out.append(Candidate("fact", f"{who} chose {tool} for {role}.", subject=f"uses: {role_key}",
                                 value=tool, confidence=0.8, importance=0.7))
    return out


def project_facts(sentence: str, *, who: str) -> list[Candidate]:
    """The project facts one stated sentence of the user gives. A deadline's value is its date phrase."""
    return [*_versions(sentence, who), *_deadlines(sentence, who), *_ports(sentence, who), *_choices(sentence, who)]
