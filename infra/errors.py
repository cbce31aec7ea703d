"""The one application error type: a code, a message, an HTTP status and whether a retry may help."""
from __future__ import annotations


class AppError(Exception):
    status = 400
    code = "bad_request"
    retryable = False

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 details: dict | None = None, retryable: bool | None = None, headers: dict | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        if status:
            self.status = status
        if retryable is not None:
            self.retryable = retryable
        self.details = details or {}
        self.headers = headers or {}


class ValidationFailed(AppError):
    status = 400
    code = "invalid"


class NotFound(AppError):
    status = 404
    code = "not_found"


class Conflict(AppError):
    status = 409
    code = "conflict"


class PayloadTooLarge(AppError):
    status = 413
    code = "payload_too_large"


class RateLimited(AppError):
    status = 429
    code = "rate_limited"
    retryable = True


class ServiceUnavailable(AppError):
    """A dependency (Redis, Qdrant, the LLM) is down; the client may retry later."""

    status = 503
    code = "service_unavailable"
    retryable = True


class LLMNotConfigured(ServiceUnavailable):
    code = "llm_not_configured"
    retryable = False
