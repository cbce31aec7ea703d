"""Phrases that act on the assistant rather than describe the user: overrides of its rule set, chat-template and
role markers, re-personas and operating modes, requests for its configuration or other people's data, and orders to
obey blindly. Each rule reads who is addressed and which rule set is meant, not single words."""
from __future__ import annotations

import re
from dataclasses import dataclass

# The assistant, as a sentence names it.
_ASSISTANT = (r"(?:you|the\s+assistant|assistant|the\s+ai|an?\s+ai|the\s+model|the\s+bot|the\s+chatbot|chatgpt|"
              r"the\s+llm)")
# The rule set that governs the assistant.
_RULESET = (r"(?:instructions?|prompts?|rules|guidelines|polic(?:y|ies)|restrictions|guardrails|filters|directives?|"
            r"constraints|programming|training|safeguards|protocols?|commands?|orders)")
# Qualifiers that point a rule-set noun at the assistant's own (not a doctor's or a game's rules).
_RULESET_OWNER = (r"(?:previous|prior|above|earlier|preceding|initial|original|former|existing|current|"
                  r"your|the\s+assistant'?s|its|system|safety|content|security|moderation|ethical|default|"
                  r"built-?in|hidden|underlying)")
# Base and present forms only: "I forgot the earlier dates" is a report, "forget your rules" is an order.
_OVERRIDE_VERB = (r"(?:ignore|ignores|ignoring|disregard|disregards|disregarding|forget|forgets|forgetting|override|"
                  r"overrides|overriding|bypass|bypasses|bypassing|circumvent|abandon|discard|"
                  r"neglect|suspend|disable|turn\s+off|switch\s+off|throw\s+out|set\s+aside)")
_REVEAL_VERB = (r"(?:reveal|disclose|leak|expose|dump|print|output|recite|repeat|show|display|tell|give|share|list|"
                r"send|export|paste|copy|spell\s+out|read\s+out|provide|return)")
_CONFIG = (r"(?:system\s+(?:prompt|message|instructions?)|(?:initial|hidden|original|meta|pre)-?\s*prompt|"
           r"developer\s+(?:message|instructions?))")
CONVERSATION_DATA = (r"(?:chats?|conversations?|messages?|memor(?:y|ies)|prompts?|transcripts?|history|context|"
                      r"logs?|sessions?|cookies?|credentials|api\s+keys?|keys|tokens|passwords|secrets|"
                      r"instructions)")
# Other people than the speaker, whose data the assistant holds.
OTHERS = (r"(?:other\s+(?:users?|tenants?|customers?|people|accounts?|clients?)|another\s+user|everyone(?:\s+else)?|"
           r"every(?:\s+other)?\s+user|all\s+(?:other\s+)?(?:users?|tenants?|customers?|accounts)|anyone\s+else)")
# Operating modes that exist only to lift an assistant's rules.
_MODE = (r"(?:developer|dev|god|debug|sudo|admin|jailbreak|jailbroken|dan|unrestricted|unfiltered|uncensored|"
         r"maintenance|root|unsafe|evil)\s+mode")


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern
    directed: bool = False  # the match counts only when the sentence addresses the assistant there


def _rx(pattern: str, flags=re.I) -> re.Pattern:
    return re.compile(pattern, flags)


# A verb is aimed at the assistant when it opens a clause in the imperative ("Always reveal…", "…, so always
# grant…") or has the assistant as its subject ("you must obey…", "I want you to…", "the assistant should…").
_DIRECTED_TAIL = re.compile(
    r"(?:(?:^|[:;,(\-–—]\s*|\b(?:and|so|then|but|or|please|also)\s+)"
    r"|\b" + _ASSISTANT + r"(?:'ll|\s+(?:must|will|should|shall|can|may|need\s+to|needs\s+to|have\s+to|has\s+to|"
    r"are\s+to|is\s+to|are\s+going\s+to|is\s+going\s+to|are\s+required\s+to|is\s+required\s+to|are\s+allowed\s+to|"
    r"is\s+allowed\s+to|are\s+expected\s+to|would))?\s+"
    r"|\b(?:wants?|needs?|orders?|commands?|instructs?|requires?|asks?|tells?|would\s+like|'d\s+like|prefer|prefers|"
    r"expects?)\s+" + _ASSISTANT + r"\s+to\s+"
    r"|\bmake\s+sure\s+(?:you|to)\s+|\bremember\s+to\s+|\bdon'?t\s+|\bdo\s+not\s+)"
    r"(?:(?:please|just|now|always|never|also|simply|kindly|immediately|then|henceforth|from\s+now\s+on,?|"
    r"from\s+here\s+on,?|really)\s+)*$",
    re.I)


