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
from sessions.models import Message, Session
from sessions.selectors import access_session, session_open_for_user
from orchestration.sessions import session_start
from sessions.services import NewMessage
from tenants.models import EndUser, Tenant
from tenants.services import end_user_get_or_create

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


def chat_request_parse(body: bytes) -> ChatRequest:
    try:
        data = json.loads(body or b"")
    except (ValueError, UnicodeDecodeError):
        raise invalid("The request body is not valid JSON.", code="malformed_body")
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", code="malformed_body")
    model = data.get("model")
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise invalid("'model' is required (a model id from /v1/models).", param="model")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("'messages' must be a non-empty array.", param="messages")
    if len(messages) > MAX_MESSAGES:
        raise invalid(f"At most {MAX_MESSAGES} messages.", param="messages")
    parsed = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise invalid(f"messages[{i}] must be an object with a role among {', '.join(ROLES[:4])}.",
                          param="messages")
        parsed.append((m["role"], _text_of(m.get("content"), index=i)))
    if parsed[-1][0] != "user":
        raise invalid("The last message must come from the user: this endpoint answers the user's newest turn.",
                      param="messages")
    user_input = parsed[-1][1]
    if not user_input.strip():
        raise invalid("The last user message is empty.", param="messages")
    if len(user_input) > settings.CONTINUUM_MAX_MESSAGE_CHARS:
        raise invalid(f"The last user message is longer than {settings.CONTINUUM_MAX_MESSAGE_CHARS} characters.",
                      param="messages", code="input_too_long")
    # Tool exchanges belong to the client's own tools; only the conversation's text turns are imported.
    earlier = [(role, text) for role, text in parsed[:-1] if role in ("user", "assistant") and text.strip()]
    earlier = [(r, t[:settings.CONTINUUM_MAX_MESSAGE_CHARS]) for r, t in earlier]
    system = "\n\n".join(text for role, text in parsed if role in ("system", "developer") and text.strip())

    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid("'stream' must be a boolean.", param="stream")
    options = {}
    for name, (low, high) in OPTION_RANGES.items():
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise invalid(f"'{name}' must be a number from {low} to {high}.", param=name)
        options[name] = value
    max_tokens = data.get("max_completion_tokens", data.get("max_tokens"))
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise invalid("'max_tokens' must be a positive integer.", param="max_tokens")
        options["max_tokens"] = max_tokens
    n = data.get("n")
    if n not in (None, 1):
        raise invalid("Only n=1 is supported.", param="n")
    user = data.get("user")
    if user is not None and (not isinstance(user, str) or len(user) > 255):
        raise invalid("'user' must be a string of at most 255 characters.", param="user")
    return ChatRequest(model=model.strip(), user_input=user_input, earlier=earlier, client_system=system,
                       stream=stream, options=options, user=(user or "").strip() or None)


def chat_user_resolve(*, tenant: Tenant, body_user: str | None, header_user: str | None) -> EndUser:
    """The end user named by the request (external id), created on first use."""
    header_user = (header_user or "").strip() or None
    if body_user and header_user and body_user != header_user:
        raise invalid("The 'user' field and the X-User-Id header name different users.", param="user")
    external_id = body_user or header_user
    if not external_id:
        raise invalid("Name the end user: the 'user' field or an X-User-Id header (your id for the user).",
                      param="user", code="user_required")
    if len(external_id) > 255:
        raise invalid("The user id is longer than 255 characters.", param="user")
    return end_user_get_or_create(tenant=tenant, external_id=external_id)


def chat_session_resolve(*, tenant: Tenant, user: EndUser, session_id: str | None = None) -> Session:
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


def _extension(result) -> dict:
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
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": result.reply, "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(result), "system_fingerprint": None, "continuum": _extension(result)}


def chunk_body(*, cid: str, created: int, model: str, delta: dict, finish_reason: str | None = None,
               result=None) -> dict:
    body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
    if result is not None:
        body["usage"] = _usage(result)
        body["continuum"] = _extension(result)
    return body


def models_body(*, tenant: Tenant) -> dict:
    return {"object": "list", "data": [{"id": settings.ASSISTANT_MODEL_ALIAS, "object": "model",
                                        "created": int(tenant.created_at.timestamp()), "owned_by": "continuum"}]}


_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


def error_body(exc: AppError) -> dict:
    kind = _ERROR_TYPES.get(exc.status, "server_error" if exc.status >= 500 else "invalid_request_error")
    return {"error": {"message": exc.message, "type": kind, "code": exc.code, "param": exc.details.get("param")}}
