"""The chat model adapter: one model call of a turn through the OpenAI-compatible client, streamed or whole, with the
SDK's errors mapped to the application's."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import openai
from django.conf import settings

from .errors import AppError, ServiceUnavailable
from .llm import chat_completion_send, get_client, llm_priority, main_model, max_tokens_for

# Finish reasons of our own, beside OpenAI's stop, length and tool_calls: the reply was cut short by the caller.
CANCELLED = "cancelled"
TIMEOUT = "timeout"


@dataclass
class ModelReply:
    content: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict = field(default_factory=dict)


def chat_error(exc: openai.OpenAIError) -> AppError:
    """An SDK error as the application's: an outage is retryable (503), a refusal is not (502)."""
    if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError | openai.RateLimitError |
                  openai.InternalServerError):
        return ServiceUnavailable(f"The language model is unavailable: {exc.__class__.__name__}.",
                                  code="llm_unavailable")
    status = getattr(exc, "status_code", None)
    return AppError(f"The language model refused the request ({status or exc.__class__.__name__}).",
                    code="llm_error", status=502, retryable=False)


class OpenAIChatModel:
    """Chat completions through the configured OpenAI-compatible client; streams when asked for deltas."""

    def __init__(self, *, client=None, model: str | None = None, options: dict | None = None):
        self._client = client or get_client()
        self.name = model or main_model()
        self.options = options or {}

    def complete(self, *, messages, tools, tool_choice, deadline, on_delta=None, cancel=None,
                 stop_when: Callable[[str], bool] | None = None) -> ModelReply:
        """One model call. stop_when, called with each piece of streamed content: True ends the reply there (the
        stream is closed, which stops the generation upstream)."""
        kind = "closing" if tool_choice == "none" else "turn"
        body = {"model": self.name, "messages": messages, **self.options}
        # A client may ask for fewer tokens than the deployment allows, never more.
        asked = [v for k in ("max_tokens", "max_completion_tokens")
                 if isinstance(v := body.pop(k, None), int) and v > 0]
        body["max_tokens"] = min([max_tokens_for(kind), *asked])
        if body.get("temperature") is None and settings.ASSISTANT_TEMPERATURE is not None:
            body["temperature"] = settings.ASSISTANT_TEMPERATURE
        if tools:
            body.update(tools=tools, tool_choice=tool_choice)
        else:
            body.pop("parallel_tool_calls", None)  # refused without tools
        timeout = max(0.5, min(settings.LLM_TIMEOUT_SECONDS, deadline - time.monotonic()))
        try:
            with llm_priority(kind):
                # With tools on offer the answer is streamed even when nobody reads it as it comes: a model that
                # writes its call as text goes on writing (more calls, invented results) until max_tokens, and
                # closing the stream once the call is complete (stop_when) ends that generation.
                if on_delta is None and not tools:
                    return _reply_from_completion(chat_completion_send(self._client, body, timeout=timeout))
                # The usage of a stream comes in its last chunk, when asked for (OpenAI's stream_options).
                body["stream_options"] = {"include_usage": True}
                return _reply_from_stream(chat_completion_send(self._client, body, timeout=timeout, stream=True),
                                          on_delta=on_delta or (lambda text: None), cancel=cancel,
                                          deadline=deadline, stop_when=stop_when)
        except openai.OpenAIError as exc:
            raise chat_error(exc) from exc


def _usage(obj) -> dict:
    if not obj:
        return {}
    return {"prompt_tokens": getattr(obj, "prompt_tokens", 0) or 0,
            "completion_tokens": getattr(obj, "completion_tokens", 0) or 0}


def _reply_from_completion(resp) -> ModelReply:
    if not resp.choices:
        raise AppError("The language model returned no choices.", code="llm_error", status=502)
    choice = resp.choices[0]
    calls = [{"id": c.id, "type": "function",
              "function": {"name": c.function.name, "arguments": c.function.arguments}}
             for c in (choice.message.tool_calls or []) if getattr(c, "function", None)]
    return ModelReply(content=choice.message.content or "", tool_calls=calls,
                      finish_reason=choice.finish_reason or "stop", usage=_usage(resp.usage))


def _reply_from_stream(stream, *, on_delta: Callable[[str], None], cancel: threading.Event | None, deadline: float,
                       stop_when: Callable[[str], bool] | None = None) -> ModelReply:
    parts: list[str] = []
    slots: dict[int, dict] = {}
    finish, usage = "stop", {}
    try:
        for chunk in stream:
            if cancel is not None and cancel.is_set():
                finish = CANCELLED
                break
            if time.monotonic() > deadline:
                finish = TIMEOUT
                break
            if getattr(chunk, "usage", None):
                usage = _usage(chunk.usage)
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            delta = choice.delta
            if delta is not None and delta.content:
                parts.append(delta.content)
                on_delta(delta.content)
                if stop_when is not None and stop_when(delta.content):
                    finish = "stop"
                    break
            for tc in (delta.tool_calls if delta is not None else None) or []:
                slot = slots.setdefault(tc.index if tc.index is not None else len(slots),
                                        {"id": "", "name": "", "arguments": ""})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function is not None:
                    name = tc.function.name or ""
                    # OpenAI sends the name once; some servers repeat it whole in every delta.
                    if name and name != slot["name"]:
                        slot["name"] = name if not slot["name"] else slot["name"] + name
                    slot["arguments"] += tc.function.arguments or ""
            if choice.finish_reason:
                finish = choice.finish_reason
    finally:
        # Closing the response is what stops generation upstream when the client has gone.
        stream.close()
    calls = [{"id": s["id"], "type": "function", "function": {"name": s["name"], "arguments": s["arguments"]}}
             for _, s in sorted(slots.items())]
    return ModelReply(content="".join(parts), tool_calls=[] if finish in (CANCELLED, TIMEOUT) else calls,
                      finish_reason=finish, usage=usage)
