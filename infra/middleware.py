"""Refuse oversized request bodies with a 413 before any parser or view touches them."""
from __future__ import annotations

import re

from django.conf import settings
from django.http import JsonResponse

from .exception_handler import error_body

# The bulk import endpoint takes whole export files, up to its own limit; beyond it the file goes through the command.
IMPORT_PATH = re.compile(r"^/api/v1/users/[^/]+/import/?$")
IMPORT_HINT = ("Import larger files with `manage.py import_conversations --tenant SLUG --user USER --format FORMAT "
               "FILE`, which reads the file as a stream, or split the export.")


def body_limit(path: str) -> tuple[int | None, str]:
    """(the byte limit of a request to `path`, what to tell a client who exceeds it)."""
    if IMPORT_PATH.match(path):
        return settings.CONTINUUM_IMPORT_MAX_BODY_BYTES, IMPORT_HINT
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE, ""


class BodySizeLimitMiddleware:
    # DRF's parsers read the raw stream, bypassing Django's DATA_UPLOAD_MAX_MEMORY_SIZE check, so check it here.
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit, hint = body_limit(request.path)
        if limit is not None and request.method in ("POST", "PUT", "PATCH"):
            try:
                declared = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return JsonResponse(error_body("invalid_content_length", "Content-Length is not a number."), status=400)
            if declared > limit or (not declared and len(request.body) > limit):
                body = error_body("payload_too_large", " ".join(filter(None, [
                    f"Request body exceeds {limit} bytes.", hint])), {"limit_bytes": limit})
                if request.path.startswith("/v1/"):  # the OpenAI-compatible surface speaks OpenAI's error shape
                    body = {"error": {"message": body["error"]["message"], "type": "invalid_request_error",
                                      "code": "payload_too_large", "param": None}}
                return JsonResponse(body, status=413)
        return self.get_response(request)

