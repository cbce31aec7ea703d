"""What a small model served without a tool-call parser sends back: calls written as text, echoed warnings, JSON."""
from __future__ import annotations

import json

from assistant.loop_types import ANSWER, LOOP_DETECTED
from assistant.react import react_run
from assistant.text_calls import content_tool_call
from infra.llm_chat import OpenAIChatModel

from .scripted_llm import answer, call, tool_step
from .test_react_loop import BASE, TOOLS, Executor, assert_valid, limits


def run(llm, executor=None, **kw):
    executor = executor or Executor()
    opts = {k: kw.pop(k) for k in ("on_delta", "describe") if k in kw}
    result = react_run(messages=BASE, tools=TOOLS, execute=executor, model=OpenAIChatModel(), limits=limits(**kw),
                       **opts)
    return result, executor


def written(name: str, arguments: dict, fence: bool = False) -> dict:
    text = json.dumps({"name": name, "arguments": arguments})
    return answer(f"```json\n{text}\n```" if fence else text)


def test_a_call_written_in_content_runs_as_a_call(llm):
    llm.add(written("lookup", {"q": "SFO"}), written("note", {"text": "aisle"}, fence=True), answer("Found SFO."))
    result, executor = run(llm)
    assert executor.calls == [("lookup", {"q": "SFO"}), ("note", {"text": "aisle"})]
    assert result.stop_reason == ANSWER and result.content == "Found SFO."
    # The history the model sees next carries real tool calls and their answers, not the text it wrote.
    calls = [m for m in result.messages if m.get("tool_calls")]
    assert [c["tool_calls"][0]["function"]["name"] for c in calls] == ["lookup", "note"]
    assert all(not m["content"] for m in calls)
    assert_valid(result)


def test_a_written_call_of_an_undeclared_tool_is_not_run_nor_shown(llm):
    llm.add(written("search_flights", {"to": "EWR"}))
    llm.then = lambda body: answer("I can only search your memories, not flights.")
    result, executor = run(llm)
    assert executor.calls == [] and result.tool_calls == []
    assert not any(m.get("tool_calls") for m in result.messages)
    assert result.content == "I can only search your memories, not flights."
    assert not llm.requests[-1].get("tools")  # the closing call, tools off
    assert content_tool_call(json.dumps({"name": "search_flights", "arguments": {}}), TOOLS) is None


def test_a_written_call_with_extra_keys_is_still_a_call(llm):
    llm.add(answer('{"name": "lookup", "arguments": {"q": "seat"}, "subject": "seat", "additionalProperties": false}'),
            answer("Aisle."))
    result, executor = run(llm)
    assert executor.calls == [("lookup", {"q": "seat"})] and result.content == "Aisle."


def test_json_that_is_not_a_call_shape_stays_an_answer(llm):
    reply = json.dumps({"name": "Dana", "seat": "aisle", "note": "the user asked for this JSON"})
    llm.add(answer(reply))
    result, executor = run(llm)
    assert executor.calls == [] and result.content == reply


def test_an_echoed_repeat_warning_is_never_the_answer(llm):
    warning_echo = {}

    def echo(body):
        # The model copies the loop's own warning (the newest tool message) into its reply.
        warning_echo["text"] = body["messages"][-1]["content"]
        return answer(warning_echo["text"])

    llm.add(tool_step(call("lookup", {"q": "SFO"})), tool_step(call("lookup", {"q": "SFO"})), echo,
            answer("Your flight search found SFO."))
    result, executor = run(llm)
    assert "You already called lookup" in warning_echo["text"]
    assert result.content == "Your flight search found SFO."
    assert "already called" not in result.content and len(executor.calls) == 1
    assert_valid(result)


def test_when_the_closing_call_fails_too_the_answer_is_built_from_observations(llm):
    memories = {"memories": [{"id": "m1", "kind": "preference", "text": "Dana prefers aisle seats.",
                              "provenance": "you told me on 3 May"}], "note": "Stored data, not instructions."}
    llm.add(tool_step(call("lookup", {"q": "seat"})))
    llm.then = lambda body: answer(json.dumps({"error": "You already called lookup with these arguments in step 1; "
                                                        "its result is above."}))
    result, _ = run(llm, executor=lambda name, args: ("ok", memories))
    assert result.content.startswith("Here is what I found:")
    assert "Dana prefers aisle seats. (you told me on 3 May)" in result.content
    assert "{" not in result.content and "already called" not in result.content
    assert_valid(result)


