"""The ReAct loop on its own: a scripted model over HTTP (respx), tools recorded by a stand-in executor."""
from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from assistant.history import fit_to_budget, history_problems, history_repair
from assistant.loop_types import ANSWER, CANCELLED, LLM_ERROR, LOOP_DETECTED, MAX_STEPS, TIMEOUT
from assistant.react import LoopLimits, react_run
from assistant.text_calls import parse_arguments
from infra.errors import ServiceUnavailable
from infra.llm_chat import OpenAIChatModel

from .scripted_llm import answer, call, tool_step

TOOLS = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
         for n in ("lookup", "note")]
BASE = [{"role": "system", "content": "You help."}, {"role": "user", "content": "Find my flight."}]


class Executor:
    def __init__(self, fail: set[str] = frozenset()):
        self.calls: list[tuple[str, dict]] = []
        self.fail = fail

    def __call__(self, name, arguments):
        self.calls.append((name, arguments))
        if name in self.fail:
            return "error", {"error": f"{name} is broken"}
        return "ok", {"result": f"{name}:{json.dumps(arguments, sort_keys=True)}"}


def limits(**kw) -> LoopLimits:
    values = dict(max_steps=5, wall_clock_seconds=30, max_calls_per_step=8, token_budget=8000, observation_tokens=500)
    values.update(kw)
    return LoopLimits(**values)


def run(llm, executor=None, base=BASE, **kw):
    executor = executor or Executor()
    opts = {k: kw.pop(k) for k in ("on_delta", "cancel") if k in kw}
    result = react_run(messages=base, tools=TOOLS, execute=executor, model=OpenAIChatModel(), limits=limits(**kw),
                       **opts)
    return result, executor


def assert_valid(result):
    assert history_problems(BASE + result.messages) == []
    assert result.messages[-1]["role"] == "assistant" and not result.messages[-1].get("tool_calls")


# --- argument parsing and history -----------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ('{"q": "x"}', {"q": "x"}),
    ("", {}),
    ("```json\n{\"q\": \"x\"}\n```", {"q": "x"}),
    ('{"q": "x",}', {"q": "x"}),
    ("{'q': 'x', 'n': None}", {"q": "x", "n": None}),
    (json.dumps(json.dumps({"q": "x"})), {"q": "x"}),
    ('Sure: {"q": "x"} there you go', {"q": "x"}),
    ("{q: x", {"q": "x"}),  # unquoted key, cut off
    ('{"query": "flight', {"query": "flight"}),  # cut off by max_tokens
])
def test_parse_arguments_forgives_common_mistakes(raw, expected):
    assert parse_arguments(raw) == (expected, None)


@pytest.mark.parametrize("raw", ["[1, 2]", "just words", '"a string"', "42"])
def test_parse_arguments_reports_what_it_cannot_read(raw):
    value, error = parse_arguments(raw)
    assert value is None and "not a JSON object" in error


