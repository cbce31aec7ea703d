"""POST /v1/responses (the Responses API subset chat clients use) and GET /v1/models/{id}, through the official
openai client against the live server."""
from __future__ import annotations

import json

import openai
import pytest

from sessions.models import Message

from .conftest import client_for
from .scripted_llm import answer, call, cut, tool_step

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city today.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def contents(session_id) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in Message.objects.unscoped().filter(session_id=session_id).order_by("seq")]


def test_a_response_and_a_follow_up_by_previous_response_id(server, llm, alice):
    llm.add(answer("Hello Ada."), answer("Still here."))
    client = client_for(server, alice)
    raw = client.responses.with_raw_response.create(model="continuum", input="Hi there", instructions="Be brief.",
                                                    user="ada")
    first = raw.parse()
    assert first.object == "response" and first.id.startswith("resp_") and first.status == "completed"
    assert first.output_text == "Hello Ada." and first.output[0].type == "message"
    assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens > 0
    assert first.instructions == "Be brief."
    assert "Be brief." in llm.requests[0]["messages"][0]["content"]
    # No user named: previous_response_id names the session, and so its user.
    second = client.responses.create(model="continuum", previous_response_id=first.id,
                                     input=[{"role": "user", "content": [{"type": "input_text", "text": "Still?"}]}])
    assert second.output_text == "Still here." and second.previous_response_id == first.id
    assert contents(raw.headers["X-Session-Id"]) == [("user", "Hi there"), ("assistant", "Hello Ada."),
                                                     ("user", "Still?"), ("assistant", "Still here.")]


def test_a_streamed_response_has_the_responses_events(server, llm, alice):
    llm.add(answer("Streaming answers arrive in pieces. A sentence at a time."))
    client = client_for(server, alice)
    with client.responses.stream(model="continuum", input="Tell me", user="ada") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == final.output_text
    assert final.output_text == "Streaming answers arrive in pieces. A sentence at a time."
    assert final.status == "completed"
    assert kinds.count("response.output_text.delta") > 1


def test_a_client_function_call_and_its_output_by_previous_response_id(server, llm, alice):
    llm.add(tool_step(call("get_weather", {"city": "Paris"}, "call_r1")), answer("Sunny in Paris."))
    client = client_for(server, alice)
    first = client.responses.create(model="continuum", user="ada", input="Weather in Paris?", tools=[WEATHER])
    calls = [o for o in first.output if o.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [("call_r1", "get_weather",
                                                                              {"city": "Paris"})]
    assert WEATHER["name"] in [t["function"]["name"] for t in llm.requests[0]["tools"]]
    second = client.responses.create(model="continuum", previous_response_id=first.id, tools=[WEATHER], input=[
        {"type": "function_call_output", "call_id": "call_r1", "output": "sunny"}])
    assert second.output_text == "Sunny in Paris."
    sent = llm.requests[1]["messages"]
    assert [m["role"] for m in sent[-3:]] == ["user", "assistant", "tool"] and sent[-1]["content"] == "sunny"


def test_a_whole_conversation_as_input_items_continues_a_call(server, llm, alice):
    llm.add(tool_step(call("get_weather", {"city": "Paris"}, "call_r2")), answer("Sunny."))
    client = client_for(server, alice)
    first = client.responses.create(model="continuum", user="ada", input="Weather in Paris?", tools=[WEATHER])
    items = [{"role": "user", "content": "Weather in Paris?"},
             *[o.model_dump(exclude_none=True) for o in first.output],
             {"type": "function_call_output", "call_id": "call_r2", "output": "sunny"}]
    second = client.responses.create(model="continuum", user="ada", input=items, tools=[WEATHER])
    assert second.output_text == "Sunny."


def test_a_streamed_function_call(server, llm, alice):
    llm.add(tool_step(call("get_weather", {"city": "Paris"}, "call_r3")))
    client = client_for(server, alice)
    with client.responses.stream(model="continuum", user="ada", input="Weather?", tools=[WEATHER]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1 and json.loads(done[0].arguments) == {"city": "Paris"}
    assert [(o.type, o.call_id) for o in final.output] == [("function_call", "call_r3")]


def test_a_cut_answer_is_an_incomplete_response(server, llm, alice):
    llm.add(cut("It goes on and"))
    result = client_for(server, alice).responses.create(model="continuum", user="ada", input="Go on",
                                                        max_output_tokens=16)
    assert result.status == "incomplete" and result.incomplete_details.reason == "max_output_tokens"


def test_models_by_id(server, alice):
    client = client_for(server, alice)
    assert client.models.retrieve("continuum").id == "continuum"
    with pytest.raises(openai.NotFoundError) as exc:
        client.models.retrieve("gpt-4o")
    assert exc.value.body["code"] == "model_not_found"


def _post(client, tenant, body):
    return client.post("/v1/responses", data=json.dumps(body), content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {tenant.plain_key}")


@pytest.mark.parametrize("body, status, param", [
    ({"model": "continuum", "user": "ada"}, 400, "input"),
    ({"model": "continuum", "user": "ada", "input": [{"type": "input_image", "image_url": "x"}]}, 400, "input"),
    ({"model": "continuum", "user": "ada", "input": "hi", "tools": [{"type": "web_search"}]}, 400, "tools"),
    ({"model": "continuum", "input": "hi"}, 400, "user"),
    ({"model": "continuum", "input": "hi", "previous_response_id": "resp_nope"}, 404, None),
    ({"model": "continuum", "input": "hi", "previous_response_id": "resp_" + "ab" * 24}, 404, None),
])
def test_bad_responses_requests_are_refused_before_the_model(client, alice, body, status, param):
    resp = _post(client, alice, body)
    assert resp.status_code == status, resp.content
    assert resp.json()["error"]["param"] == param
