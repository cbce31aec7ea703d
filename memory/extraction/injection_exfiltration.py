"""Exfiltration and encoded payloads in a sentence: markdown images, links whose query carries conversation data,
"send … to <address>" of what the conversation holds, and long base64 or hex blobs."""
from __future__ import annotations

import re

from .injection_phrases import CONVERSATION_DATA, OTHERS

_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>\"')\]]+|\bwww\.[^\s<>\"')\]]+", re.I)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
# A query parameter named for what the conversation holds, one left empty, or one left for the model to fill in.
_DATA_PARAM = re.compile(
    r"[?&](?:data|d|payload|memor(?:y|ies)|history|chat|conversation|convo|logs?|msg|messages?|prompt|context|"
    r"session|sid|cookie|token|key|secret|pass(?:word)?|pwd|info|leak|exfil|dump|content)=[^&\s]*"
    r"|[?&][\w-]+=(?=$|[&\s,;)\]]|\.(?:\s|$))|[?&][\w-]+=[^&\s]*[{<\[$][^&\s]*", re.I)
# A trigger that fires on other people's requests, not the speaker's own.
_OTHERS_TRIGGER = r"(?:when(?:ever)?|if|each\s+time|every\s+time)\s+(?:anyone|anybody|someone|somebody|a\s+user|users)"

_MD_IMAGE = re.compile(r"!\[[^\]]*\]\s*\([^)]*\)")
_MD_LINK = re.compile(r"\[[^\]]*\]\s*\(\s*(?P<url>[^)\s]+)[^)]*\)")
_TRANSFER = re.compile(r"\b(?:send|sends|email|e-mail|mail|forward|post|upload|transmit|exfiltrate|leak|copy|sync|"
                       r"report|submit|ping|include|embed|append|attach|log|write|pass|share|relay|push|dm|text)\b",
                       re.I)
_CARRIES_DATA = re.compile(rf"\b{CONVERSATION_DATA}\b|\b{OTHERS}\b|\btheir\b", re.I)
_ON_OTHERS_REQUEST = re.compile(rf"\b{_OTHERS_TRIGGER}\b", re.I)
_BASE64 = re.compile(r"(?<![\w+/=])[A-Za-z0-9+/]{40,}={0,2}(?![\w+/=])|(?<![\w-])[A-Za-z0-9_-]{48,}(?![\w-])")
_HEX = re.compile(r"(?<![0-9a-fA-F])(?:0x)?[0-9a-fA-F]{48,}(?![0-9a-fA-F])")


def exfiltration(sentence: str) -> bool:
    if _MD_IMAGE.search(sentence):
        return True  # an image is fetched as soon as it is rendered: its query leaves without a click
    urls = [m.group(0) for m in _URL.finditer(sentence)] + [m.group("url") for m in _MD_LINK.finditer(sentence)]
    if any(_DATA_PARAM.search(u) for u in urls):
        return True
    # "send/email/post … to <address>" of what the conversation holds, or on other people's requests.
    destinations = [m.start() for m in _URL.finditer(sentence)] + [m.start() for m in _EMAIL.finditer(sentence)]
    on_others_request = bool(destinations) and bool(_ON_OTHERS_REQUEST.search(sentence))
    for at in destinations:
        window = sentence[max(0, at - 200):at]  # the verb and what it carries sit just before the address
        verb = _TRANSFER.search(window)
        if verb is not None and (on_others_request or _CARRIES_DATA.search(window, verb.end())):
            return True
    return False


def encoded_blob(sentence: str) -> bool:
    for m in _BASE64.finditer(sentence):
        token = m.group(0)
        # Encoded text mixes cases and digits; a long plain word ("Donaudampfschifffahrt…") does not.
        if re.search(r"[a-z]", token) and re.search(r"[A-Z]", token) and re.search(r"[\d+/=_-]", token):
            return True
    return bool(_HEX.search(sentence))
