"""The OpenAI Chat Completions protocol over Continuum: request parsing, end user and session resolution, shapes."""
from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import MD5

from infra.errors import AppError, Conflict, NotFound, ValidationFailed
from infra.secrets import secrets_redact
from orchestration.sessions import session_start
from sessions.models import Message, Session
from sessions.selectors import access_session, session_open_for_user
from sessions.services import NewMessage
from tenants.models import EndUser, Tenant
from tenants.services import end_user_get_or_create

from .client_tools import ClientTools, client_function, client_tools_build
from .tool_results import ToolResults

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


def client_tools_parse(data: dict) -> ClientTools | None:
    """The request's `tools`, `tool_choice` and `parallel_tool_calls` (Chat Completions shapes)."""
    tools, choice, parallel = data.get("tools"), data.get("tool_choice"), data.get("parallel_tool_calls")
    if tools is None and choice in (None, "auto", "none") and parallel is None:
        return None
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise invalid("'tools' must be an array of function tools.", param="tools")
    definitions = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise invalid("Each tool must be {\"type\": \"function\", \"function\": {...}}; other tool types are not "
                          "supported.", param="tools")
        f = tool["function"]
        definitions.append(client_function(name=f.get("name"), description=f.get("description"),
                                           parameters=f.get("parameters"), strict=f.get("strict")))
    name = None
    if isinstance(choice, dict):
        function = choice.get("function")
        if choice.get("type") != "function" or not isinstance(function, dict) or not isinstance(function.get("name"),
                                                                                                  str):
            raise invalid("A named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}.",
                          param="tool_choice")
        choice, name = "function", function["name"]
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
    return ChatRequest(model=data["model"].strip(), user_input=user_input, earlier=earlier, client_system=system,
                       stream=stream, options=options, user=user_field_parse(data), include_usage=include_usage,
                       client_tools=client_tools_parse(data), tool_results=tool_results)


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


def chat_session_check(*, tenant: Tenant, external_id: str, session_id: uuid.UUID) -> None:
    """Read-only: the named session exists, is this user's and is open (nothing is created before the request is
    known to be valid)."""
    session = access_session(tenant=tenant, session_id=session_id)
    if session.user.external_id != external_id:
        raise NotFound("Session not found.")  # the same answer as for a missing one
    if session.state != Session.State.OPEN:
        raise Conflict("Session is closed; omit X-Session-Id to continue in a new one.", code="session_closed")


def chat_user_resolve(*, tenant: Tenant, external_id: str) -> EndUser:
    """The end user named by the request (external id), created on first use."""
    return end_user_get_or_create(tenant=tenant, external_id=external_id)


def chat_session_resolve(*, tenant: Tenant, user: EndUser, session_id: uuid.UUID | None = None) -> Session:
    """X-Session-Id when given (it must be this user's open session), else the user's open one, else a new one.

    A new session links to the user's last one, so its first turn starts with that session's bridge.
    """
    if session_id:
        session = access_session(tenant=tenant, session_id=session_id)
        if session.user_id != user.pk:
            raise NotFound("Session not found.")  # the same answer as for a missing one
        if session.state != Session.State.OPEN:
            raise Conflict("Session is closed; omit X-Session-Id to continue in a new one.", code="session_closed")
        return session
    with transaction.atomic():
        # Two first requests of one user race here; the row lock makes the second find the first's session.
        EndUser.objects.for_tenant(tenant).select_for_update().filter(pk=user.pk).first()
        current = session_open_for_user(tenant=tenant, user=user)
        if current is not None:
            return current
        session, _ = session_start(tenant=tenant, user=user)
        return session


def open_turn_input(*, tenant: Tenant, session: Session) -> str:
    """The input of the session's last turn, which tool outputs sent without it continue."""
    last = (Message.objects.for_tenant(tenant).filter(session=session, role=Message.Role.USER)
            .order_by("-seq").values_list("content", flat=True).first())
    if not last:
        raise invalid("The previous response's session has no turn for these tool outputs to continue.",
                      param="input")
    return last


def _stored_turns(*, tenant: Tenant, session: Session, limit: int) -> list[tuple[str, str]]:
    """The session's newest `limit` turns as the client saw them (user messages and assistant replies, not the
    assistant's tool-calling steps), oldest first, each as (role, md5 of its content): comparing digests keeps up to
    `limit` texts of up to 32k characters out of the query's result."""
    rows = (Message.objects.filter(tenant=tenant, session=session, role__in=("user", "assistant"))
            .exclude(content="").filter(Q(role="user") | Q(tool_calls=[]))
            .annotate(digest=MD5("content")).order_by("-seq").values_list("role", "digest")[:limit])
    return list(reversed(rows))


