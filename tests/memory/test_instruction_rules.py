"""Standing instructions to the assistant become procedures (the profile's first lines); one-off requests, habits
and set phrases do not."""
from __future__ import annotations

import pytest

from memory.extraction.rules import instruction_of, rules_extract


@pytest.mark.parametrize("sentence", [
    "From now on, always answer in metric units.",
    "Please use type hints in every Python snippet you write for me.",
    "Keep your answers short unless I ask for detail.",
    "Whenever you propose code, include a test for it.",
    "Never suggest a paid service without a free alternative.",
    "Write every date as ISO 8601.",
])
def test_standing_instructions_are_procedures(sentence):
    found = [c for c in rules_extract(sentence, who="Ada") if c.kind == "procedure"]
    assert len(found) == 1
    assert found[0].text == f"Ada asked the assistant: {sentence}"
    assert found[0].subject.startswith("instruction: ")


@pytest.mark.parametrize("sentence", [
    "Write a Python function that validates an invoice.",  # a one-off request: no standing scope
    "I always take the train to work.",  # a habit: it has a subject
    "Never mind, it works now.",
    "Always a pleasure talking to you!",
    "Show me the logs.",
    "Keep going and never give up!",  # encouragement between people: nothing about what the assistant produces
    "Don't let anything stop you.",
    "Never had a chance to visit it.",
    "Always here to help.",
])
def test_one_off_requests_habits_and_set_phrases_are_not_instructions(sentence):
    assert instruction_of(sentence) is None
    assert not [c for c in rules_extract(sentence, who="Ada") if c.kind == "procedure"]


@pytest.mark.parametrize("sentence, goal", [
    # a name set off by commas names what the goal is about: it stays
    ("I want to work on improving my old area, West County, too.", "John wants to work on improving John's old "
                                                                   "area, West County."),
    # a name after the last comma is the person spoken to: it goes, as does what follows a plain comma
    ("I want to open a dance studio, Gina.", "John wants to open a dance studio."),
    ("I want to visit Porto, it looks lovely.", "John wants to visit Porto."),
])
def test_a_goal_keeps_a_name_set_off_by_commas_and_drops_the_person_spoken_to(sentence, goal):
    assert [c.text for c in rules_extract(sentence, who="John") if c.kind == "goal"] == [goal]
