"""A client's own tools through /v1/chat/completions (the official openai client against the live server): offered to
the model beside the memory tools, their calls returned to the client, the client's results continuing the turn."""
from __future__ import annotations

import json

import openai
import pytest

from sessions.models import Message

from .conftest import client_for
from .scripted_llm import answer, call, cut, tool_step

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CLOCK = {"type": "function", "function": {"name": "local_time", "description": "The time in a city.",
                                          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def offered(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def stored(session_id) -> list[tuple]:
    return [(m.role, m.content, [c["function"]["name"] for c in m.tool_calls], m.tool_call_id)
            for m in Message.objects.unscoped().filter(session_id=session_id).order_by("seq")]


def test_a_client_tool_call_comes_back_and_its_result_continues_the_turn(server, llm, alice):
    llm.add(tool_step(call("get_weather", {"city": "Paris"}, "call_w1")), answer("Sunny and 24°C in Paris."))
    client = client_for(server, alice)
    raw = client.chat.completions.with_raw_response.create(model="continuum", user="ada", messages=ASK,
                                                           tools=[WEATHER])
    first = raw.parse()
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [
        ("call_w1", "get_weather", {"city": "Paris"})]
    # The model was offered the client's tool beside the memory tools, as the client defined it.
    assert set(offered(llm.requests[0])) >= {"get_weather", "recall", "remember"}
    assert WEATHER in llm.requests[0]["tools"]

    second = client.chat.completions.create(model="continuum", user="ada", tools=[WEATHER], messages=[
        *ASK, choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_w1", "content": '{"sky": "sunny", "celsius": 24}'}])
    assert second.choices[0].message.content == "Sunny and 24°C in Paris."
    assert second.choices[0].finish_reason == "stop" and not second.choices[0].message.tool_calls
    # The model went on from its own call and the client's result, after the question (asked once).
    sent = llm.requests[1]["messages"]
    assert [m["role"] for m in sent[-3:]] == ["user", "assistant", "tool"]
    assert sent[-3]["content"] == ASK[0]["content"] and sent[-1]["tool_call_id"] == "call_w1"
    assert sent[-1]["content"] == '{"sky": "sunny", "celsius": 24}'
    assert [m["content"] for m in sent].count(ASK[0]["content"]) == 1
    assert stored(raw.headers["X-Session-Id"]) == [
        ("user", ASK[0]["content"], [], ""), ("assistant", "", ["get_weather"], ""),
        ("tool", '{"sky": "sunny", "celsius": 24}', [], "call_w1"), ("assistant", "Sunny and 24°C in Paris.", [], "")]


def test_memory_tools_run_server_side_beside_a_client_call(server, llm, alice):
    llm.add(tool_step(call("recall", {"query": "home city"}, "call_m1"), call("get_weather", {"city": "Paris"},
                                                                               "call_w2")),
            answer("Sunny in Paris."))
    client = client_for(server, alice)
    raw = client.chat.completions.with_raw_response.create(model="continuum", user="ada", messages=ASK,
                                                           tools=[WEATHER])
    message = raw.parse().choices[0].message
    assert [c.id for c in message.tool_calls] == ["call_w2"]  # the memory call is not the client's to run
    session_id = raw.headers["X-Session-Id"]
    assert ("tool", "call_m1") in [(r, cid) for r, _, _, cid in stored(session_id)]
    client.chat.completions.create(model="continuum", user="ada", tools=[WEATHER], messages=[
        *ASK, message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": "call_w2", "content": "sunny"}])
    sent = llm.requests[1]["messages"]
    step = next(m for m in sent if m["role"] == "assistant" and m.get("tool_calls"))
    assert [c["id"] for c in step["tool_calls"]] == ["call_m1", "call_w2"]  # the model's step as it made it
    assert {m["tool_call_id"] for m in sent if m["role"] == "tool"} == {"call_m1", "call_w2"}


def test_a_streamed_client_tool_call(server, llm, alice):
    llm.add(tool_step(call("get_weather", {"city": "Paris"}, "call_s1")))
    chunks = list(client_for(server, alice).chat.completions.create(
        model="continuum", user="ada", messages=ASK, tools=[WEATHER], stream=True))
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(tc.index, tc.id, tc.function.name, json.loads(tc.function.arguments)) for tc in calls] == [
        (0, "call_s1", "get_weather", {"city": "Paris"})]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_parallel_client_calls_come_back_together_unless_the_client_says_no(server, llm, alice):
    two = tool_step(call("get_weather", {"city": "Paris"}, "call_p1"), call("local_time", {"city": "Paris"},
                                                                            "call_p2"))
    llm.add(two, two)
    client = client_for(server, alice)
    both = client.chat.completions.create(model="continuum", user="ada", messages=ASK, tools=[WEATHER, CLOCK])
    assert [c.id for c in both.choices[0].message.tool_calls] == ["call_p1", "call_p2"]
    one = client.chat.completions.create(model="continuum", user="bea", messages=ASK, tools=[WEATHER, CLOCK],
                                         parallel_tool_calls=False)
    assert [c.id for c in one.choices[0].message.tool_calls] == ["call_p1"]
    assert llm.requests[1]["parallel_tool_calls"] is False and "parallel_tool_calls" not in llm.requests[0]


def test_tool_choice_none_named_and_required(server, llm, alice):
    llm.then = lambda body: (tool_step(call("get_weather", {"city": "Paris"})) if "get_weather" in offered(body)
                             else answer("No tools for this one."))
    client = client_for(server, alice)
    none = client.chat.completions.create(model="continuum", user="ada", messages=ASK, tools=[WEATHER],
                                          tool_choice="none")
    assert none.choices[0].finish_reason == "stop" and not none.choices[0].message.tool_calls
    assert "get_weather" not in offered(llm.requests[0]) and "recall" in offered(llm.requests[0])

    named = client.chat.completions.create(model="continuum", user="bea", messages=ASK, tools=[WEATHER, CLOCK],
                                           tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert named.choices[0].finish_reason == "tool_calls"
    # A named choice is the one tool offered, required: servers without named choices force it too.
    assert offered(llm.requests[1]) == ["get_weather"] and llm.requests[1]["tool_choice"] == "required"

    client.chat.completions.create(model="continuum", user="cy", messages=ASK, tools=[WEATHER],
                                   tool_choice="required")
    assert llm.requests[2]["tool_choice"] == "required" and "recall" in offered(llm.requests[2])


def test_a_client_tool_named_like_a_memory_tool_keeps_its_name(server, llm, alice):
    mine = {"type": "function", "function": {"name": "recall", "description": "Search the user's files.",
                                             "parameters": {"type": "object", "properties": {}}}}
    llm.add(tool_step(call("memory_recall", {"query": "files"}, "call_c1")), tool_step(call("recall", {}, "call_c2")))
    result = client_for(server, alice).chat.completions.create(model="continuum", user="ada", messages=ASK,
                                                               tools=[mine])
    assert [c.function.name for c in result.choices[0].message.tool_calls] == ["recall"]
    tools = {t["function"]["name"]: t["function"]["description"] for t in llm.requests[0]["tools"]}
    assert tools["recall"] == "Search the user's files." and tools["memory_recall"].startswith("Search what is")
    # The renamed memory tool ran here: its result was in the model's second call.
    assert any(m.get("tool_call_id") == "call_c1" and "memories" in m["content"]
               for m in llm.requests[1]["messages"] if m["role"] == "tool")


def test_a_call_the_small_model_writes_as_text_reaches_the_client_as_a_call(server, llm, alice):
    llm.add(answer('{"name": "get_weather", "arguments": {"city": "Paris"}}'))
    result = client_for(server, alice).chat.completions.create(model="continuum", user="ada", messages=ASK,
                                                               tools=[WEATHER])
    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    assert [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [
        ("get_weather", {"city": "Paris"})]


def test_results_for_a_conversation_begun_elsewhere_become_the_turns_first_steps(server, llm, alice):
    llm.add(answer("It is sunny."))
    client = client_for(server, alice)
    raw = client.chat.completions.with_raw_response.create(model="continuum", user="ada", tools=[WEATHER], messages=[
        *ASK, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "ext_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": "ext_1", "content": "sunny"}])
    assert raw.parse().choices[0].message.content == "It is sunny."
    assert [m["role"] for m in llm.requests[0]["messages"][-3:]] == ["user", "assistant", "tool"]
    assert [(r, cid) for r, _, _, cid in stored(raw.headers["X-Session-Id"])] == [
        ("user", ""), ("assistant", ""), ("tool", "ext_1"), ("assistant", "")]


def test_finish_reason_length_when_the_answer_was_cut(server, llm, alice):
    llm.add(cut("The answer runs on and"), cut("The answer runs on and"))
    client = client_for(server, alice)
    plain = client.chat.completions.create(model="continuum", user="ada", messages=ASK, max_tokens=5)
    assert plain.choices[0].finish_reason == "length"
    chunks = list(client.chat.completions.create(model="continuum", user="bea", messages=ASK, stream=True))
    assert chunks[-1].choices[0].finish_reason == "length"


def test_stream_usage_comes_alone_in_a_last_chunk_only_when_asked(server, llm, alice):
    llm.then = answer("Sunny.")
    client = client_for(server, alice)
    plain = list(client.chat.completions.create(model="continuum", user="ada", messages=ASK, stream=True))
    assert all(c.usage is None for c in plain) and all(c.choices for c in plain)
    asked = list(client.chat.completions.create(model="continuum", user="ada", messages=ASK, stream=True,
                                                stream_options={"include_usage": True}))
    assert asked[-1].choices == [] and asked[-1].usage.total_tokens > 0
    assert asked[-2].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in asked[:-1])


# --- refused before any model call ----------------------------------------------------------------------------------

def _post(client, tenant, body):
    return client.post("/v1/chat/completions", data=json.dumps(body), content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {tenant.plain_key}")


@pytest.mark.parametrize("extra, param", [
    ({"tools": [WEATHER, WEATHER]}, "tools"),
    ({"tools": [{"type": "retrieval"}]}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "has space"}}]}, "tools"),
    ({"tools": "get_weather"}, "tools"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "local_time"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [WEATHER], "parallel_tool_calls": "no"}, "parallel_tool_calls"),
    ({"messages": [*ASK, {"role": "tool", "content": "sunny"}]}, "messages"),
    ({"messages": [*ASK, {"role": "assistant", "tool_calls": [{"id": "x", "type": "function"}]},
                   {"role": "tool", "tool_call_id": "x", "content": "sunny"}]}, "messages"),
    # A result whose call is nowhere: the session has no open turn, and the client sent no call it answers.
    ({"messages": [*ASK, {"role": "tool", "tool_call_id": "nope", "content": "sunny"}]}, "messages"),
])
def test_bad_tools_and_tool_messages_are_400s(llm, client, alice, extra, param):
    resp = _post(client, alice, {"model": "continuum", "user": "ada", "messages": ASK, **extra})
    assert resp.status_code == 400, resp.content
    assert resp.json()["error"]["param"] == param and resp.json()["error"]["type"] == "invalid_request_error"
    assert llm.requests == []


def test_a_continuation_must_answer_every_call_and_only_this_turns(server, llm, alice):
    llm.add(tool_step(call("get_weather", {"city": "Paris"}, "call_a"), call("local_time", {"city": "Paris"},
                                                                             "call_b")))
    client = client_for(server, alice)
    message = client.chat.completions.create(model="continuum", user="ada", messages=ASK,
                                             tools=[WEATHER, CLOCK]).choices[0].message
    step = message.model_dump(exclude_none=True)
    with pytest.raises(openai.BadRequestError) as missing:
        client.chat.completions.create(model="continuum", user="ada", tools=[WEATHER, CLOCK], messages=[
            *ASK, step, {"role": "tool", "tool_call_id": "call_a", "content": "sunny"}])
    assert "call_b" in missing.value.body["message"]
    with pytest.raises(openai.BadRequestError) as unknown:
        client.chat.completions.create(model="continuum", user="ada", tools=[WEATHER, CLOCK], messages=[
            *ASK, step, {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_b", "content": "noon"},
            {"role": "tool", "tool_call_id": "call_z", "content": "?"}])
    assert "call_z" in unknown.value.body["message"]
    assert len(llm.requests) == 1


def test_a_chat_ui_offering_more_tool_text_than_the_context_budget_still_gets_its_turn(server, llm, alice, settings):
    """Open WebUI offers its ~36 built-in tools (~5,000 tokens) on every request: they are the client's cost, on top
    of the context Continuum composes, never a refusal."""
    settings.CONTINUUM_CONTEXT_BUDGET = 1500
    many = [{"type": "function", "function": {
        "name": f"builtin_{i}", "description": " ".join(["Looks things up in the workspace's knowledge."] * 6),
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}} for i in range(36)]
    from context.budget import tool_tokens

    assert tool_tokens(many) > settings.CONTINUUM_CONTEXT_BUDGET
    llm.add(answer("Paris is sunny."))
    reply = client_for(server, alice).chat.completions.create(model="continuum", user="owui", messages=ASK, tools=many)
    assert reply.choices[0].message.content == "Paris is sunny."
    assert set(offered(llm.requests[0])) >= {f"builtin_{i}" for i in range(36)} | {"recall"}