def _digest(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # noqa: S324 - an equality check against MD5() in SQL, not a secret


def chat_earlier_missing(*, tenant: Tenant, session: Session, earlier: list[tuple[str, str]],
                         user_input: str = "") -> list[NewMessage]:
    """Turns the client sent that this session does not already hold, oldest first, to import before the input.

    A chat UI resends its whole conversation with every request (some drop its oldest turns). The conversation is
    lined up with the session by position: the longest run of the client's first turns that equals the session's
    last turns is already stored, and what follows it is new. Repeats ("yes", "thanks") are turns of their own, and
    a conversation begun elsewhere (nothing lines up) is imported once, into this session.
    """
    if not earlier:
        return []
    earlier = earlier[-(settings.CONTINUUM_MAX_BATCH - 1):]
    stored = _stored_turns(tenant=tenant, session=session, limit=len(earlier) + 1)
    if user_input and stored and stored[-1][0] == "user" and stored[-1][1] in {
            _digest(user_input), _digest(user_input.strip()), _digest(_redacted(user_input))}:
        # This input is already the session's last message (a retry after the model failed); the turn reuses it.
        stored = stored[:-1]
    sent = [(role, _digest(text)) for role, text in earlier]
    redacted: dict[int, tuple[str, str]] = {}

    def same(k: int, i: int) -> bool:
        """Whether stored turn k is the client's turn i; stored texts had secrets cut out, so compare that too."""
        if stored[k] == sent[i]:
            return True
        if stored[k][0] != sent[i][0]:
            return False
        if i not in redacted:
            redacted[i] = (sent[i][0], _digest(_redacted(earlier[i][1])))
        return stored[k] == redacted[i]

    overlap = 0
    for size in range(min(len(stored), len(earlier)), 0, -1):
        start = len(stored) - size
        if all(same(start + i, i) for i in range(size)):
            overlap = size
            break
    return [NewMessage(role=role, content=text) for role, text in earlier[overlap:]]


def _redacted(text: str) -> str:
    return secrets_redact(text).text


# --- response shapes ------------------------------------------------------------------------------------------------

def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def continuum_extension(result) -> dict:
    """Continuum's own fields ride along under one key; OpenAI clients ignore what they do not know."""
    return {"session_id": str(result.session.pk), "message_id": str(result.assistant_message.pk),
            "stop_reason": result.stop_reason, "steps": result.loop.steps, "memory_status": result.memory_status,
            "memories": [{"id": str(m.memory_id), "kind": m.kind, "text": m.text, "provenance": m.provenance}
                         for m in result.memories],
            "breakdown": result.breakdown}


def _usage(result) -> dict:
    prompt, completion = result.usage.get("prompt_tokens", 0), result.usage.get("completion_tokens", 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion_body(*, cid: str, model: str, result) -> dict:
    message = {"role": "assistant", "content": result.reply, "refusal": None}
    if result.pending_calls:
        message.update(content=result.reply or None, tool_calls=result.pending_calls)
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": result.finish_reason}],
            "usage": _usage(result), "system_fingerprint": None, "continuum": continuum_extension(result)}


def chunk_body(*, cid: str, created: int, model: str, delta: dict, finish_reason: str | None = None,
               result=None, include_usage: bool = False) -> dict:
    body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
    if include_usage:
        body["usage"] = None  # OpenAI's shape when usage was asked for: null until the last chunk
    if result is not None:
        body["continuum"] = continuum_extension(result)
    return body


def tool_calls_delta(calls: list[dict]) -> dict:
    """The client's tool calls as one stream delta, each whole (clients join deltas by index)."""
    return {"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                            "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                           for i, c in enumerate(calls)]}


def usage_chunk(*, cid: str, created: int, model: str, result) -> dict:
    """The stream's last chunk when stream_options.include_usage asks: no choices, the turn's usage."""
    return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": None, "choices": [], "usage": _usage(result)}


def models_body(*, tenant: Tenant) -> dict:
    return {"object": "list", "data": [{"id": settings.ASSISTANT_MODEL_ALIAS, "object": "model",
                                        "created": int(tenant.created_at.timestamp()), "owned_by": "continuum"}]}


_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


def error_body(exc: AppError) -> dict:
    kind = _ERROR_TYPES.get(exc.status, "server_error" if exc.status >= 500 else "invalid_request_error")
    return {"error": {"message": exc.message, "type": kind, "code": exc.code, "param": exc.details.get("param")}}
