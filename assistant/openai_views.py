"""The OpenAI-compatible endpoints: POST /v1/chat/completions (JSON or server-sent events) and GET /v1/models.

Plain async Django views rather than DRF, because this surface speaks OpenAI's error shape and streams under ASGI.
The turn runs in a worker thread; a client that disconnects cancels the stream, which stops the model.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

import redis
from asgiref.sync import sync_to_async
from django.core.exceptions import RequestDataTooBig
from django.db import connections
from django.http import JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from infra.errors import AppError, LLMNotConfigured, PayloadTooLarge, ServiceUnavailable
from infra.llm import llm_configured
from tenants.authentication import tenant_from_api_key

from . import openai_compat as compat
from .turns import turn_run

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 10.0
_STORE_DOWN = ServiceUnavailable("Session store is unavailable; retry shortly.", headers={"Retry-After": "5"})


def _error(exc: AppError) -> JsonResponse:
    response = JsonResponse(compat.error_body(exc), status=exc.status)
    for name, value in exc.headers.items():
        response[name] = value
    if exc.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="continuum"'
    return response


def _authenticate(request):
    return tenant_from_api_key(request.headers.get("Authorization", ""))


def _prepare(request, tenant, chat: compat.ChatRequest):
    """Everything that touches the database before the turn: who, which session, which turns to import."""
    if not llm_configured():
        raise LLMNotConfigured("No LLM is configured (set LLM_BASE_URL and LLM_MODEL); use the memory-service "
                               "endpoints (messages, context) with your own model.")
    user = compat.chat_user_resolve(tenant=tenant, body_user=chat.user, header_user=request.headers.get("X-User-Id"))
    session = compat.chat_session_resolve(tenant=tenant, user=user,
                                          session_id=(request.headers.get("X-Session-Id") or "").strip() or None)
    earlier = compat.chat_earlier_missing(tenant=tenant, session=session, earlier=chat.earlier,
                                          user_input=chat.user_input)
    return session, earlier


def _start_turn(*, tenant, session, chat: compat.ChatRequest, earlier, loop, queue: asyncio.Queue,
                stream: bool) -> threading.Event:
    """Run the turn in its own thread (it blocks on the model); events come back through the queue."""
    cancel = threading.Event()

    def post(kind, payload=None):
        loop.call_soon_threadsafe(queue.put_nowait, (kind, payload))

    def target():
        try:
            result = turn_run(tenant=tenant, session=session, user_input=chat.user_input, earlier=earlier,
                              client_system=chat.client_system, model_options=chat.options,
                              on_delta=(lambda text: post("delta", text)) if stream else None, cancel=cancel,
                              surface="openai")
            post("done", result)
        except AppError as exc:
            post("error", exc)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            log.warning("session store unavailable during a chat completion", exc_info=True)
            post("error", _STORE_DOWN)
        except Exception:
            log.exception("chat completion turn failed for session %s", session.pk)
            post("error", AppError("The turn failed unexpectedly.", code="internal_error", status=500))
        finally:
            connections.close_all()  # this thread's own connections; the request's are Django's to close

    threading.Thread(target=target, name=f"turn-{session.pk}", daemon=True).start()
    return cancel


def _sse(body: dict) -> str:
    return f"data: {json.dumps(body, ensure_ascii=False, default=str)}\n\n"


async def _event_stream(*, tenant, session, chat, earlier, cid: str):
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    created = int(time.time())
    cancel = _start_turn(tenant=tenant, session=session, chat=chat, earlier=earlier, loop=loop, queue=queue,
                         stream=True)
    try:
        yield _sse(compat.chunk_body(cid=cid, created=created, model=chat.model,
                                     delta={"role": "assistant", "content": ""}))
        while True:
            try:
                kind, payload = await asyncio.wait_for(queue.get(), timeout=KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keep-alive\n\n"  # tools may run a while between deltas; proxies must not drop us
                continue
            if kind == "delta":
                yield _sse(compat.chunk_body(cid=cid, created=created, model=chat.model, delta={"content": payload}))
            elif kind == "done":
                yield _sse(compat.chunk_body(cid=cid, created=created, model=chat.model, delta={},
                                             finish_reason="stop", result=payload))
                break
            else:
                yield _sse(compat.error_body(payload))
                break
        yield "data: [DONE]\n\n"
    finally:
        # Reached on normal completion (a no-op then) and when the client disconnects (ASGI cancels us).
        cancel.set()


@csrf_exempt
async def chat_completions(request):
    if request.method != "POST":
        return _error(AppError("Use POST.", code="method_not_allowed", status=405))
    try:
        tenant = await sync_to_async(_authenticate)(request)
        try:
            body = request.body
        except RequestDataTooBig:
            raise PayloadTooLarge("Request body is too large.")
        chat = compat.chat_request_parse(body)
        session, earlier = await sync_to_async(_prepare)(request, tenant, chat)
    except AppError as exc:
        return _error(exc)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
        return _error(_STORE_DOWN)
    cid = compat.completion_id()
    headers = {"X-Session-Id": str(session.pk)}
    if chat.stream:
        response = StreamingHttpResponse(_event_stream(tenant=tenant, session=session, chat=chat, earlier=earlier,
                                                       cid=cid), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        for name, value in headers.items():
            response[name] = value
        return response

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    cancel = _start_turn(tenant=tenant, session=session, chat=chat, earlier=earlier, loop=loop, queue=queue,
                         stream=False)
    try:
        kind, payload = await queue.get()
    except asyncio.CancelledError:
        cancel.set()
        raise
    if kind == "error":
        return _error(payload)
    response = JsonResponse(compat.completion_body(cid=cid, model=chat.model, result=payload))
    for name, value in headers.items():
        response[name] = value
    return response


async def models(request):
    if request.method != "GET":
        return _error(AppError("Use GET.", code="method_not_allowed", status=405))
    try:
        tenant = await sync_to_async(_authenticate)(request)
    except AppError as exc:
        return _error(exc)
    return JsonResponse(compat.models_body(tenant=tenant))
