"""Who an MCP request acts for: the tenant of its API key and the end user it names, checked before the SDK sees it.

The same resolution as the OpenAI-compatible surface: `Authorization: Bearer <tenant key>` gives the tenant (one
request against its quota), `X-User-Id` is the tenant's own id for the end user, who is created on first use. A
client never names a tenant.
"""
from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.exceptions import DisallowedHost
from django.db import close_old_connections
from django.http import HttpRequest

from api.openai.requests import chat_user_name
from api.openai.sessions import chat_user_resolve
from infra.errors import AppError, ValidationFailed
from infra.exception_handler import error_body
from tenants.authentication import tenant_from_api_key

USER_HEADER = "x-user-id"


@dataclass(frozen=True)
class Caller:
    tenant: object
    user: object


# Set for the whole HTTP request; the SDK serves the request in tasks it starts from it, which inherit the value
# (as the SDK's own auth context does).
_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("continuum_mcp_caller", default=None)


def current_caller() -> Caller:
    caller = _caller.get()
    if caller is None:  # only reachable if the app is served without McpAuth in front
        raise RuntimeError("An MCP handler ran outside an authenticated request.")
    return caller


def _host_allowed(headers: dict[str, str]) -> bool:
    """Django's own ALLOWED_HOSTS check (with its DEBUG defaults and X-Forwarded-Host setting), so /mcp answers for
    exactly the hosts the rest of the service does."""
    request = HttpRequest()
    request.META = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    try:
        request.get_host()
    except DisallowedHost:
        return False
    return True


def _authenticate(headers: dict[str, str]) -> Caller:
    close_old_connections()  # what Django does when a request starts
    tenant = tenant_from_api_key(headers.get("authorization", ""))
    if not (headers.get(USER_HEADER) or "").strip():
        raise ValidationFailed("Name the end user with an X-User-Id header (your id for the user).",
                               code="user_required")
    user = chat_user_resolve(tenant=tenant,
                             external_id=chat_user_name(body_user=None, header_user=headers.get(USER_HEADER)))
    return Caller(tenant=tenant, user=user)


async def _refuse(send, status: int, code: str, message: str, headers: dict | None = None) -> None:
    body = json.dumps(error_body(code, message)).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), str(v).encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class McpAuth:
    """ASGI middleware in front of the SDK's app: refuses a request before any MCP message is read unless it has
    an allowed host, a valid tenant key and an end user; otherwise serves it with the caller set.

    Every sync call of the request (this check and the tools' service calls) runs on one thread, as Django's own
    handler arranges: under infra.request_threads that is a pooled long-lived thread, so database connections are
    reused between requests.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not _host_allowed(headers):
            return await _refuse(send, 400, "disallowed_host", "Invalid Host header.")
        async with ThreadSensitiveContext():
            try:
                caller = await sync_to_async(_authenticate)(headers)
            except AppError as exc:
                extra = dict(exc.headers)
                if exc.status == 401:
                    extra["WWW-Authenticate"] = 'Bearer realm="continuum"'
                return await _refuse(send, exc.status, exc.code, exc.message, extra)
            token = _caller.set(caller)
            try:
                await self.app(scope, receive, send)
            finally:
                _caller.reset(token)
                await sync_to_async(close_old_connections)()  # what Django does when a request finishes
