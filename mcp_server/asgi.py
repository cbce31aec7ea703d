"""/mcp beside Django in one ASGI application: the SDK's Streamable HTTP app behind McpAuth, everything else Django.

Why this shape:
- The SDK serves Streamable HTTP as a Starlette (ASGI) app whose session manager runs inside the ASGI lifespan.
  Continuum is deployed under uvicorn (scripts/run serves config.asgi), so the app is mounted next to Django
  rather than inside a Django view, and lifespan events go to it (Django has no lifespan of its own). uvicorn runs
  the lifespan by default; a server started with lifespan off cannot serve /mcp. WSGI (config/wsgi.py) serves
  Django only.
- Stateless with JSON responses: each POST is one self-contained exchange, with no MCP session kept in a process.
  Web processes stay interchangeable (several uvicorn workers, several hosts behind a balancer) and nothing is lost
  when one restarts. None of the tools streams or calls back to the client, so SSE would add nothing, and a GET
  (a stream the server would hold open) is answered 405 (jsonrpc_guard.py).
- The SDK's DNS-rebinding check is replaced by Django's ALLOWED_HOSTS (McpAuth), so one host list governs every
  route; the body limit is the service's own (CONTINUUM_MAX_BODY_BYTES).
"""
from __future__ import annotations

from django.conf import settings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.middleware.cors import CORSMiddleware

from .auth import McpAuth
from .jsonrpc_guard import JsonRpcGuard
from .server import mcp_server_build

MCP_PATH = "/mcp"


def mcp_mount(django_app, *, path: str = MCP_PATH):
    """An ASGI app that answers `path` with a new MCP server and passes every other request to django_app."""
    sdk_app = mcp_server_build().streamable_http_app(
        streamable_http_path=path, stateless_http=True, json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    guarded = McpAuth(JsonRpcGuard(sdk_app, max_body_bytes=settings.DATA_UPLOAD_MAX_MEMORY_SIZE))
    # Browsers: the same origins and headers as Django's API paths (django-cors-headers' settings), answered by
    # the SDK's own framework before the key is checked (a preflight carries none).
    guarded = CORSMiddleware(guarded, allow_origins=settings.CORS_ALLOWED_ORIGINS,
                             allow_origin_regex="|".join(settings.CORS_ALLOWED_ORIGIN_REGEXES) or None,
                             allow_methods=["POST", "GET", "DELETE", "OPTIONS"],
                             allow_headers=list(settings.CORS_ALLOW_HEADERS),
                             expose_headers=list(settings.CORS_EXPOSE_HEADERS), max_age=settings.CORS_PREFLIGHT_MAX_AGE)

    async def application(scope, receive, send):
        if scope["type"] == "lifespan":
            return await sdk_app(scope, receive, send)  # starts and stops the SDK's session manager
        if scope["type"] == "http" and (scope["path"] == path or scope["path"].startswith(path + "/")):
            return await guarded(scope, receive, send)
        return await django_app(scope, receive, send)

    return application