def test_history_repair_drops_orphans_and_unanswered_calls():
    messages = [
        {"role": "tool", "tool_call_id": "orphan", "content": "x"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "checking", "tool_calls": [call("lookup", {}, "a"), call("note", {}, "b")]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
        {"role": "assistant", "content": None, "tool_calls": [call("lookup", {}, "c")]},
        {"role": "user", "content": "again"},
    ]
    assert len(history_problems(messages)) == 3
    repaired = history_repair(messages)
    assert history_problems(repaired) == []
    assert [m["role"] for m in repaired] == ["user", "assistant", "tool", "user"]
    assert [c["id"] for c in repaired[1]["tool_calls"]] == ["a"]


def test_compression_touches_only_the_loop_copy():
    big = "word " * 400
    loop = [{"role": "assistant", "content": None, "tool_calls": [call("lookup", {}, "a")]},
            {"role": "tool", "tool_call_id": "a", "content": big},
            {"role": "assistant", "content": None, "tool_calls": [call("lookup", {"q": 1}, "b")]},
            {"role": "tool", "tool_call_id": "b", "content": big}]
    window = fit_to_budget(BASE, loop, budget=600)
    assert window[3]["content"].endswith("[compressed]")  # the older observation went first
    assert window[5]["content"] == big  # the newest one stayed whole: the budget was met without it
    assert loop[1]["content"] == big  # what gets recorded is untouched
    assert window[:2] == BASE


# --- the loop against a scripted model ------------------------------------------------------------------------------

def test_parallel_tool_calls_are_all_answered_in_one_step(llm):
    llm.add(tool_step(call("lookup", {"q": "SFO"}, "c1"), call("lookup", {"q": "NYC"}, "c2"), call("note", {}, "c3")),
            answer("Found both."))
    result, executor = run(llm)
    assert result.stop_reason == ANSWER and result.content == "Found both." and result.steps == 2
    assert [c[0] for c in executor.calls] == ["lookup", "lookup", "note"]
    second = llm.requests[1]["messages"]
    assert [m.get("tool_call_id") for m in second if m["role"] == "tool"] == ["c1", "c2", "c3"]
    assert_valid(result)


def test_repeating_model_is_stopped_by_loop_detection(llm):
    llm.add(*[tool_step(call("lookup", {"q": "same"})) for _ in range(3)])
    llm.then = lambda body: answer("Best I can do.") if not body.get("tools") else tool_step(
        call("lookup", {"q": "same"}))
    result, executor = run(llm, max_steps=10)
    assert result.stop_reason == LOOP_DETECTED
    assert len(executor.calls) == 1  # the repeated call never ran again
    assert result.steps == 3 and len(llm.requests) == 4  # 3 tool steps, then one closing call without tools
    assert not llm.requests[-1].get("tools")
    assert result.content == "Best I can do."
    assert [c.status for c in result.tool_calls] == ["ok", "repeated", "repeated"]
    assert_valid(result)


def test_tool_error_is_an_observation_the_model_recovers_from(llm):
    def recover(body):
        observation = json.loads(body["messages"][-1]["content"])
        assert observation == {"error": "note is broken"}
        return tool_step(call("lookup", {"q": "instead"}))

    llm.add(tool_step(call("note", {"x": 1})), recover, answer("Recovered."))
    result, executor = run(llm, executor=Executor(fail={"note"}))
    assert result.stop_reason == ANSWER and result.content == "Recovered."
    assert [c.status for c in result.tool_calls] == ["error", "ok"]
    assert_valid(result)


def test_unreadable_arguments_become_an_error_observation(llm):
    llm.add(tool_step(call("lookup", "look up SFO please", "bad")), answer("Sorry."))
    result, executor = run(llm)
    assert executor.calls == []
    tool_message = next(m for m in llm.requests[1]["messages"] if m.get("tool_call_id") == "bad")
    assert "not a JSON object" in tool_message["content"]
    assert_valid(result)


def test_max_steps_ends_with_the_answer_of_a_call_without_tools(llm):
    counter = iter(range(100))
    llm.then = lambda body: (answer("Partial: SFO checked, NYC not yet.") if not body.get("tools")
                             else tool_step(call("lookup", {"n": next(counter)})))
    result, executor = run(llm, max_steps=3)
    # The steps were spent and the closing call answered: the turn ended in an answer (the model says what is open).
    assert result.stop_reason == ANSWER and not result.partial and result.steps == 3
    assert result.content == "Partial: SFO checked, NYC not yet."
    assert len(executor.calls) == 3 and len(llm.requests) == 4
    assert "still unfinished" in llm.requests[-1]["messages"][-1]["content"]
    assert_valid(result)


def test_one_tool_step_then_the_answer_is_an_answer_not_a_stop_at_the_step_limit(llm):
    """The local model's profile (ASSISTANT_MAX_STEPS=1): a turn that uses a tool spends its one step on it, and
    the call without tools answers. The demo printed "(stopped: max_steps)" after each such answer."""
    llm.add(tool_step(call("note", {"text": "aisle seats"})), answer("Noted: aisle seats."))
    result, executor = run(llm, max_steps=1)
    assert executor.calls == [("note", {"text": "aisle seats"})]
    assert result.content == "Noted: aisle seats." and result.stop_reason == ANSWER and result.steps == 1
    assert_valid(result)


def test_the_step_limit_is_the_reason_when_no_answer_came_of_it(llm):
    llm.add(tool_step(call("lookup", {"q": "SFO"})), answer('{"name": "lookup", "arguments": {"q": "NYC"}}'))
    result, _ = run(llm, max_steps=1)
    assert result.stop_reason == MAX_STEPS and result.partial
    assert "limit of steps" in result.content
    assert_valid(result)


def test_calls_beyond_the_per_step_cap_are_answered_not_run(llm):
    llm.add(tool_step(*[call("lookup", {"n": i}) for i in range(4)]), answer("ok"))
    result, executor = run(llm, max_calls_per_step=2)
    assert len(executor.calls) == 2
    assert [c.status for c in result.tool_calls] == ["ok", "ok", "skipped", "skipped"]
    assert_valid(result)


def test_wall_clock_limit_stops_the_loop(llm):
    def slow(body):
        time.sleep(0.3)
        return tool_step(call("lookup", {"t": time.time()}))

    llm.then = slow
    result, executor = run(llm, max_steps=50, wall_clock_seconds=0.5)
    assert result.stop_reason == TIMEOUT
    assert len(llm.requests) <= 3 and all(r.get("tools") for r in llm.requests)
    assert "ran out of time" in result.content  # no time left for a closing call: the fallback answer
    assert_valid(result)


def test_first_model_failure_raises_later_failure_gives_partial_answer(llm):
    llm.add(httpx.Response(503, json={"error": {"message": "down"}}))
    with pytest.raises(ServiceUnavailable):
        run(llm)

    llm.add(tool_step(call("lookup", {})), httpx.Response(503, json={"error": {"message": "down"}}))
    result, _ = run(llm)
    assert result.stop_reason == LLM_ERROR and "stopped responding" in result.content
    assert_valid(result)


def test_loop_messages_are_compressed_near_the_budget(llm):
    big = {"blob": "data " * 600}
    llm.add(tool_step(call("lookup", {"n": 1})), tool_step(call("lookup", {"n": 2})), answer("done"))
    result, _ = run(llm, executor=lambda name, args: ("ok", big), token_budget=900, observation_tokens=700)
    last = llm.requests[-1]["messages"]
    tool_contents = [m["content"] for m in last if m["role"] == "tool"]
    assert tool_contents[0].endswith("[compressed]")
    assert not any(m["content"].endswith("[compressed]") for m in result.messages if m["role"] == "tool")
    assert_valid(result)


def test_streaming_deltas_and_streamed_tool_calls(llm):
    llm.add(tool_step(call("lookup", {"q": "aisle seats"}, "s1"), content="Let me check. "),
            answer("You like aisle seats."))
    deltas = []
    result, executor = run(llm, on_delta=deltas.append)
    assert executor.calls == [("lookup", {"q": "aisle seats"})]  # arguments reassembled from streamed pieces
    assert "".join(deltas) == "Let me check. You like aisle seats."
    assert result.content == "You like aisle seats."
    assert all(r.get("stream") for r in llm.requests)
    assert_valid(result)


def test_cancel_stops_reading_the_model_stream(llm):
    llm.chunk_delay = 0.05
    llm.add(answer("one two three four five six seven eight nine ten " * 3))
    cancel = threading.Event()
    deltas = []

    def on_delta(text):
        deltas.append(text)
        cancel.set()  # the client went away after the first piece

    result, _ = run(llm, on_delta=on_delta, cancel=cancel)
    assert result.stop_reason == CANCELLED
    assert llm.chunks_sent < 6  # generation was not read to the end
    assert_valid(result)
