"""What the stateless /mcp endpoint refuses before the SDK reads a message, by the transport and JSON-RPC specs.

- Only POST is served. The server is stateless (no MCP session, nothing to resume or to send unasked), so a GET
  that would open a server-to-client SSE stream is answered 405, as the Streamable HTTP transport allows, instead
  of a stream held open (with pings) for as long as the client likes; DELETE has no session to end.
- A POSTed message must be one JSON-RPC 2.0 object, and a request's id a string or an integer (MCP forbids null).
  Anything else is an Invalid Request (-32600) answered with id null and HTTP 400; the SDK alone would take an
  object id for a notification (202, no answer) and a batch or a missing "jsonrpc" for bad params (-32602).

Bodies over the limit, and bodies that are not JSON (Parse error, -32700), go on to the SDK, which answers them.
"""
from __future__ import annotations

import json

INVALID_REQUEST = -32600
ALLOWED_METHODS = "POST"


def jsonrpc_invalid_reason(message) -> str | None:
    """Why a parsed body is not a JSON-RPC 2.0 message the server can answer, or None when it is one."""
    if not isinstance(message, dict):
        return "A message is one JSON-RPC object; batches are not supported."
    if message.get("jsonrpc") != "2.0":
        return "A message must say \"jsonrpc\": \"2.0\"."
    if "method" in message:
        if not isinstance(message["method"], str):
            return "method must be a string."
        if "id" in message and (isinstance(message["id"], bool) or not isinstance(message["id"], (str, int))):
            return "A request's id must be a string or an integer."
    return None


def _error(message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": INVALID_REQUEST, "message": message}}).encode()


async def _answer(send, status: int, body: bytes, headers: dict | None = None) -> None:
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class JsonRpcGuard:
    """ASGI middleware in front of the SDK's stateless Streamable HTTP app (see the module's docstring)."""

    def __init__(self, app, *, max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["method"] != "POST":
            return await _answer(send, 405, _error(f"Method Not Allowed: this stateless server takes "
                                                   f"{ALLOWED_METHODS} only."), {"Allow": ALLOWED_METHODS})
        chunks, size, more = [], 0, True
        while more and size <= self.max_body_bytes:
            event = await receive()
            if event["type"] == "http.disconnect":
                return
            chunks.append(event.get("body", b""))
            size += len(chunks[-1])
            more = event.get("more_body", False)
        if not more and size <= self.max_body_bytes:
            try:
                reason = jsonrpc_invalid_reason(json.loads(b"".join(chunks)))
            except (ValueError, RecursionError):
                reason = None
            if reason:
                return await _answer(send, 400, _error(f"Invalid Request: {reason}"))
        return await self.app(scope, _replay(chunks, more, receive), send)


def _replay(chunks: list[bytes], more: bool, receive):
    """A receive that hands the SDK the chunks already read, then the rest of the body, then what follows."""
    pending = list(chunks)

    async def replayed():
        if pending:
            body = pending.pop(0)
            return {"type": "http.request", "body": body, "more_body": bool(pending) or more}
        return await receive()

    return replayed
