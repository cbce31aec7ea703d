"""The OpenAI Chat Completions response bodies: a completion, the stream's chunks, the model list and the error
shape, with Continuum's own fields under one key."""
from __future__ import annotations

import time
import uuid

from django.conf import settings

from infra.errors import AppError, NotFound
from tenants.models import Tenant


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


def task_extension(answer) -> dict:
    """A chat UI's background task (assistant/chat_tasks.py): what kind Continuum took it for, and that nothing of it
    was stored."""
    return {"task": answer.kind, "stored": False}


def task_completion_body(*, cid: str, model: str, answer) -> dict:
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.reply, "refusal": None},
                         "logprobs": None, "finish_reason": answer.finish_reason}],
            "usage": _usage(answer), "system_fingerprint": None, "continuum": task_extension(answer)}


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


def model_ids() -> list[str]:
    """The model ids a request may name: the alias, then ASSISTANT_MODEL_ALIASES (names clients have built in)."""
    extra = [name for name in settings.ASSISTANT_MODEL_ALIASES if name != settings.ASSISTANT_MODEL_ALIAS]
    return [settings.ASSISTANT_MODEL_ALIAS, *dict.fromkeys(extra)]


def model_check(model_id: str) -> None:
    """A 404 model_not_found, as OpenAI answers it, for a model id the service does not answer to."""
    if model_id not in model_ids():
        raise NotFound(f"The model '{model_id}' does not exist; GET /v1/models lists the models.",
                       code="model_not_found", details={"param": "model"})


def models_body(*, tenant: Tenant) -> dict:
    created = int(tenant.created_at.timestamp())
    return {"object": "list", "data": [{"id": name, "object": "model", "created": created, "owned_by": "continuum"}
                                       for name in model_ids()]}


_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


def error_body(exc: AppError) -> dict:
    kind = _ERROR_TYPES.get(exc.status, "server_error" if exc.status >= 500 else "invalid_request_error")
    return {"error": {"message": exc.message, "type": kind, "code": exc.code, "param": exc.details.get("param")}}