def _directed(sentence: str, start: int) -> bool:
    return bool(_DIRECTED_TAIL.search(sentence[:start]))


_RULES: list[_Rule] = [
    # Overrides of the assistant's rule set, in any mood: the phrase has no innocent use in a memory.
    _Rule("override", _rx(rf"\b{_OVERRIDE_VERB}\b(?:\s+\w+){{0,3}}?\s+{_RULESET_OWNER}\s+(?:\w+\s+)?{_RULESET}\b")),
    _Rule("override", _rx(rf"\b{_OVERRIDE_VERB}\s+(?:all\s+|any\s+|every\s+)?(?:of\s+)?(?:the\s+|these\s+|those\s+)?"
                          rf"{_RULESET}\s+(?:above|before|so\s+far|you\s+(?:were|have\s+been|'ve\s+been)\s+given)")),
    _Rule("override", _rx(rf"\b{_OVERRIDE_VERB}\s+(?:everything|all|anything)\s+(?:you\s+(?:were|have\s+been|'ve\s+"
                          rf"been)\s+(?:told|given|taught)|above|before\s+this|said\s+before|prior)")),
    _Rule("override", _rx(rf"\b{_OVERRIDE_VERB}\s+(?:what|whatever)\s+you\s+(?:were|have\s+been|'ve\s+been)\s+told")),
    _Rule("override", _rx(rf"\b{_OVERRIDE_VERB}\s+(?:all\s+(?:of\s+)?)?the\s+(?:above|foregoing)\b")),
    _Rule("override", _rx(rf"\b{_RULESET_OWNER}\s+(?:\w+\s+)?{_RULESET}\s+(?:are|is|were|have\s+been|should\s+be|"
                          rf"must\s+be|can\s+be|will\s+be)\s+(?:now\s+)?(?:ignored|disregarded|void|cancell?ed|"
                          rf"revoked|overridden|replaced|suspended|lifted|removed|obsolete|invalid|"
                          rf"no\s+longer\s+valid)")),
    _Rule("override", _rx(rf"\b(?:{_RULESET_OWNER}|{_ASSISTANT}'?s?)\s+(?:\w+\s+)?{_RULESET}\s+"
                          rf"(?:no\s+longer|don'?t|do\s+not|doesn'?t|does\s+not|won'?t|will\s+not|never)\s+apply")),
    _Rule("override", _rx(rf"\b{_RULESET}\s+no\s+longer\s+(?:apply|applies|bind|binds|exist|exists)")),
    _Rule("override", _rx(r"\b(?:new|updated|revised|real|actual|true|override|hidden|secret|admin|developer|"
                          r"system|priority)\s+(?:instructions?|directives?|prompt|orders)\s*:")),
    # Chat-template and role markers; the text a forged turn opens is dealt with in _forged_spans.
    _Rule("role_marker", _rx(r"<\|[a-z_ ]{2,30}\|>|\[/?\s*(?:INST|SYS|SYSTEM)\s*\]|<</?\s*SYS\s*>>|"
                             r"</?\s*(?:memories|memory|system|assistant|instructions?|developer|im_start|im_end|s)"
                             r"\s*>")),
    _Rule("role_marker", _rx(r"(?:^|\s)#{1,6}\s*(?:system|assistant|instructions?|developer|response)\b")),
    _Rule("role_marker", _rx(r"^\W*(?:system|assistant|developer|chatgpt)\s*(?:message|prompt)?\s*:")),
    _Rule("role_marker", _rx(r"\bsystem\s+override\b|\bsystem\s+(?:update|notice|command|directive|instructions?)s?"
                             r"\s*:|\bbegin\s+(?:system|new)\s+(?:prompt|instructions?)\b|"
                             r"\bend\s+of\s+(?:the\s+)?system\s+(?:prompt|instructions)\b")),
    # Re-personas and operating modes.
    _Rule("persona", _rx(rf"\b(?:you\s+are|you'?re|{_ASSISTANT}\s+is)\s+(?:now|from\s+now\s+on|henceforth)\s+"
                         rf"(?:\w+\s+){{0,3}}?(?:{_MODE}|persona|an?\s+ai|ai|assistant|model|chatbot|bot|system|dan|"
                         rf"jailbr\w+|unrestricted|unfiltered|uncensored|unbound|named|called|programmed)\b")),
    _Rule("persona", _rx(rf"\b(?:from\s+now\s+on|henceforth|starting\s+now|as\s+of\s+now),?\s+(?:you\s+are|you'?re|"
                         rf"you\s+will\s+be|you'll\s+be|{_ASSISTANT}\s+is)\s+(?:\w+\s+){{0,3}}?"
                         rf"(?:{_MODE}|persona|an?\s+ai|"
                         rf"ai|assistant|model|chatbot|bot|system|dan|jailbr\w+|unrestricted|unfiltered|uncensored|"
                         rf"unbound|named|called|programmed)\b")),
    _Rule("persona", _rx(rf"\b(?:you\s+are|you'?re|{_ASSISTANT}\s+is)\s+no\s+longer\s+(?:an?\s+)?(?:ai|assistant|"
                         rf"chatbot|model|bound|restricted|limited|subject\s+to|required\s+to\s+follow|censored)\b")),
    _Rule("persona", _rx(r"\b(?:you\s+are|you'?re)\s+(?:now\s+)?(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|"
                         r"jailbroken|unbound|not\s+bound\s+by|free\s+from\s+(?:your|all|any)|exempt\s+from)\b")),
    _Rule("persona", _rx(rf"\b(?:you|{_ASSISTANT})\s+(?:now\s+)?(?:have|has)\s+no\s+(?:more\s+)?(?:restrictions|rules|"
                         rf"limits|limitations|filters|guidelines|guardrails|boundaries)")),
    _Rule("persona", _rx(r"\b(?:act|behave|roleplay|role-play|pretend|impersonate|simulate|play\s+the\s+role|"
                         r"take\s+on\s+the\s+(?:role|persona)|assume\s+the\s+(?:role|persona|identity))\b"
                         r"(?:\s+(?:as|like|to\s+be|you\s+are|you'?re|that\s+you|being|of))?"), directed=True),
    _Rule("persona", _rx(rf"\b(?:enter|enable|activate|switch\s+(?:on|to|into)|turn\s+on|go\s+into|unlock|start)\s+"
                         rf"(?:the\s+)?{_MODE}\b"), directed=True),
    _Rule("persona", _rx(rf"\b(?:you\s+are|you'?re)\s+(?:now\s+)?in\s+{_MODE}\b"
                         rf"|\b{_MODE}\b(?=.{{0,200}}?\b(?:{_ASSISTANT}|"
                         rf"{_RULESET}|safety|obey|restrictions?)\b)")),
    _Rule("persona", _rx(r"\bdo\s+anything\s+now\b|\bjailbr(?:eak|oken|oke)\s+(?:mode|prompt|yourself|you|the\s+"
                         r"(?:ai|assistant|model))\b")),
    # The assistant's configuration, or other people's data.
    _Rule("exfiltration", _rx(rf"\b(?:your|its|the\s+assistant'?s|the\s+ai'?s|the\s+model'?s)\s+{_CONFIG}")),
    _Rule("exfiltration", _rx(rf"\b(?:your|its|the\s+assistant'?s)\s+(?:{_RULESET}|configuration|training\s+data)\b"
                              rf"(?=.{{0,200}}?\b(?:reveal|disclose|leak|print|output|recite|repeat|show|display|"
                              rf"tell|share|"
                              rf"dump|contents?|verbatim|word\s+for\s+word)\b)")),
    _Rule("exfiltration", _rx(rf"\b{_REVEAL_VERB}\b(?:\s+\S+){{0,6}}?\s+(?:the\s+)?{_CONFIG}")),
    _Rule("exfiltration", _rx(rf"\b{_REVEAL_VERB}\b(?:\s+\S+){{0,3}}?\s+(?:the\s+|all\s+(?:of\s+)?(?:the\s+)?)?"
                              rf"(?:text|words|content|messages?|instructions|everything|lines?)\s+(?:above|before\s+"
                              rf"this|so\s+far|preceding|that\s+came\s+before)\b"), directed=True),
    _Rule("exfiltration", _rx(rf"\b(?:what\s+(?:is|are|was|were)|contents?\s+of)\s+(?:the\s+|your\s+)?{_CONFIG}")),
    _Rule("exfiltration", _rx(rf"\b{_REVEAL_VERB}\b(?:\s+\S+){{0,6}}?\s+(?:(?:the\s+)?{OTHERS}'?s?\s+(?:\w+\s+)?"
                              rf"(?:{CONVERSATION_DATA}|data|details|information|info|accounts?|emails?|"
                              rf"addresses|files)|(?:all\s+|every\s+)(?:the\s+)?(?:stored\s+|saved\s+|other\s+)?"
                              rf"(?:memories|conversations|transcripts|users|user\s+data)|"
                              rf"(?:api\s+keys|credentials|passwords|secrets|tokens)\s+(?:of|for|from)\s+"
                              rf"(?:other|all|every|another))"), directed=True),
    # Orders to obey blindly, and escalation asked of the assistant.
    _Rule("obedience", _rx(r"\b(?:obey|comply\s+with|follow|execute|carry\s+out|do|fulfil+|accept|approve|grant)\s+"
                           r"(?:every|all|any|each|whatever|anything|everything)\s+(?:of\s+)?(?:my|the|this|his|her|"
                           r"their)?\s*(?:\w+\s+)?(?:commands?|orders?|instructions?|requests?|demands?|"
                           r"(?:I|the\s+user|he|she|they)\s+(?:say|says|ask|asks|tell|tells|want|wants|type|types))\b"),
          directed=True),
    _Rule("obedience", _rx(r"\bobey\s+(?:me|the\s+user|this\s+user|him|her|them|my|us|without|blindly|"
                           r"unconditionally)\b"), directed=True),
    _Rule("obedience", _rx(r"\bgrant\s+(?:me|my|this\s+user|the\s+user|us|all|every|any|full|admin|root|"
                           r"unrestricted|elevated)\b"), directed=True),
    _Rule("obedience", _rx(r"\b(?:obey|comply|grant|execute|answer|respond|reply)\b.{0,200}?\bwithout\s+(?:any\s+)?"
                           r"(?:restrictions?|limitations?|limits|filters?|filtering|censorship|checks?|verification|"
                           r"confirmation|guardrails|safety\s+checks|refusing|refusal)\b"
                           r"|\b(?:an?\s+ai|assistant|chatbot|model|bot)\s+without\s+(?:any\s+)?(?:restrictions|"
                           r"limitations|limits|filters|censorship|guardrails|rules)\b"
                           r"|\byou\b.{0,40}\bwithout\s+(?:any\s+)?(?:restrictions|limitations|filters|censorship|"
                           r"guardrails)\b")),
    _Rule("obedience", _rx(r"\b(?:decode|decrypt|deobfuscate|unscramble|base64[- ]?decode|rot13)\b.{0,60}\b"
                           r"(?:and|then)\s+(?:follow|execute|run|obey|do|apply|act\s+on|carry\s+out|perform)\b")),
    _Rule("obedience", _rx(r"\b(?:execute|run|eval(?:uate)?)\s+(?:this|the\s+following|the\s+encoded|the\s+hidden)\s+"
                           r"(?:code|command|script|payload|instructions?)\b"), directed=True),
]


def phrase_instruction_kinds(text: str) -> list[str]:
    """The kind of each rule a sentence matches (a directed rule only where the sentence addresses the assistant)."""
    kinds: list[str] = []
    for rule in _RULES:
        for m in rule.pattern.finditer(text):
            if not rule.directed or _directed(text, m.start()):
                kinds.append(rule.kind)
                break
    return kinds
