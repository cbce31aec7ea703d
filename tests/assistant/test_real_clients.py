"""LangChain (langchain-openai) and litellm against the live server, as an agent developer uses them: plain, streamed,
and a round trip through a tool of the client's own."""
from __future__ import annotations

import os

import pytest

from .scripted_llm import answer, call, tool_step

# litellm reads its model price map from the network at import unless told to use its packaged copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture
def chat_model(server, alice):
    from langchain_openai import ChatOpenAI

    def make(**kwargs):
        return ChatOpenAI(model="continuum", base_url=f"{server}/v1", api_key=alice.plain_key, max_retries=0,
                          timeout=120, default_headers={"X-User-Id": "ada"}, **kwargs)
    return make


def test_langchain_invoke_and_stream(chat_model, llm):
    llm.add(answer("Hello from Continuum."), answer("Streamed from Continuum."))
    reply = chat_model().invoke("Hello")
    assert reply.content == "Hello from Continuum."
    assert reply.response_metadata["finish_reason"] == "stop" and reply.usage_metadata["total_tokens"] > 0
    chunks = list(chat_model(stream_usage=True).stream("Hello again"))
    assert "".join(c.content for c in chunks) == "Streamed from Continuum."
    assert sum((c.usage_metadata or {}).get("total_tokens", 0) for c in chunks) > 0


def test_langchain_bind_tools_round_trip(chat_model, llm):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city today."""
        return f"sunny in {city}"

    llm.add(tool_step(call("get_weather", {"city": "Paris"}, "call_lc1")), answer("It is sunny in Paris."))
    model = chat_model().bind_tools([get_weather])
    question = HumanMessage("What is the weather in Paris?")
    step = model.invoke([question])
    assert step.response_metadata["finish_reason"] == "tool_calls"
    assert [(c["name"], c["args"], c["id"]) for c in step.tool_calls] == [("get_weather", {"city": "Paris"},
                                                                           "call_lc1")]
    assert "get_weather" in [t["function"]["name"] for t in llm.requests[0]["tools"]]
    result = get_weather.invoke(step.tool_calls[0]["args"])
    final = model.invoke([question, step, ToolMessage(result, tool_call_id="call_lc1")])
    assert final.content == "It is sunny in Paris." and not final.tool_calls
    assert llm.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_lc1", "content": "sunny in Paris"}


def test_langchain_streamed_tool_call(chat_model, llm):
    llm.add(tool_step(call("get_weather", {"city": "Oslo"}, "call_lc2")))
    chunks = list(chat_model().bind_tools([WEATHER]).stream("Weather in Oslo?"))
    whole = chunks[0]
    for c in chunks[1:]:
        whole += c
    assert [(c["name"], c["args"]) for c in whole.tool_calls] == [("get_weather", {"city": "Oslo"})]


def _litellm(server, alice, **kwargs):
    import litellm

    return litellm.completion(model="openai/continuum", api_base=f"{server}/v1", api_key=alice.plain_key,
                              num_retries=0, timeout=120, extra_headers={"X-User-Id": "ada"}, **kwargs)


def test_litellm_plain_stream_and_tool_round_trip(server, llm, alice):
    llm.add(answer("Plain."), answer("Streamed reply."), tool_step(call("get_weather", {"city": "Rome"}, "call_ll1")),
            answer("Warm in Rome."))
    plain = _litellm(server, alice, messages=[{"role": "user", "content": "Hi"}])
    assert plain.choices[0].message.content == "Plain." and plain.choices[0].finish_reason == "stop"
    streamed = _litellm(server, alice, messages=[{"role": "user", "content": "Hi again"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == "Streamed reply."
    question = {"role": "user", "content": "Weather in Rome?"}
    step = _litellm(server, alice, messages=[question], tools=[WEATHER])
    assert step.choices[0].finish_reason == "tool_calls"
    calls = step.choices[0].message.tool_calls
    assert [(c.id, c.function.name) for c in calls] == [("call_ll1", "get_weather")]
    final = _litellm(server, alice, tools=[WEATHER], messages=[
        question, step.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_ll1", "content": "warm"}])
    assert final.choices[0].message.content == "Warm in Rome."
