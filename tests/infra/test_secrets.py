"""The secrets filter cuts secrets and nothing else: labelled values only when they are literals that look like
secrets, never an expression, a subscript, a call, a template, a placeholder or a heading word (corpus:
tests/infra/secrets_corpus.py; bench/secrets_filter.py measures the same corpus and real project chats)."""
from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from infra.secrets import REDACTED, SecretsLogFilter, contains_secret, secrets_redact, secrets_redacted

from .secrets_corpus import KEEP, secrets

SECRETS = secrets()


@pytest.mark.parametrize("text", [
    'password = request.form["password"]',
    'token = jwt.encode({"sub": user.id}, …)',
    "Secure Password Storage**:",
])
def test_the_reported_code_and_heading_are_kept(text):
    assert secrets_redact(text).text == text
    assert not contains_secret(text)


@pytest.mark.parametrize("keep", KEEP, ids=[f"{k.family}-{i}" for i, k in enumerate(KEEP)])
def test_code_and_prose_of_the_corpus_pass_untouched(keep):
    result = secrets_redact(keep.text)
    assert result.text == keep.text
    assert result.kinds == []


@pytest.mark.parametrize("sample", SECRETS, ids=[f"{s.kind}-{i}" for i, s in enumerate(SECRETS)])
def test_every_secret_of_the_corpus_is_cut(sample):
    result = secrets_redact(sample.text)
    assert result.found, sample.kind
    assert sample.secret not in result.text
    assert REDACTED in result.text


@pytest.mark.parametrize("text,expected", [
    ('password = "hunter2!x"', 'password = "[redacted]"'),
    ("DB_PASSWORD=s3cr3tP4ss", "DB_PASSWORD=[redacted]"),
    ("my password is Tr0ub4dor&3, keep it safe", "my password is [redacted], keep it safe"),
    ('{"user": "ada", "password": "Xk9#mQ2$vL"}', '{"user": "ada", "password": "[redacted]"}'),
    ("the cvv is 937", "the cvv is [redacted]"),
])
def test_only_the_value_is_cut_and_the_label_stays(text, expected):
    assert secrets_redact(text).text == expected


@pytest.mark.parametrize("reference,literal", [
    ('password = request.form["password"]', 'password = "Lm4#qT9zR"'),
    ("api_key = os.environ['API_KEY']", "api_key = 'Q7fK2mXw9LpR4sT8vB3nC6yD'"),
    ("secret: ${{ secrets.JWT_SECRET }}", "secret: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
    ("password: String,", "password: hunter2xyz"),
    ("token = getToken(user)", "token = 'ghx7Kp2QmZ9vLw4RtY8nB3cD'"),
])
def test_a_labelled_reference_is_kept_and_a_labelled_literal_is_cut(reference, literal):
    assert secrets_redact(reference).text == reference
    assert secrets_redact(literal).found


def test_a_placeholder_or_published_example_is_no_secret_but_a_random_value_of_the_same_shape_is():
    assert not contains_secret("AKIAIOSFODNN7EXAMPLE")
    assert not contains_secret("const secretKey = 'your_secret_key';")
    assert not contains_secret("password: 'password123'")
    assert contains_secret("AKIA" + "Q3VZ7K2M9XWT4PLR")
    assert contains_secret("const secretKey = 'c9Xq2LmR7vTz4KpW8sNb';")


def test_kinds_name_what_was_found_never_the_value():
    assert secrets_redact("card 4111 1111 1111 1111.").kinds == ["card_number"]
    assert secrets_redact("wire it to DE89370400440532013000").kinds == ["iban"]
    assert secrets_redact("my password is Tr0ub4dor&3").kinds == ["password"]
    assert secrets_redact("My PIN is 4821").kinds == ["pin"]


def test_offsets_hold_when_a_character_lowercases_to_two():
    text = "İstanbul office: my password is Tr0ub4dor&3 and the door code is on the wall"
    assert secrets_redact(text).text == "İstanbul office: my password is [redacted] and the door code is on the wall"


_POOL = [k.text for k in KEEP] + [s.text for s in SECRETS]


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_POOL), min_size=1, max_size=6))
def test_a_message_of_several_parts_is_redacted_part_by_part_and_a_second_pass_changes_nothing(parts):
    joined = "\n\n".join(parts)
    once = secrets_redact(joined).text
    assert once == "\n\n".join(secrets_redact(p).text for p in parts)
    assert secrets_redact(once).text == once


def test_log_records_and_nested_values_are_redacted():
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "login with %s", ("password=s3cr3tP4ss",), None)
    assert SecretsLogFilter().filter(record)
    assert record.getMessage() == "login with password=[redacted]"
    plain = logging.LogRecord("t", logging.INFO, __file__, 1, "token = %s", ("request.headers['X-Token']",), None)
    SecretsLogFilter().filter(plain)
    assert plain.args == ("request.headers['X-Token']",)
    nested = {"a": ["my password is Tr0ub4dor&3", 3], "b": {"c": 'password = request.form["password"]'}}
    assert secrets_redacted(nested) == {"a": ["my password is [redacted]", 3],
                                        "b": {"c": 'password = request.form["password"]'}}
