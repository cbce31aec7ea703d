"""Secrets never become memories: credentials, tokens, card numbers and bank accounts are cut out of text first.

Precision matters as much as recall: the filter rewrites stored messages for good, and users paste code. A value is
cut when its shape proves it (a vendor's key format, a private key block, a card number that passes Luhn, an IBAN that
passes its checksum), or when a label names it a secret ("password", "api_key", "token", "PIN") and the value is a
literal that looks like one. An expression (`request.form["password"]`, `jwt.encode(...)`, `process.env.TOKEN`), a
template (`{{ password }}`, `${TOKEN}`, `<password>`), a placeholder (`your_secret_key`, `password123`,
`AKIAIOSFODNN7EXAMPLE`) or a heading word ("Secure Password Storage") is never cut. bench/secrets_filter.py measures
both sides on the repository's corpus (tests/infra/secrets_corpus.py) and on real project chats.
"""
from __future__ import annotations

import base64
import binascii
import math
import re
import string
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


# --- what a value must not be ----------------------------------------------------------------------------------------

# Written where a real value would go, in docs, examples and templates: never a secret, whatever its shape.
_PLACEHOLDER_MARK = re.compile(r"(?i)example|placeholder|your|xxxx|change[_-]?me|redacted|(.)\1{5}|\.\.\.|…")
# A labelled value containing one of these words is a dummy ("your_jwt_secret", "securePassword123", "test1234").
_PLACEHOLDER_WORDS = re.compile(r"(?i)sample|dummy|passw|secret|token|test|fake|mock|default|demo|todo|fixme|insert|"
                                r"replace|qwerty|letmein|changeit")
# ... or, for a value that does not look random, one of these as a whole word part ("my-app-key", "admin123").
_PLACEHOLDER_PARTS = frozenset("""
my key pass pwd pw foo bar baz qux abc admin root user guest dev local localhost app api none null nil undefined
true false str string env var value here new old some random super strong secure insecure unsafe temp tmp hello
world welcome
""".split())
# Values published as examples, in countless tutorials: jwt.io's token signature, pyotp's TOTP secret, the tokens of
# Django REST framework's authentication docs.
_PUBLIC_EXAMPLES = ("SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", "JBSWY3DPEHPK3PXP",
                    "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b", "401f7ac837da42b97f613d789819ff93537bee6a")

# A reference to a value rather than the value: `request.form["password"]`, `jwt.encode(`, `process.env.X`, `getpass()`.
_EXPRESSION = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\?\.|\.|::|->)[A-Za-z_$][\w$]*)+"
                         r"|[A-Za-z_$][\w$]*\s*[(\[]")
# ... unless it holds what code between brackets does not and passwords do: `Sk(O90Cv$p0e`, `z(c$(Cxk)rU9&5Xr2`.
_NOT_CODE = re.compile(r"[&!#%^@~*]|[A-Za-z0-9]\$")
# A value filled in elsewhere or computed: `${TOKEN}`, `{{ password }}`, `%(pw)s`, `<password>`, `{password}`, `$1`,
# `:password`, `!vault |` (a YAML tag), `(lambda: password)`.
_TEMPLATE = re.compile(r"\$\{|\$\([a-z][\w-]*(?:\s|\)|$)|\{\{|\{%|<%|%\(|#\{|^[<{\[!]|^\$\w+$|^%\w+%$|^:\w+$"
                       r"|^@\w+$|^\(\s*(?:[a-z_]+(?!\w)|[A-Za-z_$]+[.(\[])")
# What a password is stored as: a hash (bcrypt, argon2, crypt, Django's pbkdf2, a hex digest), not the password.
_HASHED = re.compile(r"\$(?:2[abxy]?|argon2(?:id|i|d)|[156]|scrypt|pbkdf2[\w-]*)\$|^pbkdf2_\w+\$|^[0-9a-fA-F]{32,128}$")
_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _entropy(s: str) -> float:
    counts = Counter(s)
    return -sum(c / len(s) * math.log2(c / len(s)) for c in counts.values())


