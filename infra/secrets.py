"""Secrets never become memories: credentials, tokens, card numbers and bank accounts are cut out of text first."""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from stdnum import iban, luhn

REDACTED = "[redacted]"


@dataclass
class Redaction:
    text: str
    kinds: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.kinds)


# Vendor formats: the shape alone is proof enough.
_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("private_key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY"
                               r"(?: BLOCK)?-----|\Z)", re.S)),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("api_key", re.compile(r"\b(?:sk|pk|rk)-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}")),
    ("api_key", re.compile(r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("aws_key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{30,}")),
    ("bearer_token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}")),
    ("url_credentials", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s@/]+@[^\s]+", re.I)),
    ("ssn", re.compile(r"\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b")),
]

# "password is X", "my pin: 1234", "api key = abc": the label says the value is secret, whatever it looks like.
_LABELLED = re.compile(
    r"(?ix)\b(?P<label>password|passphrase|passcode|passwd|pwd|pin(?:\s*code)?|api[\s_-]?key|secret[\s_-]?key|"
    r"access[\s_-]?token|auth(?:entication)?[\s_-]?token|refresh[\s_-]?token|client[\s_-]?secret|token|secret|"
    r"cvv|cvc|security\s+code|2fa\s+code|otp|one[\s-]time\s+code|recovery\s+code|seed\s+phrase)"
    r"(?P<sep>\s*(?:(?P<marker>is|was|=|:|->)\s*)?(?:now\s+|set\s+to\s+|still\s+)?[\"'`]?)"
    r"(?P<value>[^\s\"'`,;]{3,})")
# Weak labels ("token", "secret") name a credential only when the value looks like one.
_WEAK_LABELS = frozenset({"token", "secret"})
# A labelled value that is an everyday word is a sentence about passwords, not a password ("my password is weak").
_NOT_A_VALUE = frozenset("""
a an the my your our his her their its this that it is was be been being not never always too very so
weak strong long short expired wrong incorrect correct reset changed same different new old secure safe
required needed missing forgotten lost stolen hard easy simple complicated there here for to of in on
out gone up down off over still now just also really somewhere written saved stored manager protected
and or but with without from by at as if when because which who what where how why yesterday today tomorrow
""".split())


def _looks_like_credential(value: str) -> bool:
    return len(value) >= 6 and (bool(re.search(r"\d", value)) + bool(re.search(r"[^A-Za-z0-9]", value))
                                + bool(re.search(r"[a-z]", value) and re.search(r"[A-Z]", value))) >= 1


# Not the digits of a decimal number ("succeeded in 0.0048812345678901234s" is a duration, not a card).
_CARD = re.compile(r"(?<![\d-])(?<!\d[.,])(?:\d[ -]?){12,18}\d(?![\d-])(?![.,]\d)")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30}\b")
# Long opaque strings (random keys with no known prefix) betray themselves by their entropy.
_OPAQUE = re.compile(r"\b[A-Za-z0-9_+/=-]{32,}\b")


def _iban_valid(candidate: str) -> bool:
    # The checksum, the country and the length and shape its registry gives; not each country's national check
    # digits: an account number that fails only those is still one the user meant to keep private.
    return iban.is_valid(candidate, check_country=False)


def _entropy(s: str) -> float:
    counts = Counter(s)
    return -sum(c / len(s) * math.log2(c / len(s)) for c in counts.values())


def _looks_random(token: str) -> bool:
    classes = sum(bool(re.search(p, token)) for p in (r"[a-z]", r"[A-Z]", r"\d"))
    return classes >= 2 and _entropy(token) >= 4.0 and not token.isdigit()


def _card_valid(candidate: str) -> bool:
    digits = re.sub(r"\D", "", candidate)
    # A run of one repeated digit passes Luhn by accident of arithmetic ("0000 0000 0000 0000"); a real card number,
    # test numbers such as 4111 1111 1111 1111 included, has at least two digits.
    return 13 <= len(digits) <= 19 and luhn.is_valid(digits) and len(set(digits)) > 1


_CHECKED = [("card_number", _CARD, _card_valid), ("iban", _IBAN, _iban_valid), ("opaque_token", _OPAQUE, _looks_random)]


def secrets_redact(text: str) -> Redaction:
    """The text with every secret replaced by [redacted], and the kinds found (never the values)."""
    if not text:
        return Redaction(text or "")
    kinds: list[str] = []
    out = text
    for kind, pattern in _PATTERNS:
        out, n = pattern.subn(REDACTED, out)
        kinds += [kind] * n

    def labelled(m: re.Match) -> str:
        value = m.group("value").rstrip(".!?)")
        if value.lower() in _NOT_A_VALUE or REDACTED in value or not value:
            return m.group(0)
        weak = m.group("label").lower() in _WEAK_LABELS
        # Without "is", ":" or "=" only a credential-shaped value counts ("changed my password yesterday" does not).
        if (weak or not m.group("marker")) and not _looks_like_credential(value):
            return m.group(0)
        kinds.append("password" if m.group("label").lower().startswith(("pass", "pwd", "pin")) else "token")
        return f"{m.group('label')}{m.group('sep')}{REDACTED}" + m.group("value")[len(value):]

    out = _LABELLED.sub(labelled, out)

    # Shapes that match ordinary numbers and words too: a match is a secret only if its check passes.
    for kind, pattern, check in _CHECKED:
        def checked(m: re.Match, kind=kind, check=check) -> str:
            if check(m.group(0)):
                kinds.append(kind)
                return REDACTED
            return m.group(0)

        out = pattern.sub(checked, out)
    return Redaction(out, kinds)


def contains_secret(text: str) -> bool:
    return secrets_redact(text).found


def secrets_redacted(value):
    """The value with every string in it redacted (dicts and lists walked): for writers whose text comes from a model
    or a tool call, which may repeat what the user typed before the message was stored redacted."""
    if isinstance(value, str):
        return secrets_redact(value).text
    if isinstance(value, dict):
        return {k: secrets_redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [secrets_redacted(v) for v in value]
    return value


class SecretsLogFilter:
    """A logging filter that redacts secrets from every record's rendered message: a log line is a store too."""

    def filter(self, record) -> bool:
        try:
            rendered = record.getMessage()
        except Exception:  # a malformed record is the handler's to report, not ours
            return True
        clean = secrets_redact(rendered).text
        if clean != rendered:
            record.msg, record.args = clean, None
        return True