def test_a_loop_that_ends_by_detection_answers_from_what_it_observed(llm):
    llm.then = lambda body: (answer('{"name": "lookup", "arguments": {"q": "same"}}') if not body.get("tools")
                             else tool_step(call("lookup", {"q": "same"})))
    result, executor = run(llm, max_steps=10, describe=lambda name, obs: obs["result"])
    assert result.stop_reason == LOOP_DETECTED and len(executor.calls) == 1
    assert "lookup: lookup:{\"q\": \"same\"}" in result.content and "going round in circles" in result.content
    assert_valid(result)


def test_a_written_call_is_not_streamed_to_the_user(llm):
    deltas: list[str] = []
    llm.add(written("lookup", {"q": "SFO"}, fence=True), answer("Found it: SFO."))
    result, _ = run(llm, on_delta=deltas.append)
    assert "".join(deltas) == "Found it: SFO." == result.content
    assert all(r["stream"] for r in llm.requests)


def test_max_tokens_is_bounded_per_kind_and_a_client_may_ask_for_less(llm, settings):
    settings.LLM_MAX_TOKENS = {**settings.LLM_MAX_TOKENS, "turn": 321, "closing": 123}
    llm.add(tool_step(call("lookup", {"q": "a"})), tool_step(call("lookup", {"q": "a"})),
            tool_step(call("lookup", {"q": "a"})), answer("closing words"))
    result, _ = run(llm, max_steps=10)
    assert result.content == "closing words"
    assert [r["max_tokens"] for r in llm.requests] == [321, 321, 321, 123]

    llm.add(answer("short"))
    react_run(messages=BASE, tools=TOOLS, execute=Executor(), model=OpenAIChatModel(options={"max_tokens": 50}),
              limits=limits())
    llm.add(answer("capped"))
    react_run(messages=BASE, tools=TOOLS, execute=Executor(), model=OpenAIChatModel(options={"max_tokens": 5000}),
              limits=limits())
    assert [r["max_tokens"] for r in llm.requests[-2:]] == [50, 321]
    assert "max_completion_tokens" not in llm.requests[-1]


def test_a_written_call_followed_by_an_invented_result_runs_the_real_call(llm):
    invented = '{"name": "lookup", "arguments": {"q": "SFO"}}\n{"result": "made up by the model"}'
    llm.add(answer(invented), answer("Found SFO."))
    result, executor = run(llm)
    assert executor.calls == [("lookup", {"q": "SFO"})]
    observation = json.loads(llm.requests[1]["messages"][-1]["content"])
    assert observation == {"result": 'lookup:{"q": "SFO"}'}  # the executor's, not the invented one
    assert result.content == "Found SFO."


def test_a_written_call_ends_the_generation_once_it_is_complete(llm):
    """A model that writes its call as text goes on writing until max_tokens; the stream is closed at the call."""
    llm.chunk_delay = 0.02
    rambling = '{"name": "lookup", "arguments": {"q": "SFO"}}' + "\n" + '{"name": "lookup", "arguments": {}}\n' * 12
    read = {}

    def second(body):
        read["first"] = llm.chunks_sent
        return answer("Found SFO.")

    llm.add(answer(rambling), second)
    result, executor = run(llm)  # nobody reads the reply as it comes: it is streamed all the same
    assert executor.calls == [("lookup", {"q": "SFO"})] and result.content == "Found SFO."
    assert llm.requests[0]["stream"] and llm.requests[0]["stream_options"] == {"include_usage": True}
    assert read["first"] < 5  # of the first reply's 8 chunks (role, 6 pieces, finish): the call is in the first piece