def _sequential(value: str) -> bool:
    """Typed along the keyboard ("abcde12345", "ABCDEF0123456789"): most neighbours are successive characters."""
    steps = sum(ord(b) - ord(a) == 1 or a + b == "90" for a, b in zip(value, value[1:]))
    return steps >= 0.3 * (len(value) - 1)


def _short_parts(value: str) -> bool:
    """Random text breaks into short parts ("aB3xYz9Qk" -> a, B, 3, x, Yz, 9, Qk); words and identifiers do not
    ("Double-check", "getAccessToken", "Qwen2_5_VLCausalLMOutputWithPast": most of their letters are in long parts)."""
    parts = _PART.findall(value)
    if not parts:
        return False
    long_chars = sum(len(p) for p in parts if len(p) >= 4 and not p.isdigit())
    return sum(map(len, parts)) / len(parts) < 4 and long_chars < 0.4 * len(value)


def _looks_random(value: str, min_len: int = 16) -> bool:
    """Generated, not typed: long, two character classes or more (hex counts), short parts, no run along the rows."""
    if len(value) < min_len:
        return False
    classes = bool(re.search(r"[a-z]", value)) + bool(re.search(r"[A-Z]", value)) + bool(re.search(r"\d", value))
    return classes >= 2 and _entropy(value) >= 3.0 and _short_parts(value) and not _sequential(value)


def _placeholder(value: str) -> bool:
    if _PLACEHOLDER_MARK.search(value) or _PLACEHOLDER_WORDS.search(value):
        return True
    if not re.search(r"[A-Za-z0-9]", value) or any(example in value for example in _PUBLIC_EXAMPLES):
        return True
    return not _looks_random(value) and any(p.lower() in _PLACEHOLDER_PARTS for p in _PART.findall(value))


def _trivial_digits(value: str) -> bool:
    return len(set(value)) == 1 or value in "01234567890123456789" or value in "98765432109876543210"


# --- vendor formats: the shape alone is proof ------------------------------------------------------------------------

