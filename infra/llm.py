"""The LLM adapter: an OpenAI-compatible client from settings; not configured is a valid state."""
from __future__ import annotations

import functools
import json
import logging

import openai
from django.conf import settings

from .errors import AppError, LLMNotConfigured, ServiceUnavailable

log = logging.getLogger(__name__)


def llm_configured() -> bool:
    return bool(settings.LLM_BASE_URL and settings.LLM_MODEL)


@functools.lru_cache(maxsize=4)
def _client(base_url: str, api_key: str, timeout: float, retries: int) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=retries)


def get_client() -> openai.OpenAI:
    if not llm_configured():
        raise LLMNotConfigured("No LLM is configured (set LLM_BASE_URL and LLM_MODEL).")
    return _client(settings.LLM_BASE_URL, settings.LLM_API_KEY, settings.LLM_TIMEOUT_SECONDS, settings.LLM_MAX_RETRIES)


def chat_completion_send(client: openai.OpenAI, body: dict, *, timeout: float | None = None, stream: bool = False):
    """POST /chat/completions with a body that is already plain JSON; the answer typed as the SDK types it.

    The SDK's create() first walks every message and tool schema through its type transform: ~10 ms of CPU a call
    with tools and a full context, which a body built from dicts and strings does not need. client.post is the
    SDK's documented way to send a request of one's own, with the same retries, timeouts and errors.
    """
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    options = {"timeout": timeout} if timeout is not None else {}
    if stream:
        return client.post("/chat/completions", body={**body, "stream": True}, cast_to=ChatCompletion,
                           options=options, stream=True, stream_cls=openai.Stream[ChatCompletionChunk])
    return client.post("/chat/completions", body=body, cast_to=ChatCompletion, options=options)


def main_model() -> str:
    return settings.LLM_MODEL


def fast_model() -> str:
    return settings.LLM_FAST_MODEL or settings.LLM_MODEL


def structured_completion(*, system: str, user: str, schema_name: str, schema: dict, fast: bool = True) -> dict:
    """One chat call constrained by a JSON schema; returns the parsed object.

    Raises ServiceUnavailable (retryable) on transport errors and ValueError on an unparsable answer.
    """
    client = get_client()
    try:
        resp = chat_completion_send(client, {
            "model": fast_model() if fast else main_model(),
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": schema_name, "schema": schema, "strict": True}},
            "temperature": 0,
        })
    except (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError, openai.InternalServerError) as exc:
        raise ServiceUnavailable(f"LLM call failed: {exc.__class__.__name__}", code="llm_unavailable") from exc
    except openai.APIStatusError as exc:
        # A 4xx (e.g. the model does not support JSON schemas) will not heal on retry: callers fall back. It is the
        # model service refusing this request, not an outage, so it is a 502, never a 503 "try again".
        raise AppError(f"LLM refused the call: HTTP {exc.status_code}", code="llm_rejected", status=502,
                       retryable=False) from exc
    content = resp.choices[0].message.content or ""
    return json.loads(content)
