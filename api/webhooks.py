"""REST endpoints for a tenant's webhooks: validate, call one service or selector, serialize."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.openapi import cursor_page
from infra.pagination import paginate
from infra.serializer_fields import StrictBooleanField, StrictCharField
from webhooks.models import EventType
from webhooks.selectors import access_webhook_endpoint, webhook_delivery_list, webhook_endpoint_list
from webhooks.services import (
    DESCRIPTION_MAX_CHARS,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_update,
    webhook_secret_rotate,
)
from webhooks.targets import MAX_URL_CHARS


class WebhookOutput(serializers.Serializer):
    id = serializers.UUIDField()
    url = serializers.CharField()
    description = serializers.CharField()
    event_types = serializers.ListField(child=serializers.ChoiceField(choices=EventType.choices))
    include_content = serializers.BooleanField()
    enabled = serializers.BooleanField(source="is_active")
    consecutive_failures = serializers.IntegerField()
    disabled_at = serializers.DateTimeField(allow_null=True)
    disabled_reason = serializers.CharField()
    secret_rotated_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class WebhookWithSecretOutput(WebhookOutput):
    secret = serializers.CharField(help_text="The signing secret, shown only in this response.")


class WebhookAttemptOutput(serializers.Serializer):
    number = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField()
    status_code = serializers.IntegerField(allow_null=True)
    outcome = serializers.CharField()
    error = serializers.CharField()


class WebhookDeliveryOutput(serializers.Serializer):
    id = serializers.IntegerField()
    event_id = serializers.UUIDField()
    event_type = serializers.CharField()
    state = serializers.CharField()
    attempts = serializers.IntegerField()
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    last_status_code = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    attempt_log = WebhookAttemptOutput(many=True)


def _with_secret(endpoint, secret: str) -> dict:
    return {**WebhookOutput(endpoint).data, "secret": secret}


class _EventTypes(serializers.ListField):
    child = serializers.ChoiceField(choices=EventType.choices)


class WebhookListCreateApi(APIView):
    class Input(serializers.Serializer):
        url = serializers.URLField(max_length=MAX_URL_CHARS)
        event_types = _EventTypes(required=False, allow_empty=False, max_length=len(EventType.values) * 2,
                                  help_text="Default: every event type.")
        description = StrictCharField(max_length=DESCRIPTION_MAX_CHARS, required=False, allow_blank=True, default="")
        include_content = StrictBooleanField(required=False, default=False)

    @extend_schema(request=Input, responses={201: WebhookWithSecretOutput}, operation_id="webhooks_create")
    def post(self, request):
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint, secret = webhook_endpoint_create(tenant=request.user.tenant, **data.validated_data)
        return Response(_with_secret(endpoint, secret), status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: cursor_page(WebhookOutput)}, operation_id="webhooks_list")
    def get(self, request):
        return paginate(self, request, webhook_endpoint_list(tenant=request.user.tenant), WebhookOutput,
                        ordering="created_at")


class WebhookDetailApi(APIView):
    class Input(serializers.Serializer):
        url = serializers.URLField(max_length=MAX_URL_CHARS, required=False)
        event_types = _EventTypes(required=False, allow_empty=False, max_length=len(EventType.values) * 2)
        description = StrictCharField(max_length=DESCRIPTION_MAX_CHARS, required=False, allow_blank=True)
        include_content = StrictBooleanField(required=False)
        enabled = StrictBooleanField(required=False, help_text="true re-enables a disabled endpoint.")

    @extend_schema(responses={200: WebhookOutput}, operation_id="webhooks_get")
    def get(self, request, webhook_id):
        return Response(WebhookOutput(access_webhook_endpoint(tenant=request.user.tenant,
                                                              endpoint_id=webhook_id)).data)

    @extend_schema(request=Input, responses={200: WebhookOutput}, operation_id="webhooks_update")
    def patch(self, request, webhook_id):
        tenant = request.user.tenant
        access_webhook_endpoint(tenant=tenant, endpoint_id=webhook_id)  # 404 before 400 for others' ids
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint = webhook_endpoint_update(tenant=tenant, endpoint_id=webhook_id, **data.validated_data)
        return Response(WebhookOutput(endpoint).data)

    @extend_schema(responses={204: None}, operation_id="webhooks_delete")
    def delete(self, request, webhook_id):
        webhook_endpoint_delete(tenant=request.user.tenant, endpoint_id=webhook_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookSecretRotateApi(APIView):
    @extend_schema(request=None, responses={200: WebhookWithSecretOutput}, operation_id="webhooks_rotate_secret")
    def post(self, request, webhook_id):
        endpoint, secret = webhook_secret_rotate(tenant=request.user.tenant, endpoint_id=webhook_id)
        return Response(_with_secret(endpoint, secret))


class WebhookDeliveryListApi(APIView):
    @extend_schema(responses={200: cursor_page(WebhookDeliveryOutput)}, operation_id="webhooks_deliveries_list")
    def get(self, request, webhook_id):
        return paginate(self, request, webhook_delivery_list(tenant=request.user.tenant, endpoint_id=webhook_id),
                        WebhookDeliveryOutput, ordering="-created_at")