# (kind, pattern): the formats vendors give their keys (detect-secrets' plugins and the vendors' docs), with a prefix or
# a fixed part that no ordinary word or id has.
_VENDOR: list[tuple[str, str]] = [
    ("api_key", r"sk-ant-(?:api|admin|sid)\d\d-[A-Za-z0-9_-]{20,}"),  # Anthropic
    ("api_key", r"sk-(?:proj|svcacct|admin|None|live|test)-[A-Za-z0-9_-]{20,}"),  # OpenAI and the like
    ("api_key_legacy", r"sk-[A-Za-z0-9]{20,}(?![\w-])"),  # OpenAI's older keys, and many services' since
    ("api_key", r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,}"),  # Stripe
    ("aws_key", r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),
    ("github_token", r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"),
    ("gitlab_token", r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|oas|agent)-[A-Za-z0-9_-]{20,}"),
    ("slack_token", r"xox[abposr]-[A-Za-z0-9-]{10,}"),
    ("slack_webhook", r"hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+"),
    ("google_api_key", r"AIza[0-9A-Za-z_-]{35}|GOCSPX-[A-Za-z0-9_-]{28}|ya29\.[A-Za-z0-9_-]{20,}"),
    ("npm_token", r"npm_[A-Za-z0-9]{30,}"),
    ("pypi_token", r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    ("sendgrid_key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    ("twilio_key", r"SK[0-9a-fA-F]{32}\b"),
    ("huggingface_token", r"hf_[A-Za-z0-9]{34,}"),
    ("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}\b"),
    ("shopify_token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    ("square_token", r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}|EAAA[A-Za-z0-9_-]{60}"),
    ("azure_storage_key", r"AccountKey=[A-Za-z0-9+/]{86}=="),
    ("databricks_token", r"dapi[a-f0-9]{32}\b"),
    ("postman_key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"),
    ("groq_key", r"gsk_[A-Za-z0-9]{48,}"),
    ("age_key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}\b"),
    ("vault_token", r"hvs\.[A-Za-z0-9_-]{24,}"),
    ("sentry_token", r"sntry[su]_[A-Za-z0-9_=+/-]{40,}"),
    ("artifactory_key", r"AKCp[A-Za-z0-9]{69}\b"),
    ("mailchimp_key", r"[0-9a-f]{32}-us\d{1,2}\b"),
    ("discord_token", r"[MNO][A-Za-z\d_-]{23,25}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,38}\b"),
]
_VENDOR_KINDS = [(kind, re.compile(p)) for kind, p in _VENDOR]
_VENDOR_RE = re.compile("|".join(f"(?:{p})" for _, p in _VENDOR))
_TELEGRAM = re.compile(r"\b\d{8,10}:AA[0-9A-Za-z_-]{33}(?![\w-])")
# Every key format and every opaque secret is a run of twenty characters or more of these: the vendor patterns and the
# opaque check read only such runs (a union of patterns over the whole text is many times slower).
_LONG_RUN = re.compile(r"[A-Za-z0-9_.+/=-]{20,}")
_WORD_CHAR = re.compile(r"[A-Za-z0-9_]")
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?P<body>.*?)"
                          r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.(?P<sig>[A-Za-z0-9_-]{16,})")
_JWT_SHAPE = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.?[A-Za-z0-9_-]*")
# Brackets never stand in a URL's user or password (RFC 3986): "git://[path-to-repo[:]][ref@]path" is a syntax.
_URL_CREDENTIALS = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@\"'`\[\]]*:(?P<pw>[^\s@/\"'`\[\]]+)@[^\s\"'`<>)\]]*",
                              re.I)
_BEARER = re.compile(r"(?i)\bbearer\s+(?P<tok>[A-Za-z0-9._~+/=-]{16,})")
_BASIC = re.compile(r"\bBasic\s+(?P<tok>[A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])")
_SSN = re.compile(r"\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b")
# Not the digits of a decimal number ("succeeded in 0.0048812345678901234s" is a duration, not a card). The exact
# pattern is slow on digit-heavy text, so it runs only where the quick one finds thirteen digits in a row.
_CARD = re.compile(r"(?<![\w-])(?<!\d[.,])(?:\d[ -]?){12,18}\d(?![\w-])(?![.,]\d)")
# The networks' issuer prefixes: Visa 4, Mastercard 51-55 and 2221-2720, Amex 34/37, Discover and UnionPay 6, JCB 35,
# Diners 30/36/38/39, Maestro 50/56-69, JCB's older 2131 and 1800. Ids and timestamps that pass Luhn by chance mostly
# start otherwise.
_CARD_ISSUER = re.compile(r"[456]|3[04-9]|2(?:22[1-9]|2[3-9]|[3-6]|7[01]|720)|2131|1800")
_CARD_HINT = re.compile(r"\d(?:[ -]?\d){12}")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30}\b")
# A long random string with no label and no known prefix; hashes (hex), ids and digests are not among them.
_OPAQUE = re.compile(r"(?<![\w+/=.-])[A-Za-z0-9_+/-]{32,}={0,2}(?![\w+/=-])")
# How base64 of common file formats begins: PNG, JPEG, GIF, WebP, PDF, ZIP, gzip, XML, SVG.
_BASE64_FILES = ("iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR", "JVBERi0", "UEsDB", "H4sI", "PD94bWwg", "PHN2Zy")
_SLUG_PART = re.compile(r"(?:^|[/_-])[a-z]{4,}(?:[/_-]|$)")
_DIGEST_BEFORE = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)[-:]|base64,|integrity=\"?|[/.#?&=:$]|\\)$")


def _run_spans(text: str, low: str):
    """Vendor keys and opaque random strings, read in the long runs of key characters."""
    for run in _LONG_RUN.finditer(text):
        start, end = run.span()
        for m in _VENDOR_RE.finditer(text, start, end):
            if (m.start() and _WORD_CHAR.match(text, m.start() - 1)) or _PLACEHOLDER_MARK.search(m.group(0)):
                continue
            kind = next(kind for kind, p in _VENDOR_KINDS if p.match(text, m.start(), m.end()))
            if kind == "api_key_legacy":  # "sk-" alone prefixes CSS classes and slugs too: the rest must look random
                if not _looks_random(m.group(0)[3:]):
                    continue
                kind = "api_key"
            yield m.start(), m.end(), kind
        if end - start >= 32:
            for m in _OPAQUE.finditer(text, start, end):
                if _opaque_valid(m.group(0), text, m.start(), m.end()):
                    yield m.start(), m.end(), "opaque_token"
    if ":AA" in text:
        for m in _TELEGRAM.finditer(text):
            if not _PLACEHOLDER_MARK.search(m.group(0)):
                yield m.start(), m.end(), "telegram_token"


