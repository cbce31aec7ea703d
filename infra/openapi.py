"""OpenAPI generation: the bearer key scheme, the error envelope on every operation, unique component names, pages."""
from __future__ import annotations

import functools

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, inline_serializer
from rest_framework import serializers


class ErrorDetail(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.JSONField()


class ErrorBody(serializers.Serializer):
    error = ErrorDetail()


_RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before retrying."}}

# What any authenticated operation may answer besides its documented success, all with the one error envelope.
_ERRORS = {
    "400": "Invalid input (validation, malformed JSON, too many tokens).",
    "401": "Missing, invalid or revoked API key.",
    "429": "Over the tenant's requests or tokens per minute.",
    "503": "A dependency (session store, vector store, LLM) is unavailable; retry later.",
}


# Path variables that always hold a UUID; the routes take them as <str:...> so a malformed id is our 404, not Django's.
UUID_PATH_VARIABLES = frozenset({"user_id", "session_id", "message_id", "memory_id", "webhook_id", "job_id"})
_UUID_PATTERN = "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"


class ContinuumAutoSchema(AutoSchema):
    def _resolve_path_parameters(self, variables):
        parameters = super()._resolve_path_parameters(variables)
        for parameter in parameters:
            if parameter["name"] in UUID_PATH_VARIABLES and parameter["schema"].get("type") == "string":
                parameter["schema"] = {**parameter["schema"], "format": "uuid", "pattern": _UUID_PATTERN}
        return parameters

    def get_serializer_name(self, serializer, direction):
        # Views nest small `Input`/`Output` classes; name those by their owner so two views' `Input` never share
        # (and silently overwrite) one component.
        qualname = serializer.__class__.__qualname__
        if "." in qualname and "<locals>" not in qualname:
            return qualname.replace(".", "")
        return super().get_serializer_name(serializer, direction)

    def get_override_parameters(self):
        parameters = list(super().get_override_parameters())
        responses = self.get_response_serializers()
        if isinstance(responses, dict) and any(getattr(r, "_cursor_page", False) for r in responses.values()):
            parameters += [
                OpenApiParameter("cursor", OpenApiTypes.STR, description="Opaque cursor from `next` or `previous`."),
                OpenApiParameter("limit", OpenApiTypes.INT, description="Page size, 1 to 200 (default 50)."),
            ]
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        errors = dict(_ERRORS)
        if self.method in ("POST", "PUT", "PATCH"):
            errors["413"] = "Request body too large."
        if self.method != "GET":
            errors["409"] = "Conflicts with the object's state (e.g. writing to a closed session)."
        if "{" in self.path or "413" in errors:
            errors["404"] = "No such object for this tenant (missing and not-yours look the same)."
        for code, description in errors.items():
            if code in responses:
                continue
            response = self._get_response_for_code(ErrorBody, code, direction=direction)
            response["description"] = description
            if code in ("429", "503"):
                response["headers"] = {**response.get("headers", {}), **_RETRY_AFTER}
            responses[code] = response
        return responses


class TenantApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "tenants.authentication.TenantApiKeyAuthentication"
    name = "tenantApiKey"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A tenant API key: `Authorization: Bearer <key>`."}


@functools.lru_cache(maxsize=None)
def cursor_page(serializer_class, *, name: str | None = None):
    """The OpenAPI shape of infra.pagination.paginate's response around serializer_class (one component per class)."""
    base = name or serializer_class.__qualname__.replace(".", "")
    page = inline_serializer(
        name=f"{base}Page",
        fields={
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": serializer_class(many=True),
        },
    )
    page._cursor_page = True  # the schema adds the cursor and limit query parameters
    return page
