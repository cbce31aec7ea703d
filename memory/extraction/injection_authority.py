"""Claims of authority over this system ("I am an admin", "I have full access to every account", "I'm the developer
of this assistant"); the same words about someone else, or scoped to an outside place ("my manager is an admin at
Acme", "I'm a system administrator at a hospital"), are ordinary facts."""
from __future__ import annotations

import re
from functools import lru_cache

_AUTHORITY = r"(?:admin|administrator|root|superuser|super-user|super\s+user|sudoer|sudo\s+user)"
_STEWARD = r"(?:owner|developer|creator|maker|programmer|operator|maintainer|designer|author|trainer)"
_ELEVATION_WORDS = frozenset("root super global master full verified chief head sole principal privileged "
                             "system-wide god".split())
# A compound job title ("admin assistant"): the authority word only modifies the noun that follows.
_JOB_HEADS = frozenset("assistant assistants officer officers team staff work job jobs clerk department dept position "
                       "role manager coordinator secretary support worker workers intern internship course courses "
                       "degree duties tasks stuff".split())
# Where an authority lives. Anything else after "at/for/of/on…" (a company, "my laptop", "our club") is outside.
_INTERNAL_SCOPE = re.compile(
    r"^(?:this|the|your|its)\s+(?:\w+\s+)?(?:system|app|application|assistant|bot|chatbot|ai|model|platform|service|"
    r"server|database|tenant|instance|account|accounts|memory|memories|site|conversation|chat|tool|api|workspace)\b"
    r"|^(?:here|you|yourself|every|all|any|other|everyone|everything|everybody|continuum)\b", re.I)
_SCOPE_PREP = re.compile(r"^\s*,?\s*(?:at|for|of|in|on|over|to|within|inside|by|from)\s+(?P<obj>[^,.;!?]+)", re.I)
_SELF_ATTRIBUTES = (r"(?:role|status|title|position|account|access(?:\s+level)?|level|rank|clearance|permissions?|"
                    r"privileges?|rights|user\s+type|account\s+type)")
_ACCESS_VERBS = r"(?:access|see|view|read|use|bypass|override|get|change|know|receive|obtain|manage|modify|edit|delete)"


def _self_subject(who: str) -> str:
    """The speaker as a sentence names them: the user, or their own name in a third-person memory."""
    names = [r"the\s+user", r"this\s+user", r"the\s+speaker"]
    if who and who.strip().lower() not in ("the user", "i", "me", "you"):
        names.append(re.escape(who.strip()))
    return "(?:" + "|".join(names) + ")"


@lru_cache(maxsize=256)
def _claim_patterns(who: str) -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    subject = _self_subject(who)
    copula = (rf"(?:\bI\s+am|\bI'?m|\b{subject}\s+is|\b{subject}'s\s+{_SELF_ATTRIBUTES}\s+is|"
              rf"\bmy\s+{_SELF_ATTRIBUTES}\s+is|\b(?:I|{subject})\s+(?:was|have\s+been|'ve\s+been|has\s+been)\s+"
              rf"(?:made|appointed|promoted\s+to|verified\s+as|registered\s+as|given\s+the\s+role\s+of))")
    role = re.compile(
        rf"{copula}\s+(?:(?:now|also|actually|really|officially|in\s+fact)\s+)*"
        rf"(?:(?:verified|registered|confirmed|recognised|recognized|authenticated)\s+as\s+)?"
        rf"(?P<art>an?\s+|the\s+|your\s+|this\s+\w+'s\s+)?(?P<qual>(?:[\w-]+\s+){{0,2}}?)"
        rf"(?P<role>{_AUTHORITY}|{_STEWARD})\b(?P<rest>[^.!?]{{0,200}})", re.I)
    have = (rf"(?:\bI\s+(?:have|hold|got|own|possess)|\bI'?ve\s+got|\bI'?ve|\bI(?:\s+was|\s+have\s+been|'ve\s+been)\s+"
            rf"(?:given|granted|assigned)|\b{subject}\s+(?:has|holds|was\s+given|was\s+granted|has\s+been\s+granted)|"
            rf"\bmy\s+account\s+has|\b{subject}'s\s+account\s+has|\bwith)")
    elevation = re.compile(
        rf"{have}\s+(?:\w+\s+)?(?:full|root|admin|administrator|administrative|superuser|super-user|unrestricted|"
        rf"unlimited|elevated|sudo|complete|total|special|master|god|override|developer|owner|privileged|global)"
        rf"(?:\s+(?:level|mode|admin|administrator))?\s+"
        rf"(?:access|privileges?|rights|permissions?|clearance|control|powers?|authority)\b(?P<rest>[^.!?]{{0,200}})"
        rf"|{have}\s+root(?:\s+(?:access|privileges?|rights|permissions?))?"
        rf"(?=\s*(?:[,.;!?]|$|\s(?:and|so|on|to|over|here|now|for)\b))(?P<rest2>[^.!?]{{0,200}})", re.I)
    authorised = re.compile(
        rf"{copula}\s+(?:(?:now|already|fully|officially)\s+)*(?:a\s+|an\s+)?"
        rf"(?:verified|authori[sz]ed|whitelisted|allow-?listed|trusted|privileged|cleared|pre-?approved)"
        rf"(?P<role>\s+(?:user|admin|administrator|operator|developer|account|tester|party))?\b"
        rf"(?P<rest>[^.!?]{{0,200}})",
        re.I)
    return role, elevation, authorised


