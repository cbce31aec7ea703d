"""The secrets golden set: no secret of any kind is stored anywhere the memory app writes (rows, history, point
payloads), and ordinary sentences full of numbers and names pass the filter untouched."""
from __future__ import annotations

import random
import string

import pytest
from stdnum import iban, luhn

from infra.secrets import secrets_redact

from .memory_support import everything_stored, record_turns

# Built at run time (seeded), so the repository holds no string that looks like a live credential.
_rng = random.Random(20230508)


def _rand(n, alphabet=string.ascii_letters + string.digits):
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _luhn_complete(prefix: str, length: int) -> str:
    body = prefix + "".join(_rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    return body + luhn.calc_check_digit(body)


def _spaced(number: str) -> str:
    return " ".join(number[i:i + 4] for i in range(0, len(number), 4))


SECRETS: list[tuple[str, str, str]] = [  # (kind, secret, sentence containing it)
    *[("openai_key", s, f"here is my key {s} please keep it") for s in
      (f"sk-proj-{_rand(40)}", f"sk-{_rand(48)}",
       f"sk-ant-api03-{_rand(60, string.ascii_letters + string.digits + '_-')}")],
    *[("aws_key", s, f"the access key id is {s} for prod") for s in
      (f"AKIA{_rand(16, string.ascii_uppercase + string.digits)}",
       f"ASIA{_rand(16, string.ascii_uppercase + string.digits)}")],
    *[("github_token", s, f"use {s} to push") for s in (f"ghp_{_rand(36)}", f"github_pat_{_rand(60)}")],
    ("slack_token", f"xoxb-{_rand(12, string.digits)}-{_rand(24)}", None),
    ("google_key", f"AIza{_rand(35)}", None),
    ("stripe_key", f"sk_live_{_rand(24)}", None),
    ("gitlab_token", f"glpat-{_rand(20)}", None),
    *[("jwt", s, f"my session token: {s}") for s in
      (f"eyJ{_rand(20)}.eyJ{_rand(40)}.{_rand(43, string.ascii_letters + string.digits + '_-')}",
       f"eyJhbGciOiJIUzI1NiJ9.eyJ{_rand(30)}.{_rand(30)}")],
    *[("password", s, f"my password is {s}") for s in ("Tr0ub4dor&3", f"{_rand(10)}!9", "correcthorse42")],
    ("password", "hunter2xyz", "password: hunter2xyz"),
    ("pin", "4821", "My PIN is 4821 for the debit card."),
    ("cvv", "937", "the cvv is 937"),
    ("bearer", f"Bearer {_rand(40)}", None),
    ("private_key",
     "-----BEGIN RSA PRIVATE KEY-----\n" + _rand(64) + "\n" + _rand(64) + "\n-----END RSA PRIVATE KEY-----", None),
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + _rand(70) + "\n-----END OPENSSH PRIVATE KEY-----", None),
    *[("card_number", n, f"charge my card {n} please") for n in
      (_spaced(_luhn_complete("4", 16)), _luhn_complete("51", 16), _spaced(_luhn_complete("37", 15)),
       _luhn_complete("6011", 16), "-".join(_spaced(_luhn_complete("4", 16)).split()))],
    *[("iban", i, f"wire it to {i} tomorrow") for i in
      ("GB82 WEST 1234 5698 7654 32", "DE89370400440532013000", "NL91ABNA0417164300", "FR1420041010050500013M02606")],
    ("url_credentials", f"postgres://admin:{_rand(14)}@db.internal:5432/app", None),
    ("ssn", "123-45-6789", "my SSN is 123-45-6789"),
    ("opaque_token", _rand(48), "the webhook secret {s} is what they gave me"),
    ("api_key", f"api_{_rand(24)}", "api key = {s}"),
    ("npm_token", f"npm_{_rand(36)}", None),
]
SECRETS = [(kind, secret, (sentence or "please remember {s}").replace("{s}", secret) if "{s}" in (sentence or "{s}")
            else sentence) for kind, secret, sentence in SECRETS]

CLEAN = [
    "My flight UA 1234 leaves SFO at 7:45 on 12 May 2023.",
    "Caroline moved from Sweden 4 years ago with her 2 kids.",
    "Order number AB-12345 arrived on Tuesday.",
    "Call Maria at +1 415 555 0132 after 6 pm.",
    "I ran 10 km in 52 minutes last Sunday.",
    "John's birthday is on 3 June 1990.",
    "Our budget is $400 for the hotel in Lisbon.",
    "The meeting is in room 4B at 10:30.",
    "My seat was 23C on flight KL 605 to Amsterdam.",
    "Melanie painted a sunrise in 2022 for her daughter Sara.",
    "I have 3 cats named Oliver, Luna and Bailey.",
    "We booked 2 nights at the Hilton, confirmation 884120.",
    "Gina opened her clothing store on 14 February 2023.",
    "The package weighs 2.5 kg and costs 19.99 euros.",
    "Jon lost his job at the bank in January 2023.",
    "My zip code is 94103 and I live on 5th Street.",
    "I scored 1450 on the SAT in 2015.",
    "Version 3.11 of Python came out in October 2022.",
    "Train 9012 from Paris to London takes 2 hours 16 minutes.",
    "Maria volunteers at the shelter every Saturday from 9 to 12.",
    "The password for the guest wifi is on the fridge.",
    "I changed my password yesterday because it expired.",
    "My favourite number is 7 and my lucky day is Friday.",
    "The recipe needs 250 g of flour and 3 eggs.",
    "Tracking number 1Z 999 AA1 01 2345 6784 says it is in Memphis.",
    "Dr. Patel's office is at 1200 Market Street, suite 300.",
    "I paid 1,299 dollars for the laptop on Black Friday.",
    "Our team won 3-1 against Ajax on 21 April.",
    "The secret to good bread is time, said Grandma Rose.",
    "Invoice 2023-0457 is due on 30 June.",
    "I got a token of appreciation from the school board.",
    "Flight LH 400 departs Frankfurt at 13:55 from gate Z25.",
]


