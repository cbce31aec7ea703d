"""A model's note about a session keeps a sentence claiming an action only when a call of the session did that
action on what the sentence names; the calls are read from the session's messages, each result with its
arguments."""
from __future__ import annotations

import json

from context.grounded_notes import note_ground, tool_calls_done

TURNS = [{"role": "user", "content": "I need a flight from SFO to NYC next Tuesday."},
         {"role": "user", "content": "Actually, change the destination to Newark."},
         {"role": "assistant", "content": "Noted: Newark instead of NYC."}]


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_calls_pair_each_result_with_its_arguments_and_skip_errors():
    rows = [{"role": "assistant", "content": "", "tool_calls": [_call("c1", "set_goal", {"goal": "Fly to NYC"}),
                                                                 _call("c2", "book_flight", {"to": "Newark"})]},
            {"role": "tool", "name": "set_goal", "tool_call_id": "c1", "content": '{"ok": true}'},
            {"role": "tool", "name": "book_flight", "tool_call_id": "c2", "content": '{"error": "sold out"}'}]
    [(name, text)] = tool_calls_done(rows)
    assert name == "set_goal" and "NYC" in text and '{"ok": true}' in text


def test_a_claimed_update_to_what_no_call_set_is_dropped():
    note = "The user changed the destination to Newark. The assistant updated the goal to a flight to Newark."
    set_to_nyc = [("set_goal", '{"goal": "Find a flight from SFO to NYC next Tuesday"}')]
    text, dropped = note_ground(note, turns=TURNS, tools_done=set_to_nyc)
    assert text == "The user changed the destination to Newark."
    assert dropped == ["The assistant updated the goal to a flight to Newark."]
    set_to_newark = [*set_to_nyc, ("set_goal", '{"goal": "Find a flight from SFO to Newark next Tuesday"}')]
    assert note_ground(note, turns=TURNS, tools_done=set_to_newark) == (note, [])
