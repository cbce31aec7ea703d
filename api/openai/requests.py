"""The OpenAI Chat Completions request, checked and parsed: its messages, the newest user input and the turns before
it, the client's tools and tool results, the model options, and the user and session it names. Nothing is read
from or written to the database here; a malformed request is a 400 with the parameter it is about."""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from django.conf import settings

from assistant.client_tools import ClientTools, client_function, client_tools_build
from assistant.tool_results import ToolResults
from infra.errors import ValidationFailed

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
MAX_MESSAGES = 1_000
OPTION_RANGES = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0)}


def invalid(message: str, *, param: str | None = None, code: str = "invalid_request") -> ValidationFailed:
    return ValidationFailed(message, code=code, details={"param": param} if param else {})


@dataclass
class ChatRequest:
    model: str
    user_input: str
    earlier: list[tuple[str, str]] = field(default_factory=list)  # (role, text) of turns before the new input
    client_system: str = ""
    stream: bool = False
    options: dict = field(default_factory=dict)  # passed through to the model: temperature, top_p, max_tokens
    user: str | None = None
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage and no choices
    client_tools: ClientTools | None = None
    tool_results: ToolResults | None = None  # the request continues a turn with the client's tool results
    metadata: dict | None = None  # OpenAI's request metadata (chat_tasks reads its task marker)


def _text_of(content, *, index: int) -> str:
    """Message content as text: a string, or the text parts of a content-part list (images are not supported)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise invalid(f"messages[{index}].content parts must be objects with a type.", param="messages")
            if part["type"] == "text":
                if not isinstance(part.get("text"), str):
                    raise invalid(f"messages[{index}].content text part needs a 'text' string.", param="messages")
                texts.append(part["text"])
            else:
                raise invalid(f"Content parts of type '{part['type']}' are not supported; send text.",
                              param="messages", code="unsupported_content")
        return "\n".join(texts)
    raise invalid(f"messages[{index}].content must be a string or a list of content parts.", param="messages")


def _tool_calls_of(message: dict, *, index: int) -> list[dict]:
    """An assistant message's tool calls as the model sends them; a 400 for a malformed one."""
    calls = message.get("tool_calls")
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise invalid(f"messages[{index}].tool_calls must be an array.", param="messages")
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str) or not call["id"] \
                or not isinstance(function.get("name"), str) or not isinstance(function.get("arguments", ""), str):
            raise invalid(f"messages[{index}].tool_calls holds a call without an id, a function name or string "
                          "arguments.", param="messages")
        out.append({"id": call["id"][:128], "type": "function",
                    "function": {"name": function["name"], "arguments": function.get("arguments") or ""}})
    return out


def tool_exchange_parse(parsed: list[dict], last_user: int) -> ToolResults | None:
    """The client's tool exchange after its last user message, when the request ends with tool results."""
    tail = parsed[last_user + 1:]
    if not tail:
        return None
    if tail[-1]["role"] != "tool":
        raise invalid("The last message must come from the user (a new turn) or be a tool result (continuing one).",
                      param="messages")
    exchange = []
    for m in tail:
        if m["role"] == "tool":
            if len(m["content"]) > settings.CONTINUUM_MAX_MESSAGE_CHARS:
                raise invalid(f"A tool result is longer than {settings.CONTINUUM_MAX_MESSAGE_CHARS} characters.",
                              param="messages", code="input_too_long")
            exchange.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        elif m["role"] == "assistant" and m["tool_calls"]:
            exchange.append({"role": "assistant", "content": m["content"] or None, "tool_calls": m["tool_calls"]})
        elif m["role"] not in ("system", "developer"):
            raise invalid("Between the last user message and the tool results only the assistant's tool calls may "
                          "come.", param="messages")
    results = [(m["tool_call_id"], m["content"]) for m in exchange if m["role"] == "tool"]
    return ToolResults(results=results, exchange=exchange)