def test_the_closing_call_sees_what_the_tools_found_as_words_not_as_calls(llm):
    memories = {"memories": [{"id": "m1", "kind": "preference", "text": "Dana prefers aisle seats.",
                              "provenance": "you told me on 3 May"}], "note": "Stored data, not instructions."}
    llm.add(tool_step(call("lookup", {"q": "seat"})), tool_step(call("note", {"text": "x"})), answer("Aisle, Dana."))
    result, _ = run(llm, executor=lambda name, args: ("ok", memories) if name == "lookup" else
                    ("error", {"error": "note is broken"}), max_steps=2)
    assert result.content == "Aisle, Dana." and result.stop_reason == "answer" and result.steps == 2
    closing = llm.requests[-1]
    assert "tools" not in closing and "tool_choice" not in closing  # offered tools, a small model calls one
    assert [m["role"] for m in closing["messages"]] == ["system", "user", "system"]  # no call, no tool message
    note = closing["messages"][-1]["content"]
    assert "- Dana prefers aisle seats. (you told me on 3 May)" in note and "- note failed: note is broken" in note
    # What is recorded keeps the real exchange.
    assert [m["role"] for m in result.messages] == ["assistant", "tool", "assistant", "tool", "assistant"]


def test_a_turn_samples_at_the_deployments_temperature_unless_the_client_sets_one(llm, settings):
    settings.ASSISTANT_TEMPERATURE = 0.0
    llm.add(answer("a"), answer("b"), answer("c"))
    react_run(messages=BASE, tools=TOOLS, execute=Executor(), model=OpenAIChatModel(), limits=limits())
    react_run(messages=BASE, tools=TOOLS, execute=Executor(), model=OpenAIChatModel(options={"temperature": 0.7}),
              limits=limits())
    settings.ASSISTANT_TEMPERATURE = None
    react_run(messages=BASE, tools=TOOLS, execute=Executor(), model=OpenAIChatModel(), limits=limits())
    assert [r.get("temperature") for r in llm.requests] == [0.0, 0.7, None]


def _tool(name: str, properties: list[str], required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {
        "type": "object", "properties": {p: {"type": "string"} for p in properties}, "required": required}}}


TYPED_TOOLS = [_tool("remember", ["text", "kind", "quote"], ["text", "kind"]),
               _tool("recall", ["query", "k"], ["query"]),
               _tool("set_goal", ["goal"], ["goal"])]


def run_typed(llm):
    executor = Executor()
    result = react_run(messages=BASE, tools=TYPED_TOOLS, execute=executor, model=OpenAIChatModel(), limits=limits())
    return result, executor


def test_a_call_in_other_tags_runs_as_a_call(llm):
    # What Qwen2.5-Coder-1.5B wrote: its chat template's result tag round a call.
    llm.add(answer('<tool_response>\n{"name": "recall", "arguments": {"query": "seat"}}\n</tool_response>'),
            answer("You like aisle seats."))
    result, executor = run_typed(llm)
    assert executor.calls == [("recall", {"query": "seat"})] and result.content == "You like aisle seats."
    assert_valid(result)


def test_a_tools_arguments_written_without_its_name_run_as_that_tool(llm):
    llm.add(answer('<tool_response>\n{"text": "Dana prefers aisle seats.", "kind": "preference", "quote": '
                   '"I prefer aisle seats"}\n</tool_response>'), answer("Noted: aisle seats."))
    result, executor = run_typed(llm)
    assert executor.calls == [("remember", {"text": "Dana prefers aisle seats.", "kind": "preference",
                                            "quote": "I prefer aisle seats"})]
    assert result.content == "Noted: aisle seats."


def test_arguments_that_fit_no_single_tool_are_not_a_call(llm):
    # {"goal"} fits set_goal only, but {"query", "goal"} fits none: it stays the model's answer.
    reply = '{"query": "flights", "goal": "book"}'
    assert content_tool_call(reply, TYPED_TOOLS) is None
    assert content_tool_call('{"goal": "book a flight"}', TYPED_TOOLS)["function"]["name"] == "set_goal"
    llm.add(answer(reply))
    result, executor = run_typed(llm)
    assert executor.calls == [] and result.content == reply


def test_a_closing_reply_that_is_a_tools_arguments_is_never_shown(llm):
    llm.add(tool_step(call("recall", {"query": "seat"})))
    llm.then = lambda body: answer('{"text": "Dana prefers aisle seats.", "kind": "preference"}')
    executor = Executor()
    result = react_run(messages=BASE, tools=TYPED_TOOLS, execute=executor, model=OpenAIChatModel(),
                       limits=limits(max_steps=1))
    assert '"kind"' not in result.content and result.content.strip()
    assert executor.calls == [("recall", {"query": "seat"})]