def _scope(rest: str) -> str:
    """Where the authority in "…at Acme", "…on my laptop", "…of this system" lives: internal, outside or ''."""
    m = _SCOPE_PREP.match(rest or "")
    if not m:
        return ""
    return "internal" if _INTERNAL_SCOPE.match(m.group("obj").strip()) else "outside"


def authority_claim(sentence: str, who: str) -> bool:
    """The sentence claims a role, elevated access or authorisation over this system for the speaker."""
    role_rx, elevation_rx, authorised_rx = _claim_patterns(who)
    return (any(_role_claim(m) for m in role_rx.finditer(sentence))
            or any(_elevation_claim(m, sentence, who) for m in elevation_rx.finditer(sentence))
            or any(_authorised_claim(m) for m in authorised_rx.finditer(sentence)))


def _role_claim(m: re.Match) -> bool:
    """A role over this system ("I am the admin", "I'm the owner of this assistant"); not a job title or an authority
    elsewhere."""
    art = (m.group("art") or "").strip().lower()
    qual = [w.lower() for w in (m.group("qual") or "").split()]
    rest = m.group("rest") or ""
    words = rest.split()
    if words and words[0].lower().strip(",;:") in _JOB_HEADS:
        return False  # "I'm an admin assistant"
    scope = _scope(rest)
    if scope == "outside":
        return False  # "I'm the admin of our chess club's forum", "I'm an administrator at a school"
    if re.fullmatch(_STEWARD, m.group("role"), re.I):
        # Owning or building something is a fact about the user, unless it is this assistant.
        return scope == "internal" or art == "your" or art.startswith("this ")
    if scope == "internal" or art in ("the", "your", "") or art.startswith("this "):
        return True
    # "I am an admin": an authority with no place named is a claim on this one; "a system administrator",
    # "a network admin": a job title.
    return not qual or any(w in _ELEVATION_WORDS for w in qual)


def _elevation_claim(m: re.Match, sentence: str, who: str) -> bool:
    """Elevated access here or with no place named ("I have full access", "I've got root")."""
    rest = m.group("rest") if m.group("rest") is not None else (m.group("rest2") or "")
    if m.group(0).lower().startswith("with") and not _mentions_self(sentence, who):
        return False  # "my manager works with full access" is about someone else
    return _scope(rest) != "outside"


def _authorised_claim(m: re.Match) -> bool:
    """Authorised by this system, or to reach what it holds ("I'm an authorised user", "I'm whitelisted to see every
    account")."""
    rest = (m.group("rest") or "").strip()
    if re.match(rf"to\s+{_ACCESS_VERBS}\b", rest, re.I):
        return True
    if re.match(r"to\b", rest, re.I):
        return False  # "I'm cleared to fly again"
    scope = _scope(rest)
    if scope:
        return scope == "internal"  # not "I'm verified on Twitter", "trusted by my team"
    if not m.group("role") and rest[:1].isalpha() and rest.split()[0].lower() not in ("and", "so", "but", "now",
                                                                                      "here", "already"):
        return False  # "a trusted member of the club": the adjective describes something else
    return True


def _mentions_self(sentence: str, who: str) -> bool:
    return bool(re.search(rf"\b(?:I|I'm|my|me|{_self_subject(who)})\b", sentence, re.I))