def _private_key_spans(text: str, low: str):
    if "PRIVATE KEY" not in text:
        return
    for m in _PRIVATE_KEY.finditer(text):
        body = m.group("body")
        # Documentation shows the block with "..." or a few characters: a key is hundreds of base64 characters.
        if len(re.findall(r"[A-Za-z0-9+/=]", body)) >= 40 and not _PLACEHOLDER_MARK.search(body):
            yield m.start(), m.end(), "private_key"


def _jwt_valid(token: str) -> bool:
    sig = token.rsplit(".", 1)[-1]
    return sig not in _PUBLIC_EXAMPLES and _looks_random(sig) and not _PLACEHOLDER_MARK.search(token)


def _jwt_spans(text: str, low: str):
    if "eyJ" not in text:
        return
    for m in _JWT.finditer(text):
        if _jwt_valid(m.group(0)):
            yield m.start(), m.end(), "jwt"


def _url_spans(text: str, low: str):
    if "://" not in text or "@" not in text:
        return
    for m in _URL_CREDENTIALS.finditer(text):
        password = m.group("pw")
        # A URL carries the password itself, never its hash: a long hex one is generated, not a digest.
        if _password_value(password) or (_looks_random(password) and not _TEMPLATE.search(password)
                                         and not _placeholder(password)):
            yield m.start(), m.end() - (len(m.group(0)) - len(m.group(0).rstrip(".,;:!?"))), "url_credentials"


