"""The OpenAI-compatible endpoints: POST /v1/chat/completions and POST /v1/responses (JSON or server-sent events),
GET /v1/models and /v1/models/{id}.

Plain async Django views rather than DRF, because this surface speaks OpenAI's error shape and streams under ASGI.
The turn runs on one of ASSISTANT_TURN_THREADS threads (a burst beyond them queues); a client that disconnects
cancels the stream, which stops the model. A chat UI's background task (assistant/chat_tasks.py: a title, tags,
follow-ups) is answered on threads of its own and touches no user, session or memory.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import json
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import connections
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from assistant.chat_tasks import TASK_HEADER, TaskAnswer, chat_task_answer, chat_task_messages, chat_task_of
from assistant.idempotency import Claim, Replay, idempotency_claim, idempotency_key_parse
from assistant.turns import turn_run
from infra.errors import AppError, NotFound, PayloadTooLarge, ServiceUnavailable
from infra.llm import llm_required
from sessions.selectors import access_session
from tenants.authentication import tenant_from_api_key

from . import responses
from .bodies import (
    chunk_body,
    completion_body,
    completion_id,
    error_body,
    model_check,
    models_body,
    task_completion_body,
    task_extension,
    tool_calls_delta,
    usage_chunk,
)
from .requests import ChatRequest, chat_request_parse, chat_user_name, invalid, session_header_parse
from .sessions import chat_place, chat_session_check, chat_user_resolve, open_turn_input

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 10.0
TASK_THREADS = 4  # a chat UI's background tasks have threads of their own: a burst of them never takes a turn's
_STORE_DOWN = ServiceUnavailable("Session store is unavailable; retry shortly.", headers={"Retry-After": "5"})


def _error(exc: AppError) -> JsonResponse:
    response = JsonResponse(error_body(exc), status=exc.status)
    for name, value in exc.headers.items():
        response[name] = value
    if exc.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="continuum"'
    return response


def _authenticate(request):
    return tenant_from_api_key(request.headers.get("Authorization", ""))


@dataclass
class Prepared:
    """What a request runs with once accepted, or the first response of the request its Idempotency-Key names."""
    session: object = None
    earlier: list = field(default_factory=list)
    claim: Claim | None = None
    replay: Replay | None = None
    task: str | None = None  # a chat UI's background task (assistant/chat_tasks.py): answered, nothing placed or stored


def _prepare_chat(request, tenant, chat: ChatRequest) -> Prepared:
    """A chat completion: a chat UI's background task is answered apart (no user, session or turn is touched, so a
    title request can neither be stored as the user's message nor close the open session as a new chat)."""
    task = chat_task_of(header=request.headers.get(TASK_HEADER), metadata=chat.metadata, user_input=chat.user_input,
                        earlier=chat.earlier, continuing=chat.tool_results is not None)
    if task is None:
        return _prepare(request, tenant, chat)
    model_check(chat.model)
    llm_required()
    return Prepared(task=task)


def _prepare(request, tenant, chat: ChatRequest, *, previous_session=None) -> Prepared:
    """Everything that touches the database before the turn: who, which session, which turns to import.

    The request, its user and its session are checked (4xx with a reason) before anything is created and before
    the model is asked for: a 503 for a missing model answers only a request that would otherwise run.
    `previous_session`: the session a Responses API previous_response_id names (its user is the default user)."""
    model_check(chat.model)
    header_user = request.headers.get("X-User-Id")
    if previous_session is not None and not (chat.user or (header_user or "").strip()):
        header_user = previous_session.user.external_id
    external_id = chat_user_name(body_user=chat.user, header_user=header_user)
    session_id = session_header_parse(request.headers.get("X-Session-Id"))
    key = idempotency_key_parse(request.headers.get("Idempotency-Key"))
    if previous_session is not None:
        if previous_session.user.external_id != external_id:
            raise NotFound("Previous response not found.")  # the same answer as for a missing one
        if session_id is None and previous_session.state == previous_session.State.OPEN:
            session_id = previous_session.pk  # a closed one: the user's conversation goes on in a new session
    named = chat_session_check(tenant=tenant, external_id=external_id, session_id=session_id) \
        if session_id is not None else None
    llm_required()
    user = chat_user_resolve(tenant=tenant, external_id=external_id)
    claim = None
    if key:
        claim = idempotency_claim(tenant_id=tenant.pk, user_id=user.pk, key=key, request_parts=[
            request.path, request.headers.get("X-Session-Id") or "", request.body])
        if isinstance(claim, Replay):
            return Prepared(replay=claim)
    try:
        return _place_turn(tenant, chat, user=user, named=named, claim=claim)
    except BaseException:
        if claim is not None:
            claim.release()
        raise