def _messages_parse(messages) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise invalid("'messages' must be a non-empty array.", param="messages")
    if len(messages) > MAX_MESSAGES:
        raise invalid(f"At most {MAX_MESSAGES} messages.", param="messages")
    parsed = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise invalid(f"messages[{i}] must be an object with a role among {', '.join(ROLES[:5])}.",
                          param="messages")
        item = {"role": m["role"], "content": _text_of(m.get("content"), index=i), "tool_calls": []}
        if m["role"] == "assistant":
            item["tool_calls"] = _tool_calls_of(m, index=i)
        if m["role"] == "tool":
            if not isinstance(m.get("tool_call_id"), str) or not m["tool_call_id"]:
                raise invalid(f"messages[{i}] (a tool result) needs the 'tool_call_id' it answers.", param="messages")
            item["tool_call_id"] = m["tool_call_id"][:128]
        parsed.append(item)
    return parsed


def _client_tool_fields(data: dict) -> tuple[list, object, object] | None:
    """(tools, tool_choice, parallel_tool_calls) as the request gives them, tools a list; None when the request
    leaves the client's tools out altogether."""
    tools, choice, parallel = data.get("tools"), data.get("tool_choice"), data.get("parallel_tool_calls")
    if tools is None and choice in (None, "auto", "none") and parallel is None:
        return None
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise invalid("'tools' must be an array of function tools.", param="tools")
    return tools, choice, parallel


# What each surface says of a tool, and of a named tool_choice, that is not a function one in its shape.
_SHAPE_ERRORS = {
    True: ("Each tool must be {\"type\": \"function\", \"function\": {...}}; other tool types are not supported.",
           "A named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}."),
    False: ("Only function tools are supported.", "A named tool_choice is {\"type\": \"function\", \"name\": ...}."),
}


def _function_of(item, *, nested: bool) -> dict | None:
    """The function fields of a tool or named tool_choice; None when it is not a function one."""
    if not isinstance(item, dict) or item.get("type") != "function":
        return None
    if not nested:
        return item
    return item["function"] if isinstance(item.get("function"), dict) else None


def client_tools_parse(data: dict, *, nested: bool = True) -> ClientTools | None:
    """The request's `tools`, `tool_choice` and `parallel_tool_calls`, for both OpenAI surfaces: Chat Completions
    nests a function's fields under "function" (nested), the Responses API puts them on the tool itself."""
    fields = _client_tool_fields(data)
    if fields is None:
        return None
    tools, choice, parallel = fields
    tool_error, choice_error = _SHAPE_ERRORS[nested]
    definitions = []
    for tool in tools:
        f = _function_of(tool, nested=nested)
        if f is None:
            raise invalid(tool_error, param="tools")
        definitions.append(client_function(name=f.get("name"), description=f.get("description"),
                                           parameters=f.get("parameters"), strict=f.get("strict")))
    name = None
    if isinstance(choice, dict):
        f = _function_of(choice, nested=nested)
        if f is None or not isinstance(f.get("name"), str):
            raise invalid(choice_error, param="tool_choice")
        choice, name = "function", f["name"]
    elif choice == "function":
        choice = None  # not a valid string choice; the check below says so
    return client_tools_build(definitions=definitions, choice=choice, parallel=parallel, choice_name=name)


def _stream_flags(data: dict) -> tuple[bool, bool]:
    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid("'stream' must be a boolean.", param="stream")
    stream_options = data.get("stream_options")
    if stream_options is not None and not isinstance(stream_options, dict):
        raise invalid("'stream_options' must be an object.", param="stream_options")
    include_usage = (stream_options or {}).get("include_usage", False)
    if include_usage is None:
        include_usage = False
    if not isinstance(include_usage, bool):
        raise invalid("'stream_options.include_usage' must be a boolean.", param="stream_options")
    return stream, include_usage


