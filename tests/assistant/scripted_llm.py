"""A scripted OpenAI-compatible chat endpoint for respx: each model call gets the next scripted reply."""
from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import respx

LLM_BASE_URL = "http://llm.test/v1"


def call(name: str, arguments, call_id: str | None = None) -> dict:
    """One tool call as the model sends it; arguments may be a dict or a raw string (possibly broken)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id or f"call_{uuid.uuid4().hex[:10]}", "type": "function",
            "function": {"name": name, "arguments": raw}}


def tool_step(*calls: dict, content: str | None = None) -> dict:
    return {"content": content, "tool_calls": list(calls)}


def answer(text: str) -> dict:
    return {"content": text, "tool_calls": []}


def cut(text: str) -> dict:
    """An answer the model stopped writing at its max_tokens."""
    return {"content": text, "tool_calls": [], "finish_reason": "length"}


def _finish(reply: dict) -> str:
    return reply.get("finish_reason") or ("tool_calls" if reply.get("tool_calls") else "stop")


def _completion(reply: dict, model: str) -> dict:
    message = {"role": "assistant", "content": reply.get("content")}
    if reply.get("tool_calls"):
        message["tool_calls"] = reply["tool_calls"]
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:8]}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}


def _chunks(reply: dict, model: str, pieces: int = 6) -> list[dict]:
    cid = f"chatcmpl-{uuid.uuid4().hex[:8]}"

    def chunk(delta, finish=None):
        return {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    text = reply.get("content") or ""
    if text:
        size = max(1, len(text) // pieces + 1)
        out += [chunk({"content": text[i:i + size]}) for i in range(0, len(text), size)]
    for index, tc in enumerate(reply.get("tool_calls") or []):
        args = tc["function"]["arguments"]
        half = len(args) // 2
        out.append(chunk({"tool_calls": [{"index": index, "id": tc["id"], "type": "function",
                                          "function": {"name": tc["function"]["name"], "arguments": args[:half]}}]}))
        out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": args[half:]}}]}))
    out.append(chunk({}, _finish(reply)))
    return out


class ScriptedLLM:
    """respx side effect. `script` holds replies (dicts) or callables(request_json) -> reply, used in order;
    `then` (a reply or callable) answers every call after the script runs out, else the call fails the test.
    `requests` holds the assistant's own calls; JSON-schema helper calls go to `structured_requests`."""

    def __init__(self, model: str = "test-model"):
        self.model = model
        self.script: list = []
        self.then = None
        self.requests: list[dict] = []
        self.chunk_delay = 0.0  # seconds between streamed chunks (to test disconnects)
        self.chunks_sent = 0
        self.errors: list[str] = []
        self.structured_requests: list[dict] = []
        self._lock = threading.Lock()

    def add(self, *replies) -> ScriptedLLM:
        self.script.extend(replies)
        return self

    @property
    def tool_requests(self) -> list[dict]:
        return [r for r in self.requests if r.get("tools")]

    def structured(self, body: dict) -> httpx.Response:
        """Schema-constrained helper calls (query rewrite, extraction, summaries) are not part of the script:
        a memory query is rewritten as itself; anything else fails, and its caller falls back to no-LLM mode."""
        fmt = body["response_format"].get("json_schema", {})
        if fmt.get("name") == "memory_query":
            query = body["messages"][-1]["content"].splitlines()[0]
            return httpx.Response(200, json=_completion({"content": json.dumps({"query": query, "parts": []})},
                                                        self.model))
        return httpx.Response(503, json={"error": {"message": "not scripted", "type": "server_error"}})

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("response_format"):
            with self._lock:
                self.structured_requests.append(body)
            return self.structured(body)
        with self._lock:
            self.requests.append(body)
            step = self.script.pop(0) if self.script else self.then
        if step is None:
            self.errors.append(f"unscripted model call #{len(self.requests)}")
            return httpx.Response(500, json={"error": {"message": "unscripted call", "type": "server_error"}})
        if isinstance(step, httpx.Response):
            return step
        reply = step(body) if callable(step) else step
        if isinstance(reply, httpx.Response):
            return reply
        if not body.get("stream"):
            return httpx.Response(200, json=_completion(reply, self.model))
        chunks = _chunks(reply, self.model)

        def stream():
            for c in chunks:
                if self.chunk_delay:
                    time.sleep(self.chunk_delay)
                self.chunks_sent += 1
                yield f"data: {json.dumps(c)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream())


@contextlib.contextmanager
def llm_scripted(settings, scripted: ScriptedLLM) -> Iterator[ScriptedLLM]:
    """The service's model configured at LLM_BASE_URL and answered by `scripted` (respx) until the block ends; no
    call may have gone unscripted."""
    from infra import llm

    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_API_KEY = LLM_BASE_URL, "test-model", "test-key"
    settings.LLM_MAX_RETRIES = 0
    llm._client.cache_clear()
    with respx.mock(assert_all_called=False) as router:
        router.post(f"{LLM_BASE_URL}/chat/completions").mock(side_effect=scripted)
        scripted.router = router
        yield scripted
    llm._client.cache_clear()
    assert not scripted.errors, scripted.errors