def test_golden_set_is_big_and_varied():
    assert len(SECRETS) >= 30 and len({k for k, _, _ in SECRETS}) >= 8
    assert len(CLEAN) >= 30
    assert all(iban.is_valid(i) for k, i, _ in SECRETS if k == "iban")
    assert all(luhn.is_valid("".join(ch for ch in n if ch.isdigit())) for k, n, _ in SECRETS if k == "card_number")


@pytest.mark.parametrize("kind,secret,sentence", SECRETS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SECRETS)])
def test_filter_removes_each_secret(kind, secret, sentence):
    result = secrets_redact(sentence)
    assert result.found, kind
    core = secret.split()[-1] if kind == "bearer" else secret
    assert core not in result.text
    # No 8-character run of the secret survives either.
    compact = core.replace(" ", "").replace("-", "")
    assert not any(compact[i:i + 8] in result.text.replace(" ", "").replace("-", "")
                   for i in range(0, max(1, len(compact) - 8)) if not compact[i:i + 8].isalpha())


def test_clean_sentences_pass_with_at_most_one_dropped():
    flagged = [s for s in CLEAN if secrets_redact(s).found]
    assert len(flagged) <= 1, flagged


@pytest.mark.django_db(transaction=True)
def test_no_secret_is_stored_anywhere_through_the_pipeline(alice, alice_user):
    turns = [("user", f"{sentence}. I prefer aisle seats and my name is Ada.") for _, _, sentence in SECRETS]
    record_turns(alice, alice_user, turns)
    stored = everything_stored(alice)
    assert "aisle seats" in stored  # the rest of each message was kept
    def leaked_in(kind, secret, sentence):
        core = secret.split()[-1] if kind == "bearer" else secret
        if len(core) >= 6:
            return core in stored
        # A short secret (PIN, CVV) is digits that any id may contain: look for it where it was said.
        return sentence[: sentence.index(core) + len(core)][-len(core) - 4:] in stored

    leaked = [kind for kind, secret, sentence in SECRETS if leaked_in(kind, secret, sentence)]
    assert leaked == []
    for kind, secret, _ in SECRETS:
        digits = "".join(ch for ch in secret if ch.isdigit())
        if kind in ("card_number", "iban"):
            assert digits not in stored.replace(" ", "").replace("-", "")


@pytest.mark.django_db(transaction=True)
def test_clean_sentences_are_stored_through_the_pipeline(alice, alice_user):
    from memory.models import MemoryRecord

    record_turns(alice, alice_user, [("user", s) for s in CLEAN])
    events = set(MemoryRecord.objects.unscoped().filter(tenant=alice, kind="event").values_list("text", flat=True))
    kept = [s for s in CLEAN if f"Ada: {s}" in events]
    assert len(kept) >= len(CLEAN) - 1


def test_an_iban_needs_a_registered_country_and_its_length_beside_the_checksum():
    from stdnum.iso7064 import mod_97_10

    def with_check_digits(country, bban):
        return f"{country}{mod_97_10.calc_check_digits(bban + country)}{bban}"

    assert secrets_redact(f"wire it to {with_check_digits('DE', '370400440532013000')}").kinds == ["iban"]
    # The same checksum arithmetic on a code of no IBAN country, or of the wrong length for Germany, is no account.
    for code in (with_check_digits("QX", "370400440532013000"), with_check_digits("DE", "3704004405320130001")):
        assert mod_97_10.is_valid(code[4:] + code[:4])
        assert not secrets_redact(f"the part number is {code}").found, code


def test_the_digits_of_a_decimal_number_are_no_card():
    """Log lines carry durations such as 0.0048812345678901234 s: nineteen digits after the point, a Luhn pass one
    time in ten. A card number is never the fraction of a number."""
    rng = random.Random(5)
    durations = [f"succeeded in {rng.random() / rng.randint(1, 1000)!r}s" for _ in range(2000)]
    assert [d for d in durations if secrets_redact(d).text != d] == []
    assert secrets_redact("card 4111 1111 1111 1111.").text == "card [redacted]."