def _place_turn(tenant, chat: ChatRequest, *, user, named, claim) -> Prepared:
    if not chat.user_input:  # tool outputs for the previous response: its turn's input is the session's
        if named is None:
            raise invalid("Tool outputs without an input continue a previous response: send previous_response_id.",
                          param="input")
        chat.user_input = open_turn_input(tenant=tenant, session=named)
    placement = chat_place(tenant=tenant, user=user, user_input=chat.user_input, earlier=chat.earlier,
                           session=named, continuing=chat.tool_results is not None)
    if placement.repeated_input:  # a retry or regenerate: the turn reuses the stored input, as it was stored
        chat.user_input = placement.repeated_input
    return Prepared(session=placement.session, earlier=placement.earlier, claim=claim)


@functools.lru_cache(maxsize=1)
def _turn_threads(size: int) -> ThreadPoolExecutor:
    """The threads chat turns run on. A turn blocks its thread on the model for up to ASSISTANT_WALL_CLOCK_SECONDS,
    so a burst of requests takes at most `size` threads and queues the rest, rather than a thread each."""
    return ThreadPoolExecutor(max_workers=size, thread_name_prefix="chat-turn")


def _start_turn(*, tenant, session, chat: ChatRequest, earlier, loop, queue: asyncio.Queue,
                stream: bool) -> threading.Event:
    """Run the turn on a turn thread (it blocks on the model); events come back through the queue."""
    cancel = threading.Event()

    def post(kind, payload=None):
        loop.call_soon_threadsafe(queue.put_nowait, (kind, payload))

    def target():
        if cancel.is_set():  # the client left while the turn waited for a thread: nothing is recorded
            return
        try:
            result = turn_run(tenant=tenant, session=session, user_input=chat.user_input, earlier=earlier,
                              client_system=chat.client_system, model_options=chat.options,
                              on_delta=(lambda text: post("delta", text)) if stream else None, cancel=cancel,
                              client_tools=chat.client_tools, tool_results=chat.tool_results,
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

    # In a copy of the request's context: the turn's log lines carry the request's id.
    _turn_threads(max(1, settings.ASSISTANT_TURN_THREADS)).submit(contextvars.copy_context().run, target)
    return cancel


def _sse(body: dict) -> str:
    return f"data: {json.dumps(body, ensure_ascii=False, default=str)}\n\n"


async def _event_stream(*, tenant, session, chat, earlier, cid: str):
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    created = int(time.time())
    cancel = _start_turn(tenant=tenant, session=session, chat=chat, earlier=earlier, loop=loop, queue=queue,
                         stream=True)
    chunk = functools.partial(chunk_body, cid=cid, created=created, model=chat.model,
                              include_usage=chat.include_usage)
    try:
        yield _sse(chunk(delta={"role": "assistant", "content": ""}))
        while True:
            try:
                kind, payload = await asyncio.wait_for(queue.get(), timeout=KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keep-alive\n\n"  # tools may run a while between deltas; proxies must not drop us
                continue
            if kind == "delta":
                yield _sse(chunk(delta={"content": payload}))
            elif kind == "done":
                if payload.pending_calls:
                    yield _sse(chunk(delta=tool_calls_delta(payload.pending_calls)))
                yield _sse(chunk(delta={}, finish_reason=payload.finish_reason, result=payload))
                if chat.include_usage:
                    yield _sse(usage_chunk(cid=cid, created=created, model=chat.model, result=payload))
                break
            else:
                yield _sse(error_body(payload))
                break
        yield "data: [DONE]\n\n"
    finally:
        # Reached on normal completion (a no-op then) and when the client disconnects (ASGI cancels us).
        cancel.set()


async def _accept(request, parse, prepare):
    """What both POST surfaces do first, in this order: the method, the key, the body read and parsed, then the
    user and session resolved. Returns (request data, tenant, Prepared) or a response (an error, or the replay of
    the first response to an Idempotency-Key)."""
    if request.method != "POST":
        return _error(AppError("Use POST.", code="method_not_allowed", status=405))
    try:
        tenant = await sync_to_async(_authenticate)(request)
        try:
            body = request.body
        except RequestDataTooBig:
            raise PayloadTooLarge("Request body is too large.")
        data = parse(body)
        prepared = await sync_to_async(prepare)(request, tenant, data)
    except AppError as exc:
        return _error(exc)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
        return _error(_STORE_DOWN)
    if prepared.replay is not None:
        return _replayed(prepared.replay)
    return data, tenant, prepared


def _replayed(replay: Replay):
    if replay.content_type.startswith("text/event-stream"):
        response = StreamingHttpResponse(iter([replay.body]), content_type=replay.content_type)
    else:
        response = HttpResponse(replay.body, content_type=replay.content_type)
    for name, value in replay.headers.items():
        response[name] = value
    response["Idempotent-Replayed"] = "true"
    return response


def _streamed(frames, *, claim: Claim | None, headers: dict):
    """The event stream as the client gets it; with an Idempotency-Key, kept for the key's retries once it ended
    well (a failed or abandoned stream frees the key, so a retry runs the turn)."""
    said: list[str] = []
    failed = ('data: {"error"', "event: response.failed", "event: response.incomplete")

    async def stream():
        ended = False
        try:
            async for frame in frames:
                if claim is not None and not frame.startswith(":"):
                    said.append(frame)
                yield frame
            ended = not any(frame.startswith(failed) for frame in said)
        finally:
            if claim is not None:
                if ended:
                    claim.keep(body="".join(said), content_type="text/event-stream", headers=headers)
                else:
                    claim.release()

    response = StreamingHttpResponse(stream(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    for name, value in headers.items():
        response[name] = value
    return response


async def _answered(body: dict, *, claim: Claim | None, headers: dict) -> JsonResponse:
    response = JsonResponse(body)
    for name, value in headers.items():
        response[name] = value
    if claim is not None:  # only a keyed request pays the hop to a thread for Redis
        await sync_to_async(claim.keep)(body=response.content.decode(), content_type=response["Content-Type"],
                                        headers=headers)
    return response


async def _failed(exc: AppError, claim: Claim | None) -> JsonResponse:
    if claim is not None:
        await sync_to_async(claim.release)()
    return _error(exc)


@functools.lru_cache(maxsize=1)
def _task_threads() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=TASK_THREADS, thread_name_prefix="chat-task")


def _task_run(*, tenant, chat: ChatRequest, kind: str) -> TaskAnswer:
    try:
        return chat_task_answer(tenant=tenant, kind=kind, options=chat.options, messages=chat_task_messages(
            client_system=chat.client_system, earlier=chat.earlier, user_input=chat.user_input))
    finally:
        connections.close_all()  # this thread's own connections (the quota's tenant reads)


async def _task_answer(*, tenant, chat: ChatRequest, kind: str):
    """The task's answer, or ("error", AppError)."""
    loop = asyncio.get_running_loop()
    run = functools.partial(_task_run, tenant=tenant, chat=chat, kind=kind)
    try:
        return await loop.run_in_executor(_task_threads(), contextvars.copy_context().run, run)
    except AppError as exc:
        return exc
    except Exception:
        log.exception("chat task (%s) failed", kind)
        return AppError("The task failed unexpectedly.", code="internal_error", status=500)


async def _task_events(*, tenant, chat: ChatRequest, kind: str, cid: str):
    created = int(time.time())
    chunk = functools.partial(chunk_body, cid=cid, created=created, model=chat.model, include_usage=chat.include_usage)
    yield _sse(chunk(delta={"role": "assistant", "content": ""}))
    pending = asyncio.ensure_future(_task_answer(tenant=tenant, chat=chat, kind=kind))
    while not pending.done():
        done, _ = await asyncio.wait({pending}, timeout=KEEPALIVE_SECONDS)
        if not done:
            yield ": keep-alive\n\n"  # a task waits behind a user's turn for the model: proxies must not drop us
    answer = pending.result()
    if isinstance(answer, AppError):
        yield _sse(error_body(answer))
    else:
        if answer.reply:
            yield _sse(chunk(delta={"content": answer.reply}))
        yield _sse({**chunk(delta={}, finish_reason=answer.finish_reason), "continuum": task_extension(answer)})
        if chat.include_usage:
            yield _sse(usage_chunk(cid=cid, created=created, model=chat.model, result=answer))
    yield "data: [DONE]\n\n"


async def _task_response(*, tenant, chat: ChatRequest, kind: str):
    """A chat UI's background task, answered (streamed as one piece when asked) and stored nowhere."""
    cid = completion_id()
    headers = {TASK_HEADER: kind}
    if chat.stream:
        return _streamed(_task_events(tenant=tenant, chat=chat, kind=kind, cid=cid), claim=None, headers=headers)
    answer = await _task_answer(tenant=tenant, chat=chat, kind=kind)
    if isinstance(answer, AppError):
        return _error(answer)
    return await _answered(task_completion_body(cid=cid, model=chat.model, answer=answer), claim=None,
                           headers=headers)


@csrf_exempt
async def chat_completions(request):
    accepted = await _accept(request, chat_request_parse, _prepare_chat)
    if not isinstance(accepted, tuple):
        return accepted
    chat, tenant, prepared = accepted
    if prepared.task is not None:
        return await _task_response(tenant=tenant, chat=chat, kind=prepared.task)
    session, earlier, claim = prepared.session, prepared.earlier, prepared.claim
    cid = completion_id()
    headers = {"X-Session-Id": str(session.pk)}
    if chat.stream:
        return _streamed(_event_stream(tenant=tenant, session=session, chat=chat, earlier=earlier, cid=cid),
                         claim=claim, headers=headers)
    kind, payload = await _turn_result(tenant=tenant, session=session, chat=chat, earlier=earlier, claim=claim)
    if kind == "error":
        return await _failed(payload, claim)
    return await _answered(completion_body(cid=cid, model=chat.model, result=payload), claim=claim, headers=headers)


async def _turn_result(*, tenant, session, chat, earlier, claim: Claim | None):
    """Run a turn that is not streamed and wait for its one outcome: ("done", result) or ("error", AppError)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    cancel = _start_turn(tenant=tenant, session=session, chat=chat, earlier=earlier, loop=loop, queue=queue,
                         stream=False)
    try:
        return await queue.get()
    except asyncio.CancelledError:
        cancel.set()
        if claim is not None:
            claim.release()
        raise


def _previous_session(tenant, previous_response_id: str | None):
    if not previous_response_id:
        return None
    try:
        return access_session(tenant=tenant, session_id=responses.session_of_response(previous_response_id))
    except NotFound:
        raise NotFound("Previous response not found.")


def _prepare_response(request, tenant, req: responses.ResponsesRequest):
    return _prepare(request, tenant, req.chat,
                    previous_session=_previous_session(tenant, req.previous_response_id))


async def _response_events(*, tenant, session, req: responses.ResponsesRequest, earlier, rid: str):
    """The Responses API's typed events: created, the answer's text as it comes, each client call, completed."""
    chat = req.chat
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    created = responses.now()
    sequence = itertools.count()
    item_id = f"msg_{uuid.uuid4().hex}"
    shape = functools.partial(responses.response_object, rid=rid, created=created, model=chat.model, echo=req.echo)

    def event(kind, **fields):
        return responses.sse_event(kind, next(sequence), **fields)

    cancel = _start_turn(tenant=tenant, session=session, chat=chat, earlier=earlier, loop=loop, queue=queue,
                         stream=True)
    text: list[str] = []
    part = {"item_id": item_id, "output_index": 0, "content_index": 0}
    try:
        yield event("response.created", response=shape())
        yield event("response.in_progress", response=shape())
        while True:
            try:
                kind, payload = await asyncio.wait_for(queue.get(), timeout=KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if kind == "delta":
                if not text:
                    yield event("response.output_item.added", output_index=0,
                                item=responses.message_item(item_id=item_id, text="", status="in_progress"))
                    yield event("response.content_part.added", **part,
                                part={"type": "output_text", "text": "", "annotations": []})
                text.append(payload)
                yield event("response.output_text.delta", **part, delta=payload, logprobs=[])
            elif kind == "done":
                said = "".join(text)
                if said:
                    yield event("response.output_text.done", **part, text=said, logprobs=[])
                    yield event("response.content_part.done", **part,
                                part={"type": "output_text", "text": said, "annotations": []})
                    yield event("response.output_item.done", output_index=0,
                                item=responses.message_item(item_id=item_id, text=said))
                for index, call in enumerate(payload.pending_calls, start=1 if said else 0):
                    item = responses.call_item(call)
                    yield event("response.output_item.added", output_index=index,
                                item=responses.call_item(call, status="in_progress", arguments=""))
                    yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                                delta=item["arguments"])
                    yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                                arguments=item["arguments"])
                    yield event("response.output_item.done", output_index=index, item=item)
                final = shape(status="completed", result=payload,
                              output=responses.response_output(payload, item_id=item_id, text=said))
                yield event("response.completed" if final["status"] == "completed" else "response.incomplete",
                            response=final)
                break
            else:
                error = error_body(payload)["error"]
                yield event("response.failed", response=shape(status="failed", error={
                    "code": error["code"], "message": error["message"]}))
                break
    finally:
        cancel.set()


@csrf_exempt
async def responses_create(request):
    accepted = await _accept(request, responses.responses_request_parse, _prepare_response)
    if not isinstance(accepted, tuple):
        return accepted
    req, tenant, prepared = accepted
    session, earlier, claim = prepared.session, prepared.earlier, prepared.claim
    rid = responses.response_id(session.pk)
    headers = {"X-Session-Id": str(session.pk)}
    if req.chat.stream:
        return _streamed(_response_events(tenant=tenant, session=session, req=req, earlier=earlier, rid=rid),
                         claim=claim, headers=headers)
    kind, payload = await _turn_result(tenant=tenant, session=session, chat=req.chat, earlier=earlier, claim=claim)
    if kind == "error":
        return await _failed(payload, claim)
    body = responses.response_object(rid=rid, created=responses.now(), model=req.chat.model, echo=req.echo,
                                      status="completed", result=payload,
                                      output=responses.response_output(payload, item_id=f"msg_{uuid.uuid4().hex}"))
    return await _answered(body, claim=claim, headers=headers)


async def model_detail(request, model_id: str):
    if request.method != "GET":
        return _error(AppError("Use GET.", code="method_not_allowed", status=405))
    try:
        tenant = await sync_to_async(_authenticate)(request)
        model_check(model_id)
    except AppError as exc:
        return _error(exc)
    return JsonResponse(next(m for m in models_body(tenant=tenant)["data"] if m["id"] == model_id))


async def models(request):
    if request.method != "GET":
        return _error(AppError("Use GET.", code="method_not_allowed", status=405))
    try:
        tenant = await sync_to_async(_authenticate)(request)
    except AppError as exc:
        return _error(exc)
    return JsonResponse(models_body(tenant=tenant))
