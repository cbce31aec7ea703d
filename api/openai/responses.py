"""OpenAI's Responses API over the same turn as Chat Completions: the request translated to a ChatRequest, the turn's
result to a response object, its stream to the Responses API's typed events.

The subset chat clients use: `input` as text or items (messages, function calls and their outputs), `instructions`,
function `tools` with `tool_choice` and `parallel_tool_calls`, `stream`, and `previous_response_id`, which names
the session the response was given in (a response id holds its session's id).
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

from infra.errors import NotFound

from .bodies import continuum_extension
from .requests import (
    ChatRequest,
    client_tools_parse,
    conversation_parse,
    invalid,
    model_options_parse,
    request_object,
    tool_exchange_parse,
    user_field_parse,
)

MESSAGE_ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text", "text")
SKIPPED_ITEMS = ("item_reference", "reasoning")  # earlier output: the session holds what it stands for


@dataclass
class ResponsesRequest:
    chat: ChatRequest  # user_input is "" when the request only brings tool outputs for previous_response_id's turn
    previous_response_id: str | None = None
    echo: dict = field(default_factory=dict)  # the request's settings, repeated in the response object


def _text(content, *, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "refusal":
                continue
            else:
                raise invalid(f"{where}: content parts of type '{kind}' are not supported; send text.",
                              param="input", code="unsupported_content")
        return "\n".join(texts)
    raise invalid(f"{where}: content must be a string or a list of text parts.", param="input")


def _string(item: dict, key: str, *, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise invalid(f"{where} needs '{key}' (a string).", param="input")
    return value


def _input_messages(value) -> list[dict]:
    """The input as Chat Completions messages: function calls join the assistant message they follow."""
    if isinstance(value, str):
        return [{"role": "user", "content": value, "tool_calls": []}]
    if not isinstance(value, list) or not value:
        raise invalid("'input' must be a string or a non-empty array of items.", param="input")
    out: list[dict] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise invalid(f"{where} must be an object.", param="input")
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            if item.get("role") not in MESSAGE_ROLES:
                raise invalid(f"{where} needs a role among {', '.join(MESSAGE_ROLES)}.", param="input")
            out.append({"role": item["role"], "content": _text(item.get("content"), where=where), "tool_calls": []})
        elif kind == "function_call":
            arguments = item.get("arguments", "")
            if not isinstance(arguments, str):
                raise invalid(f"{where} needs 'arguments' as a JSON string.", param="input")
            call = {"id": _string(item, "call_id", where=where)[:128], "type": "function",
                    "function": {"name": _string(item, "name", where=where), "arguments": arguments}}
            if out and out[-1]["role"] == "assistant":
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": _string(item, "call_id", where=where)[:128],
                        "content": _text(output, where=where), "tool_calls": []})
        elif kind in SKIPPED_ITEMS:
            continue
        else:
            raise invalid(f"{where}: input items of type '{kind}' are not supported.", param="input",
                          code="unsupported_input")
    return out


def responses_request_parse(body: bytes) -> ResponsesRequest:
    data = request_object(body)
    previous = data.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous.strip()):
        raise invalid("'previous_response_id' must be a response id.", param="previous_response_id")
    instructions = data.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise invalid("'instructions' must be a string.", param="instructions")
    parsed = _input_messages(data.get("input"))
    if instructions and instructions.strip():
        parsed.insert(0, {"role": "system", "content": instructions, "tool_calls": []})
    if previous and not any(m["role"] == "user" for m in parsed):
        # Only outputs for the calls the previous response made: the turn they continue has its input stored.
        user_input, earlier = "", []
        system = "\n\n".join(m["content"] for m in parsed if m["role"] in ("system", "developer"))
        tool_results = tool_exchange_parse([{"role": "user", "content": "", "tool_calls": []}, *parsed], 0)
        if tool_results is None:
            raise invalid("With previous_response_id, 'input' needs a user message or function call outputs.",
                          param="input")
    else:
        user_input, earlier, system, tool_results = conversation_parse(parsed)
    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid("'stream' must be a boolean.", param="stream")
    options = model_options_parse(data, max_tokens_names=("max_output_tokens",))
    client_tools = client_tools_parse(data, nested=False)
    chat = ChatRequest(model=data["model"].strip(), user_input=user_input, earlier=earlier, client_system=system,
                       stream=stream, options=options, user=user_field_parse(data), client_tools=client_tools,
                       tool_results=tool_results)
    echo = {"instructions": instructions, "max_output_tokens": options.get("max_tokens"),
            "temperature": options.get("temperature"), "top_p": options.get("top_p"),
            "tool_choice": data.get("tool_choice") or "auto",
            "tools": [{"type": "function", **d["function"]}
                      for d in (client_tools.definitions if client_tools else [])],
            "parallel_tool_calls": client_tools.parallel if client_tools else True,
            "previous_response_id": previous, "user": chat.user,
            "metadata": data.get("metadata") if isinstance(data.get("metadata"), dict) else {}}
    return ResponsesRequest(chat=chat, previous_response_id=previous, echo=echo)


# --- ids ------------------------------------------------------------------------------------------------------------

def response_id(session_id) -> str:
    """A response's id names its session, so previous_response_id continues it; the rest tells responses apart."""
    return f"resp_{uuid.UUID(str(session_id)).hex}{uuid.uuid4().hex[:16]}"


def session_of_response(response_id_: str) -> uuid.UUID:
    try:
        if not response_id_.startswith("resp_"):
            raise ValueError
        return uuid.UUID(hex=response_id_[len("resp_"):len("resp_") + 32])
    except ValueError:
        raise NotFound("Previous response not found.", code="not_found")


# --- shapes ---------------------------------------------------------------------------------------------------------

def message_item(*, item_id: str, text: str, status: str = "completed") -> dict:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if text else []}


def call_item(call: dict, *, status: str = "completed", arguments: str | None = None) -> dict:
    return {"type": "function_call", "id": f"fc_{call['id']}", "call_id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"]["arguments"] if arguments is None else arguments, "status": status}


def _usage(result) -> dict:
    prompt, completion = result.usage.get("prompt_tokens", 0), result.usage.get("completion_tokens", 0)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + completion}


def response_object(*, rid: str, created: int, model: str, echo: dict, status: str = "in_progress",
                    output: list | None = None, result=None, error: dict | None = None) -> dict:
    body = {"id": rid, "object": "response", "created_at": created, "status": status, "model": model,
            "output": output or [], "error": error, "incomplete_details": None, "usage": None, "store": True,
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "reasoning": {"effort": None},
            **echo}
    if result is not None:
        body["usage"] = _usage(result)
        body["continuum"] = continuum_extension(result)
        if result.finish_reason == "length":
            body.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    return body


def response_output(result, *, item_id: str, text: str | None = None) -> list[dict]:
    text = result.reply if text is None else text
    output = [message_item(item_id=item_id, text=text)] if text else []
    return output + [call_item(c) for c in result.pending_calls]


def sse_event(kind: str, sequence: int, **fields) -> str:
    body = {"type": kind, "sequence_number": sequence, **fields}
    return f"event: {kind}\ndata: {json.dumps(body, ensure_ascii=False, default=str)}\n\n"


def now() -> int:
    return int(time.time())
