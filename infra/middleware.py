"""Refuse oversized request bodies with a 413 before any parser or view touches them."""
from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse

from .exception_handler import error_body


class BodySizeLimitMiddleware:
    # DRF's parsers read the raw stream, bypassing Django's DATA_UPLOAD_MAX_MEMORY_SIZE check, so check it here.
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and request.method in ("POST", "PUT", "PATCH"):
            try:
                declared = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return JsonResponse(error_body("invalid_content_length", "Content-Length is not a number."), status=400)
            if declared > limit or (not declared and len(request.body) > limit):
                body = error_body("payload_too_large", f"Request body exceeds {limit} bytes.", {"limit_bytes": limit})
                if request.path.startswith("/v1/"):  # the OpenAI-compatible surface speaks OpenAI's error shape
                    body = {"error": {"message": body["error"]["message"], "type": "invalid_request_error",
                                      "code": "payload_too_large", "param": None}}
                return JsonResponse(body, status=413)
        return self.get_response(request)
