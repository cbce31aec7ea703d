"""One DRF exception handler: every error leaves as {"error": {"code", "message", "details"}}."""
from __future__ import annotations

import logging

import redis
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_default

from .errors import AppError

log = logging.getLogger(__name__)

_DRF_CODES = {
    drf.NotAuthenticated: "not_authenticated",
    drf.AuthenticationFailed: "authentication_failed",
    drf.PermissionDenied: "permission_denied",
    drf.NotFound: "not_found",
    drf.MethodNotAllowed: "method_not_allowed",
    drf.NotAcceptable: "not_acceptable",
    drf.UnsupportedMediaType: "unsupported_media_type",
    drf.Throttled: "rate_limited",
    drf.ParseError: "malformed_body",
    drf.ValidationError: "invalid",
}


def error_body(code: str, message: str, details=None) -> dict:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def api_exception_handler(exc, context):
    if isinstance(exc, AppError):
        resp = Response(error_body(exc.code, exc.message, exc.details), status=exc.status)
        for k, v in exc.headers.items():
            resp[k] = v
        return resp
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("payload_too_large", "Request body is too large."), status=413)
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "Not found."), status=404)
    if isinstance(exc, DjangoValidationError):
        return Response(error_body("invalid", "Invalid input.", {"non_field_errors": exc.messages}), status=400)
    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        log.warning("redis unavailable: %s", exc)
        resp = Response(error_body("service_unavailable", "Session store is unavailable; retry shortly."), status=503)
        resp["Retry-After"] = "5"
        return resp
    response = drf_default(exc, context)
    if response is None:
        return None
    code = next((c for t, c in _DRF_CODES.items() if isinstance(exc, t)), "error")
    if isinstance(exc, drf.ValidationError):
        details = response.data if isinstance(response.data, dict) else {"non_field_errors": response.data}
        message = "Invalid input."
    else:
        details = {}
        message = str(getattr(exc, "detail", exc))
    response.data = error_body(code, message, details)
    return response
