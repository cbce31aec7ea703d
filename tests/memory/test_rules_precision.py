"""Without a model, the rules distil only what a message states plainly in the first person; everything else stays
the user's own words (the episode). A complaint is not a fact, a request for help is not a goal, a feeling is not a
habit, a question or a supposition states nothing, and chatter is no session note."""
from __future__ import annotations

import pytest

from context.session_notes import extractive_note
from memory.extraction.rules import rules_extract
from memory.sources import SourceMessage


def distilled(text: str) -> list[tuple[str, str]]:
    return [(c.kind, c.text) for c in rules_extract(text, who="Sam") if c.kind != "event"]


@pytest.mark.parametrize("text", [
    # A complaint about a problem: the user's verdict on the state of things, not a lasting fact about them.
    "I've checked it twice and my template path is correct, but Django still raises TemplateNotFound.",
    "My template path is correct but the page still fails.",
    # A subordinate clause states nothing on its own.
    "I'm not sure whether my config file is the problem.",
    "I think my settings module is somewhere else.",
    # Questions and suppositions.
    "Is my booking still on the waitlist?",
    "If my flight is cancelled, book me on the next one.",
    "Do you think I need to rewrite the whole module?",
    # What the user wants from this conversation, not in their life.
    "I need help with the implementation details.",
    "I want to make sure I am doing this correctly.",
    "I want you to explain the error message.",
    # Feelings and thoughts, not habits.
    "I always feel like I could write a whole movie.",
    "I never want to go through this again.",
    "I always thought she would move back home.",
])
def test_the_rules_distil_nothing_from_what_is_not_stated_plainly(text):
    assert distilled(text) == []


@pytest.mark.parametrize("text, expected", [
    ("My favourite band is Radiohead.", ("fact", "Sam's favourite band is Radiohead.")),
    ("Oh, and my sister is a nurse in Leeds.", ("fact", "Sam's sister is a nurse in Leeds.")),
    ("By the way, my dog's name is Max.", ("fact", "Sam's dog's name is Max.")),
    ("I want to open a bakery next year.", ("goal", "Sam wants to open a bakery next year.")),
    ("I need to renew my passport before March.", ("goal", "Sam needs to renew Sam's passport before March.")),
    ("I always take the train to work.", ("preference", "Sam always takes the train to work.")),
    ("I prefer aisle seats.", ("preference", "Sam prefers aisle seats.")),
])
def test_plain_first_person_statements_are_still_distilled(text, expected):
    assert expected in distilled(text)


def test_a_request_in_a_questions_form_still_names_its_slots():
    found = distilled("Could you find me a flight from Lisbon to Berlin under $300?")
    assert ("fact", "Sam's origin is Lisbon.") in found and ("fact", "Sam's destination is Berlin.") in found
    assert ("fact", "Sam's budget is at most $300.") in found


def turn(i: int, role: str, text: str) -> SourceMessage:
    return SourceMessage(id=f"m{i}", role=role, speaker="Joanna" if role == "user" else "Nate", content=text)


def test_a_note_line_names_a_detail_never_chatter():
    turns = [
        turn(1, "user", "Crazy things happened to me this week! Honestly it has been so much going on lately."),
        turn(2, "assistant", "That sounds like a wild experience. I am so happy for you, that is amazing news."),
        turn(3, "user", "I finally signed up for the pottery class at the Riverside studio on Thursdays. It starts "
                        "next week and I already bought an apron, some clay tools and a sketchbook for the designs."),
        turn(4, "assistant", "Pottery is a lovely way to unwind after work. Good luck with your first class there."),
    ]
    lines = [line.text for line in extractive_note(turns, ignore=("Joanna", "Nate"))]
    assert any("pottery class at the Riverside studio" in line for line in lines)
    for chatter in ("Crazy things happened", "so much going on", "wild experience", "amazing news"):
        assert not any(chatter in line for line in lines), lines
