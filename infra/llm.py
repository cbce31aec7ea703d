"""The LLM adapter: an OpenAI-compatible client from settings; not configured is a valid state."""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
import uuid

import json_repair
import jsonschema
import openai
from django.conf import settings

from .errors import AppError, LLMNotConfigured, ServiceUnavailable

log = logging.getLogger(__name__)


def llm_configured() -> bool:
    return bool(settings.LLM_BASE_URL and settings.LLM_MODEL)


@functools.lru_cache(maxsize=4)
def _client(base_url: str, api_key: str, timeout: float, retries: int) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=retries)


def llm_required() -> None:
    """A 503 `llm_not_configured` unless a model is configured: every surface that needs one says so in these words."""
    if not llm_configured():
        raise LLMNotConfigured("No LLM is configured (set LLM_BASE_URL and LLM_MODEL). The memory-service endpoints "
                               "(messages, context) work without one, beside a model of your own.")


def get_client() -> openai.OpenAI:
    llm_required()
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


# --- call kinds: what each may generate, and who waits on it ----------------------------------------------------------

# A user waits on these; everything else (extraction, bridges, anchors, consolidation) runs in the background.
FOREGROUND_KINDS = frozenset({"turn", "closing", "rewrite"})


def max_tokens_for(kind: str) -> int:
    """The generation cap of one call kind (settings.LLM_MAX_TOKENS). Every call is bounded: on a CPU model an
    unbounded answer can run for minutes, and a rambling small model will use whatever it is given."""
    limits = settings.LLM_MAX_TOKENS
    return int(limits.get(kind) or limits["default"])


def _gate_redis():
    from .redis_client import Keys, get_redis

    return get_redis(), Keys.global_lock("llm-foreground"), Keys.global_lock("llm-background")


@contextlib.contextmanager
def llm_priority(kind: str, *, seconds: float | None = None, hold: float | None = None):
    """Around one model call (or a whole turn of them): a user's calls go first, background calls wait for them.

    A local CPU model serves a few requests at a time and shares its cores between them, so background extraction
    running beside (or queued ahead of) a turn makes the user wait minutes. With LLM_BACKGROUND_CONCURRENCY > 0,
    foreground calls announce themselves in Redis (a counter: web and workers may be different processes); a
    background call waits while any is in flight (at most LLM_BACKGROUND_HOLD_SECONDS, so a busy chat cannot starve
    extraction for ever), and takes one of LLM_BACKGROUND_CONCURRENCY slots, so that with the server started with
    one slot more than that a turn never queues behind background work. 0 (hosted APIs) gates nothing.
    `seconds`: how long a foreground mark may stand at most (default: one call's timeout with its retries).
    `hold`: how long a background call waits for foreground calls at most (default LLM_BACKGROUND_HOLD_SECONDS).
    """
    slots = settings.LLM_BACKGROUND_CONCURRENCY
    if slots <= 0:
        yield
        return
    try:
        redis, fg_key, bg_key = _gate_redis()
    except Exception:  # the gate is a courtesy to the user; without Redis the call still runs
        log.warning("LLM priority gate unavailable", exc_info=True)
        yield
        return
    expiry = int(settings.LLM_TIMEOUT_SECONDS * (settings.LLM_MAX_RETRIES + 1)) + 30
    if kind in FOREGROUND_KINDS:
        expiry = int(seconds) + 30 if seconds is not None else expiry
        token = f"{uuid.uuid4().hex}"
        try:
            # A sorted set of in-flight calls scored by when they expire: a crashed process cannot hold
            # background work back past its own call's timeout.
            redis.zadd(fg_key, {token: time.time() + expiry})
        except Exception:
            log.warning("LLM priority gate unavailable", exc_info=True)
            token = None
        try:
            yield
        finally:
            if token:
                with contextlib.suppress(Exception):
                    redis.zrem(fg_key, token)
        return
    held_until = time.monotonic() + (settings.LLM_BACKGROUND_HOLD_SECONDS if hold is None else hold)
    lock = None
    try:
        while True:
            redis.zremrangebyscore(fg_key, "-inf", time.time())
            if time.monotonic() >= held_until or not redis.zcard(fg_key):
                for n in range(slots):
                    candidate = redis.lock(f"{bg_key}:{n}", timeout=expiry)
                    if candidate.acquire(blocking=False):
                        lock = candidate
                        break
                if lock is not None:
                    break
            if time.monotonic() >= held_until + settings.LLM_TIMEOUT_SECONDS:
                # Every background slot stayed busy: retryable, so a task tries again later or uses its rules.
                raise ServiceUnavailable("No background LLM slot came free.", code="llm_busy")
            time.sleep(0.25)
    except ServiceUnavailable:
        raise
    except Exception:
        log.warning("LLM priority gate unavailable", exc_info=True)
    try:
        yield
    finally:
        if lock is not None:
            with contextlib.suppress(Exception):
                lock.release()


