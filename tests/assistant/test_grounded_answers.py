"""Grounded answers: a sentence claiming an action stands only when a tool call of the turn did it (checked in code),
the turn and its closing call see the standing profile, recall fills a budget, and the turn says which memories
the answer used."""
from __future__ import annotations

import pytest

from assistant.grounding import ON_RECORD, Grounding
from assistant.loop_types import ToolCallRecord
from assistant.react import LoopLimits, react_run
from assistant.tools import tool_actions
from infra.llm_chat import OpenAIChatModel

from .scripted_llm import answer, call, tool_step


def record(name: str, observation: dict | None = None, status: str = "ok", arguments: dict | None = None
           ) -> ToolCallRecord:
    return ToolCallRecord(id=f"c_{name}", name=name, arguments=arguments or {}, status=status,
                          observation=observation or {}, step=1)


RECALLED = record("recall", {"memories": [
    {"text": "Dana's destination is Newark."},
    {"text": "Dana needs a flight from SFO to Newark next Tuesday, under $400."}]})


def grounding(**kw) -> Grounding:
    return Grounding(actions_of=tool_actions, ignore=("Dana",), **kw)


# --- the check itself ---------------------------------------------------------------------------------------------

def test_a_claimed_search_only_memory_did_is_restated_from_the_record():
    g = grounding()
    out = g.text("I found a flight from SFO to Newark on Tuesday under $400. Keep aisle seats in mind.", [RECALLED])
    assert out == f"{ON_RECORD}a flight from SFO to Newark on Tuesday under $400. Keep aisle seats in mind."
    assert g.changes == [("I found a flight from SFO to Newark on Tuesday under $400.",
                          f"{ON_RECORD}a flight from SFO to Newark on Tuesday under $400.")]


def test_a_finding_framed_as_remembered_stands_after_recall():
    text = "I found in my notes that you are flying to Newark."
    assert grounding().text(text, [RECALLED]) == text


@pytest.mark.parametrize("sentence", ["I booked your flight to Newark.", "I've sent the itinerary to your email.",
                                      "Your seat has been changed to 14C.", "Your flight is booked.",
                                      "The assistant searched three airlines for fares."])
def test_claimed_actions_no_call_did_are_dropped(sentence):
    g = grounding()
    assert g.text(f"{sentence} You prefer aisle seats.", [RECALLED]) == "You prefer aisle seats."
    assert g.changes == [(sentence, "")]


def test_a_claim_repeated_by_the_closing_call_is_one_change():
    """The loop's answer and its closing call may both make the same claim: the turn reports it once."""
    g = grounding()
    for _ in range(2):
        assert g.text("I changed the destination to Newark.", []) == ""
    assert g.changes == [("I changed the destination to Newark.", "")]


def test_a_claim_without_its_action_keeps_the_assertion():
    assert grounding().text("I checked that you prefer aisle seats.", []) == "You prefer aisle seats."


@pytest.mark.parametrize("tool, sentence", [
    ("remember", "I've saved your aisle-seat preference."),
    ("set_goal", "I updated your goal to the Newark flight."),
    ("forget", "I deleted that memory."),
    ("book_flight", "I booked the 9:40 flight."),  # a client's tool: its name says what it does
    ("search_flights", "I found three flights under $400."),
])
def test_a_claim_a_successful_call_of_the_turn_made_good_stands(tool, sentence):
    call = record(tool, {"ok": True}, arguments={"goal": "The flight to Newark"} if tool == "set_goal" else None)
    assert grounding().text(sentence, [call]) == sentence


def test_a_claim_about_what_the_call_did_not_touch_is_dropped():
    """set_goal ran, but on NYC: an answer saying it set Newark claims what no call did."""
    g = grounding()
    set_nyc = record("set_goal", {"goal": "Fly SFO to NYC on Tuesday"}, arguments={"goal": "Fly SFO to NYC on Tuesday"})
    assert g.text("I updated your goal to the Newark flight. Anything else?", [set_nyc]) == "Anything else?"
    searched = record("search_flights", {"flights": [{"to": "Newark", "price": 350}]}, arguments={"to": "EWR"})
    assert g.text("I found a flight to Newark for $350, on Tuesday.", [searched]) == (
        "I found a flight to Newark for $350, on Tuesday.")  # the name is in what the search returned


def test_a_failed_or_refused_call_makes_no_claim_good():
    g = grounding()
    assert g.text("I booked the flight.", [record("book_flight", {"error": "sold out"}, status="error")]) == ""
    assert g.text("I saved your preference.", [record("remember", {"stored": False, "reason": "secret"})]) == ""


def test_negations_promises_and_abilities_claim_nothing():
    text = "I have not booked anything. I'll search once you confirm. I can send it later."
    assert grounding().text(text, []) == text


def test_the_answer_streamed_is_the_grounded_answer(llm):
    """Each sentence is checked before it goes out: the user never sees a claim the stored answer lacks."""
    llm.add(tool_step(call("lookup", {"q": "flight"})),
            answer("I found a flight to Newark. I booked it for you. Anything else?"))
    deltas: list[str] = []
    tools = [{"type": "function", "function": {"name": "lookup", "description": "search memory",
                                               "parameters": {"type": "object"}}}]
    result = react_run(messages=[{"role": "user", "content": "My flight?"}], tools=tools,
                       execute=lambda name, args: ("ok", {"memories": [{"text": "Dana flies to Newark."}]}),
                       model=OpenAIChatModel(), on_delta=deltas.append,
                       limits=LoopLimits(max_steps=4, wall_clock_seconds=30, max_calls_per_step=4,
                                         token_budget=8000, observation_tokens=500),
                       grounding=Grounding(actions_of=lambda name: {"recall"}))
    assert "".join(deltas) == result.content == f"{ON_RECORD}a flight to Newark. Anything else?"
    assert result.messages[-1]["content"] == result.content