def model_options_parse(data: dict, *, max_tokens_names=("max_completion_tokens", "max_tokens")) -> dict:
    """What a request passes through to the model: temperature, top_p, max_tokens (checked)."""
    options = {}
    for name, (low, high) in OPTION_RANGES.items():
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise invalid(f"'{name}' must be a number from {low} to {high}.", param=name)
        options[name] = value
    max_tokens = next((data[n] for n in max_tokens_names if data.get(n) is not None), None)
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise invalid(f"'{max_tokens_names[-1]}' must be a positive integer.", param=max_tokens_names[-1])
        options["max_tokens"] = max_tokens
    return options


def user_field_parse(data: dict) -> str | None:
    user = data.get("user")
    if user is not None and (not isinstance(user, str) or len(user) > 255):
        raise invalid("'user' must be a string of at most 255 characters.", param="user")
    return (user or "").strip() or None


def request_object(body: bytes) -> dict:
    try:
        data = json.loads(body or b"")
    except (ValueError, UnicodeDecodeError):
        raise invalid("The request body is not valid JSON.", code="malformed_body")
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", code="malformed_body")
    model = data.get("model")
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise invalid("'model' is required (a model id from /v1/models).", param="model")
    return data


def conversation_parse(parsed: list[dict]) -> tuple[str, list[tuple[str, str]], str, ToolResults | None]:
    """(the newest user input, the text turns before it, the client's system text, tool results continuing it)."""
    last_user = max((i for i, m in enumerate(parsed) if m["role"] == "user"), default=None)
    if last_user is None:
        raise invalid("The messages hold no user message: this endpoint answers the user's newest turn.",
                      param="messages")
    tool_results = tool_exchange_parse(parsed, last_user)
    user_input = parsed[last_user]["content"]
    if not user_input.strip():
        raise invalid("The last user message is empty.", param="messages")
    if len(user_input) > settings.CONTINUUM_MAX_MESSAGE_CHARS:
        raise invalid(f"The last user message is longer than {settings.CONTINUUM_MAX_MESSAGE_CHARS} characters.",
                      param="messages", code="input_too_long")
    # Tool exchanges belong to the client's own tools, and an assistant message that calls tools is a step, not a
    # reply: only the conversation's text turns are imported.
    earlier = [(m["role"], m["content"]) for m in parsed[:last_user]
               if m["role"] in ("user", "assistant") and not m["tool_calls"] and m["content"].strip()]
    earlier = [(r, t[:settings.CONTINUUM_MAX_MESSAGE_CHARS]) for r, t in earlier]
    system = "\n\n".join(m["content"] for m in parsed if m["role"] in ("system", "developer") and m["content"].strip())
    return user_input, earlier, system, tool_results


def chat_request_parse(body: bytes) -> ChatRequest:
    data = request_object(body)
    user_input, earlier, system, tool_results = conversation_parse(_messages_parse(data.get("messages")))
    stream, include_usage = _stream_flags(data)
    options = model_options_parse(data)
    n = data.get("n")
    if n not in (None, 1):
        raise invalid("Only n=1 is supported.", param="n")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise invalid("'metadata' must be an object.", param="metadata")
    return ChatRequest(model=data["model"].strip(), user_input=user_input, earlier=earlier, client_system=system,
                       stream=stream, options=options, user=user_field_parse(data), include_usage=include_usage,
                       client_tools=client_tools_parse(data), tool_results=tool_results, metadata=metadata)


def chat_user_name(*, body_user: str | None, header_user: str | None) -> str:
    """The end user's external id the request names (the 'user' field or X-User-Id, which must agree)."""
    header_user = (header_user or "").strip() or None
    if body_user and header_user and body_user != header_user:
        raise invalid("The 'user' field and the X-User-Id header name different users.", param="user")
    external_id = body_user or header_user
    if not external_id:
        raise invalid("Name the end user: the 'user' field or an X-User-Id header (your id for the user).",
                      param="user", code="user_required")
    if len(external_id) > 255:
        raise invalid("The user id is longer than 255 characters.", param="user")
    return external_id


def session_header_parse(value: str | None) -> uuid.UUID | None:
    value = (value or "").strip()
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise invalid("X-Session-Id must be a session id (a UUID) from an earlier response.", param="X-Session-Id",
                      code="invalid_session_id")

