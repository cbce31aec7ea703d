"""REST endpoints for end users: validate, call one service or selector, serialize."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.openapi import cursor_page
from infra.pagination import paginate
from infra.serializer_fields import JsonObjectField, StrictCharField

from .selectors import end_user_list
from .services import end_user_create


class EndUserOutput(serializers.Serializer):
    id = serializers.UUIDField()
    external_id = serializers.CharField()
    display_name = serializers.CharField()
    metadata = serializers.JSONField()
    created_at = serializers.DateTimeField()


class UserListCreateApi(APIView):
    class Input(serializers.Serializer):
        external_id = StrictCharField(max_length=255)
        display_name = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
        metadata = JsonObjectField(required=False, default=dict)

    @extend_schema(request=Input, responses={201: EndUserOutput}, operation_id="users_create")
    def post(self, request):
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        user = end_user_create(tenant=request.user.tenant, **data.validated_data)
        return Response(EndUserOutput(user).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: cursor_page(EndUserOutput)}, operation_id="users_list")
    def get(self, request):
        return paginate(self, request, end_user_list(tenant=request.user.tenant), EndUserOutput, ordering="created_at")
