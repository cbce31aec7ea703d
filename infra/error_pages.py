"""Every error answer is JSON: Django's own error pages become the error shape of the surface that was asked.

Django answers some requests before any view or DRF handler runs, or after one failed: an unknown path (404), a
method a plain view refuses (405), an uncaught exception (500), a bad Host header (400), a CSRF failure (403); with
DEBUG on (the local settings), as its HTML debug pages. API clients parse JSON, so those answers are rewritten here:
`/v1/*` in OpenAI's error shape, everything else in the service's own. The admin's pages are for browsers and stay
as they are.
"""
from __future__ import annotations

import http

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import JsonResponse

from .exception_handler import error_body

BROWSER_PATHS = ("/admin/",)
_CODES = {400: "bad_request", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large",
          500: "internal_error"}
_MESSAGES = {404: "No endpoint at this path.", 500: "The server failed to answer this request; it has been logged."}


def _needs_json(request, response) -> bool:
    if response.status_code < 400 or getattr(response, "streaming", False):
        return False
    if "json" in (response.get("Content-Type") or ""):
        return False
    return not request.path.startswith(BROWSER_PATHS)


def json_error(request, response):
    """The response itself, or a JSON error of the same status (and Allow header) in place of an error page."""
    if not _needs_json(request, response):
        return response
    status = response.status_code
    phrase = http.HTTPStatus(status).phrase if status in http.HTTPStatus._value2member_map_ else "Error"
    code = _CODES.get(status, phrase.lower().replace(" ", "_").replace("-", "_"))
    message = _MESSAGES.get(status, f"{phrase}.")
    if request.path.startswith("/v1/"):
        kind = "server_error" if status >= 500 else "invalid_request_error"
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    else:
        body = error_body(code, message)
    replaced = JsonResponse(body, status=status)
    for header in ("Allow", "Retry-After"):
        if response.has_header(header):
            replaced[header] = response[header]
    return replaced


class JsonErrorMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.async_mode:
            return self._acall(request)
        return json_error(request, self.get_response(request))

    async def _acall(self, request):
        return json_error(request, await self.get_response(request))
