"""A sentence divides into statements where a new subject and its verb begin; a rewrite takes one out and keeps the
rest as it was."""
from __future__ import annotations

import pytest

from infra.clauses import statements, statements_rewrite


@pytest.mark.parametrize("sentence, expected", [
    ("My favourite colour is green and my favourite food is sushi.",
     ["My favourite colour is green", "my favourite food is sushi"]),
    ("Ada's favourite colour is green and Ada's favourite food is sushi.",
     ["Ada's favourite colour is green", "Ada's favourite food is sushi"]),
    ("I'm a nurse, and i live in Leeds.", ["I'm a nurse", "i live in Leeds"]),
    ("My favourite colour is green, my sister lives in Leeds; we meet on Sundays.",
     ["My favourite colour is green", "my sister lives in Leeds", "we meet on Sundays"]),
    ("I visited London and Paris is lovely.", ["I visited London", "Paris is lovely"]),
    # Words joined, a shared subject, a subordinate clause: one statement each.
    ("I like apples, pears, and plums.", ["I like apples, pears, and plums"]),
    ("I live in Berlin and work at Acme.", ["I live in Berlin and work at Acme"]),
    ("I moved to Berlin because my wife works there.", ["I moved to Berlin because my wife works there"]),
    ("I like my brothers and my sisters.", ["I like my brothers and my sisters"]),
    # A label belongs to the sentence.
    ("Goal: My favourite colour is green and my favourite food is sushi.",
     ["My favourite colour is green", "my favourite food is sushi"]),
])
def test_a_sentence_divides_where_a_new_subject_and_verb_begin(sentence, expected):
    assert statements(sentence) == expected


def colour(statement: str) -> bool:
    return "colour" in statement


@pytest.mark.parametrize("text, dropped, marked", [
    ("My favourite colour is green and my favourite food is sushi.", "My favourite food is sushi.",
     "[forgotten] and my favourite food is sushi."),
    ("Ada: My favourite colour is green and my favourite food is sushi.", "Ada: My favourite food is sushi.",
     "Ada: [forgotten] and my favourite food is sushi."),
    ("I eat sushi, and my favourite colour is green.", "I eat sushi.", "I eat sushi, and [forgotten]."),
    ("My favourite colour is green.", "", "[forgotten]"),
    ("Hi.\nMy favourite colour is green. I eat sushi.\n\nBye.", "Hi.\nI eat sushi.\n\nBye.",
     "Hi.\n[forgotten] I eat sushi.\n\nBye."),
    ("I eat sushi.", "I eat sushi.", "I eat sushi."),
])
def test_a_rewrite_takes_out_or_marks_one_statement_and_keeps_the_rest(text, dropped, marked):
    assert statements_rewrite(text, colour) == dropped
    assert statements_rewrite(text, colour, marker="[forgotten]") == marked
