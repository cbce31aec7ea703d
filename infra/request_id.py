"""Every HTTP response carries an `x-request-id`, and every log line written while serving it says the same id.

The id is the caller's own when it sends a usable `X-Request-Id` (a gateway's, for tracing across services), else a
new one. The OpenAI SDKs read it as the response's request id. It wraps the whole ASGI application, so Django and
/mcp answer alike; work a request hands to threads of its own carries it when started in a copy of the context
(contextvars.copy_context)."""
from __future__ import annotations

import contextvars
import logging
import re
import uuid

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
_USABLE = re.compile(r"^[A-Za-z0-9._:/+=@-]{1,128}$")
_HEADER = b"x-request-id"


def request_id_for(incoming: str) -> str:
    return incoming if _USABLE.match(incoming) else f"req_{uuid.uuid4().hex}"


class RequestIdMiddleware:
    """ASGI middleware: the request's id in a context variable while it is served, and on its response."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        incoming = next((v for k, v in scope.get("headers", []) if k.lower() == _HEADER), b"")
        rid = request_id_for(incoming.decode("latin-1").strip())
        token = REQUEST_ID.set(rid)

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != _HEADER]
                message = {**message, "headers": [*headers, (_HEADER, rid.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)


class RequestIdLogFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get()
        return True