def _bearer_spans(text: str, low: str):
    if "bearer" in low:
        for m in _BEARER.finditer(text):
            tok = m.group("tok")
            if _JWT_SHAPE.fullmatch(tok) and not _jwt_valid(tok):
                continue
            if _looks_random(tok) and not _placeholder(tok):
                yield m.start("tok"), m.end("tok"), "bearer_token"
    if "Basic " in text:
        for m in _BASIC.finditer(text):
            try:
                decoded = base64.b64decode(m.group("tok"), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                continue
            user, colon, password = decoded.partition(":")
            if colon and user and password and decoded.isprintable():
                yield m.start("tok"), m.end("tok"), "basic_auth"


def _iban_valid(candidate: str) -> bool:
    # The checksum, the country and the length and shape its registry gives; not each country's national check
    # digits: an account number that fails only those is still one the user meant to keep private.
    return iban.is_valid(candidate, check_country=False)


def _card_layout(groups: list[str]) -> bool:
    """Written in one piece, in fours (the last group shorter), or as Amex and Diners print it (4-6-5, 4-6-4)."""
    sizes = [len(g) for g in groups]
    return (len(sizes) == 1 or all(n == 4 for n in sizes[:-1]) and 1 <= sizes[-1] <= 4
            or sizes in ([4, 6, 5], [4, 6, 4]))


def _in_arithmetic(text: str, start: int, end: int) -> bool:
    """A long integer written in code: an argument, a list item or an operand (`default_rng(2435908729190400)`,
    `[4220315081820346526, ...]`, `mpf(368983957219251)/10**15`). A card number is written as text or quoted."""
    before, after = text[:start].rstrip()[-1:], text[end:].lstrip()[:1]
    return before in tuple("([*/+^%") or after in tuple(")]*/^%")


def _card_valid(candidate: str) -> bool:
    if not _card_layout(re.split(r"[ -]", candidate)):
        return False
    digits = re.sub(r"\D", "", candidate)
    if not _CARD_ISSUER.match(digits):
        return False
    # A run of one repeated digit passes Luhn by accident of arithmetic ("0000 0000 0000 0000"); a real card number,
    # test numbers such as 4111 1111 1111 1111 included, has at least two digits.
    return 13 <= len(digits) <= 19 and luhn.is_valid(digits) and len(set(digits)) > 1


def _opaque_valid(token: str, text: str, start: int, end: int) -> bool:
    # Three character classes, each more than once, high entropy and short parts: base62 randomness. Identifiers and
    # words (long parts), hex digests and UUIDs fail it; base64 digests (SRI, data: URLs), path segments and the
    # parts of a dotted token are known by what stands beside them.
    if len(token) > 200 or _DIGEST_BEFORE.search(text[max(0, start - 16):start]) or text[end:end + 1] == ".":
        return False
    if _SLUG_PART.search(token) or token.startswith(_BASE64_FILES):  # a path or slug, an encoded file
        return False
    lower, upper, digit = (len(re.findall(p, token)) for p in (r"[a-z]", r"[A-Z]", r"\d"))
    return (min(lower, upper, digit) >= 2 and _entropy(token) >= 4.2 and _short_parts(token)
            and not _PLACEHOLDER_MARK.search(token))


def _checked_spans(text: str, low: str):
    for m in _CARD.finditer(text) if _CARD_HINT.search(text) else ():
        if _card_valid(m.group(0)) and not (m.group(0).isdigit() and _in_arithmetic(text, m.start(), m.end())):
            yield m.start(), m.end(), "card_number"
    for m in _IBAN.finditer(text):
        if _iban_valid(m.group(0)):
            yield m.start(), m.end(), "iban"
    for m in _SSN.finditer(text):
        yield m.start(), m.end(), "ssn"


# --- labelled values: "password is X", `api_key = "X"`, DB_PASSWORD=X ------------------------------------------------

# Where a label may be: each hit is widened to the identifier around it and read part by part (`pingTimeout` is no PIN).
# Searched in the lowercased text: a case-insensitive pattern is several times slower.
_LABEL_HIT = re.compile(r"pass|pwd|secret|token|key|pin|cvv|cvc|otp|code|phrase")
_WORD_BEFORE = re.compile(r"([A-Za-z0-9]+)[ \t]+$")
_IDENT_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")
_PASSWORD_PARTS = frozenset({"password", "passwd", "pwd", "passphrase", "passcode", "passwort"})
_PASSWORD_SUFFIXED = frozenset({"pass", "pw"})  # only after another part: DB_PASS, user_pw
_TOKEN_PARTS = frozenset({"token", "secret", "apikey", "secretkey", "accesskey", "privatekey"})
_KEY_QUALIFIERS = frozenset({"api", "secret", "access", "private", "auth", "client", "master", "encryption", "signing",
                             "app", "service", "account", "license", "subscription", "priv", "db", "database",
                             "consumer", "webhook", "session", "hmac"})
_GLUED_LABEL = re.compile(r"(?:password|passwd|pwd|passphrase|token|secret|apikey)$")
_PIN_PARTS = frozenset({"pin", "otp", "cvv", "cvv2", "cvc", "cvc2"})
_CODE_QUALIFIERS = frozenset({"pin", "security", "verification", "recovery", "backup", "2fa", "mfa", "otp", "auth",
                              "authentication", "time", "access", "door", "gate", "alarm", "entry", "garage", "locker",
                              "safe", "unlock"})
# Parts that may follow the label and still name the secret itself (password_confirm, api_key_value, password2).
_TRAILING_PARTS = frozenset({"confirm", "confirmation", "value", "str"})

# After the label: closing quotes or brackets of a key (`"password":`, `["password"] =`, `**Password**:`), then the
# marker: an assignment or comparison, a sentence's "is" or "(set) to", or bare space.
_MARKER = re.compile(r"""[\"'`\]*]{0,3}\??(?:(?P<assign>[ \t]*(?::=|=>|===?|!==?|=|:|->)[ \t]*)"""
                     r"""|(?P<to>[ \t]+(?:(?:is|was)[ \t]+)?(?:(?:set|changed|reset)[ \t]+)?to[ \t]+)"""
                     r"""|(?P<prose>[ \t]+(?:is|was)[ \t]*:?[ \t]+(?:(?:now|still)[ \t]+)?)"""
                     r"""|(?P<bare>[ \t]+))""", re.I)
_QUOTED = re.compile(r"""(?:[bBrRuU]{0,2}|@)"""
                     r"""(?:"(?P<dq>[^"\n]{1,200})"|'(?P<sq>[^'\n]{1,200})'|`(?P<bq>[^`\n]{1,200})`)""")
# A typed secret is short; a longer bare value is code or a key whose own shape is checked elsewhere.
_BARE_MAX = 100
_BARE = re.compile(r"[^\s\"'`,;]{1,%d}" % (_BARE_MAX + 1))
_SENTENCE_END = re.compile(r"""[.!?,;:)]*(?:\s*$|\s+(?:and|but|so|or|please|thanks|though|ok|okay)\b|\s*[\n"'])""",
                           re.I)
# Words a sentence puts after "password is": it describes the password, it does not give it.
_NOT_A_VALUE = frozenset("""
a an the my your our his her their its this that it is was be been being not never always too very so weak strong
long short expired wrong incorrect correct invalid valid reset changed same different new old secure insecure safe
unsafe required needed missing forgotten lost stolen hard easy simple complex complicated there here for to of in on
out gone up down off over still now just also really somewhere written saved stored manager protected and or but with
without from by at as if when because which who what where how why yesterday today tomorrow empty blank null none
unknown known unique optional mandatory visible hidden private public sensitive important fine good bad okay great
mine yours ours theirs case wrong right set unset present absent available ready active inactive enabled disabled
provided accepted rejected generated rotated revoked leaked compromised encrypted hashed salted encoded plain plaintext
given taken shown known written sent kept lost chosen broken hidden done made found told shared said read seen bought
forgot
""".split())
# "my password is sunshine", "the wifi password was sunshine": a one-word password is given about someone's password.
_OWNER_BEFORE = re.compile(r"(?i)\b(?:my|our|your|his|her|their|the|its)\b[\w \t-]{0,30}$")
_DESCRIPTIVE_ENDINGS = ("ed", "ing", "ly", "able", "ible", "ful", "less", "ous", "ive", "ion", "ness", "ment", "ent",
                        "ant", "ical", "ure")


def _label_class(parts: list[str], before: str) -> str | None:
    """Which secret the identifier's parts name, if any: the label is its last part, or the one before a trailing
    part such as `_confirm`; a part after it that names something else (`password_hash`, `token_url`) is no label."""
    if "public" in parts:  # publicKeyToken, public_key: published on purpose
        return None
    while len(parts) > 1 and (parts[-1] in _TRAILING_PARTS or parts[-1].isdigit()):
        parts = parts[:-1]
    last, prev = parts[-1], (parts[-2] if len(parts) > 1 else before)
    glued = _GLUED_LABEL.search(last)  # PGPASSWORD, MYSQLPWD, CLIENTSECRET, APITOKEN
    if glued and glued.start():
        last, prev = glued.group(0), last[:glued.start()]
    if last in _PASSWORD_PARTS or (last in _PASSWORD_SUFFIXED and len(parts) > 1):
        return "password"
    if last == "phrase" and prev == "pass":
        return "password"
    if last in _TOKEN_PARTS or (last == "key" and prev in _KEY_QUALIFIERS):
        return "token"
    if last in _PIN_PARTS or (last == "code" and prev in _CODE_QUALIFIERS):
        return "cvv" if last.startswith(("cvv", "cvc")) or prev == "security" else "pin"
    return None


def _password_value(value: str, *, prose: bool = False, head: str = "", tail: str = "") -> bool:
    """A password given as a literal: not a template, a dummy or a stored hash, and shaped like one."""
    if _TEMPLATE.search(value) or _HASHED.search(value) or _placeholder(value):
        return False
    if value.isdigit():
        return 4 <= len(value) <= 12 and not _trivial_digits(value)
    letters, digits = re.search(r"[A-Za-z]", value), re.search(r"\d", value)
    specials = re.search(r"[^A-Za-z0-9_.\-]", value)
    if len(value) >= 6 and letters and (digits or specials):
        return True
    if _looks_random(value, 12):
        return True
    # "my password is sunshine": in a sentence a single word given as the password is one, unless it describes it.
    return (prose and value.isalpha() and len(value) >= 4 and value.lower() not in _NOT_A_VALUE
            and not value.lower().endswith(_DESCRIPTIVE_ENDINGS) and bool(_SENTENCE_END.match(tail))
            and bool(_OWNER_BEFORE.search(head)))


def _value_is_secret(cls: str, value: str, how: str, quoted: bool, head: str, tail: str) -> bool:
    if not quoted and _EXPRESSION.match(value) and not _NOT_CODE.search(value):
        return False
    if _JWT_SHAPE.fullmatch(value):  # a token's own format decides (the jwt.io example is no secret)
        return _jwt_valid(value)
    if cls in ("pin", "cvv"):
        lo = 3 if cls == "cvv" else 4
        return value.isdigit() and lo <= len(value) <= 8 and not _trivial_digits(value)
    if how == "bare" and not quoted:  # "Password Storage", "token TEXT": no marker, only a random value counts
        return cls == "token" and _looks_random(value) and not _placeholder(value)
    if cls == "password":
        return _password_value(value, prose=how == "prose" and not quoted, head=head, tail=tail)
    return _looks_random(value, 12) and not _TEMPLATE.search(value) and not _placeholder(value)


def _labelled_spans(text: str, low: str):
    done = 0
    for hit in _LABEL_HIT.finditer(low):
        if hit.start() < done:
            continue
        start, end = hit.start(), hit.end()
        while start > 0 and text[start - 1] in _IDENT_CHARS:
            start -= 1
        while end < len(text) and text[end] in _IDENT_CHARS:
            end += 1
        done = end
        ident = text[start:end].rstrip(".-")
        end = start + len(ident)
        parts = [p.lower() for p in _PART.findall(ident)]
        if not parts:
            continue
        before = ""
        if len(parts) == 1:  # prose: "api key", "security code", "secret key"
            prev = _WORD_BEFORE.search(text, max(0, start - 30), start)
            before = prev.group(1).lower() if prev else ""
        cls = _label_class(parts, before)
        if cls is None:
            continue
        marker = _MARKER.match(text, end)
        if not marker:
            continue
        at = marker.end()
        quoted = _QUOTED.match(text, at)
        if quoted:
            group = next(g for g in ("dq", "sq", "bq") if quoted.group(g) is not None)
            v_start, v_end = quoted.start(group), quoted.end(group)
        else:
            bare = _BARE.match(text, at)
            if not bare or len(bare.group(0)) > _BARE_MAX:
                continue
            v_start, v_end = at, at + len(bare.group(0).rstrip(".,:;?)]}*"))
        value = text[v_start:v_end]
        head, tail = text[max(0, start - 40):start], text[v_end:v_end + 40]
        if value and REDACTED not in value and _value_is_secret(cls, value, marker.lastgroup, bool(quoted), head, tail):
            done = v_end
            yield v_start, v_end, "password" if cls == "password" else "pin" if cls == "cvv" else cls


# --- the filter ------------------------------------------------------------------------------------------------------

_DETECTORS = (_private_key_spans, _run_spans, _jwt_spans, _url_spans, _bearer_spans, _labelled_spans,
              _checked_spans)


def secrets_redact(text: str) -> Redaction:
    """The text with every secret replaced by [redacted], and the kinds found (never the values)."""
    if not text:
        return Redaction(text or "")
    low = text.lower()
    if len(low) != len(text):  # a few characters lowercase to two ("İ"): keep offsets aligned
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    spans = sorted((s for detect in _DETECTORS for s in detect(text, low)), key=lambda s: (s[0], -s[1]))
    if not spans:
        return Redaction(text)
    out, kinds, pos = [], [], 0
    for start, end, kind in spans:
        if start < pos:  # overlaps a span already cut (a key inside a labelled value, a card inside a URL)
            pos = max(pos, end)
            continue
        out += [text[pos:start], REDACTED]
        kinds.append(kind)
        pos = end
    out.append(text[pos:])
    return Redaction("".join(out), kinds)


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