# --- structured outputs ---------------------------------------------------------------------------------------------

class StructuredOutputInvalid(ValueError):
    """The model's answer does not fit its schema even after one repair: callers take their rule path."""


_LENGTH_BOUNDS = ("maxLength", "minLength", "maxItems", "minItems")


def schema_as_sent(schema):
    """The schema a request carries: its length bounds kept when LLM_SCHEMA_LENGTH_LIMITS, else removed (see
    settings). Code that reads an answer never relies on a bound being enforced: it clips lengths itself."""
    if settings.LLM_SCHEMA_LENGTH_LIMITS:
        return schema
    if isinstance(schema, dict):
        return {k: schema_as_sent(v) for k, v in schema.items() if k not in _LENGTH_BOUNDS}
    if isinstance(schema, list):
        return [schema_as_sent(v) for v in schema]
    return schema


def structured_parse(content: str, schema: dict) -> dict:
    """The answer as an object that validates against the schema; one json-repair try (a small model's JSON may be
    cut off by max_tokens or carry a stray comma); StructuredOutputInvalid when neither fits."""
    validator = jsonschema.Draft202012Validator(schema)
    problem = "empty answer"
    for attempt in ("parse", "repair"):
        try:
            value = json.loads(content) if attempt == "parse" else json_repair.loads(content)
        except (ValueError, RecursionError) as exc:
            problem = f"not JSON ({exc})"
            continue
        if attempt == "repair":
            value = _cut_item_dropped(value, validator)
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is None:
            return value
        problem = f"{error.message} at {'/'.join(map(str, error.absolute_path)) or 'the top'}"
    raise StructuredOutputInvalid(f"the answer does not fit the schema: {problem}")


def _cut_item_dropped(value, validator):
    """An answer cut off by max_tokens inside the last item of a list: the repaired JSON closes that item half
    written. Drop it when it is the only thing wrong, so the complete items before it count. Cut just as its last
    field began (`"implied": ` closed as ""), that field is dropped when the schema does not require it."""
    paths = {tuple(e.absolute_path)[:2] for e in validator.iter_errors(value)}
    if len(paths) != 1 or not isinstance(value, dict):
        return value
    (path,) = paths
    if (len(path) == 1 and value and path[0] == list(value)[-1]
            and path[0] not in validator.schema.get("required", ())):
        return {k: v for k, v in value.items() if k != path[0]}
    items = value.get(path[0]) if len(path) == 2 else None
    if not isinstance(items, list) or path[1] != len(items) - 1:
        return value
    return {**value, path[0]: items[:-1]}


def structured_completion(*, system: str, user: str, schema_name: str, schema: dict, fast: bool = True,
                          kind: str = "default", max_tokens: int | None = None) -> dict:
    """One chat call constrained by a JSON schema; returns the parsed object, validated against the schema.

    `kind` names the call (extraction, bridge, anchor, rewrite, consolidate): its max_tokens and its priority;
    `max_tokens` replaces the kind's cap for a call whose answer grows with its input.
    Raises ServiceUnavailable (retryable) on transport errors and ValueError (StructuredOutputInvalid) when the
    answer does not fit the schema even after a repair.
    """
    client = get_client()
    schema = schema_as_sent(schema)
    try:
        with llm_priority(kind):
            resp = chat_completion_send(client, {
                "model": fast_model() if fast else main_model(),
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": schema_name, "schema": schema, "strict": True}},
                "temperature": 0,
                "max_tokens": max_tokens or max_tokens_for(kind),
            })
    except (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError,
            openai.InternalServerError) as exc:
        raise ServiceUnavailable(f"LLM call failed: {exc.__class__.__name__}", code="llm_unavailable") from exc
    except openai.APIStatusError as exc:
        # A 4xx (e.g. the model does not support JSON schemas) will not heal on retry: callers fall back. It is the
        # model service refusing this request, not an outage, so it is a 502, never a 503 "try again".
        raise AppError(f"LLM refused the call: HTTP {exc.status_code}", code="llm_rejected", status=502,
                       retryable=False) from exc
    if not resp.choices:
        raise StructuredOutputInvalid("the model returned no choices")
    return structured_parse(resp.choices[0].message.content or "", schema)
