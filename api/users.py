"""End users: create and list them, read one, and erase one (POST /erase, or DELETE of the user) with everything kept
about them (orchestration/erasure.py). Validate, call one service or selector, serialize."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.openapi import cursor_page
from infra.pagination import paginate
from infra.serializer_fields import JsonObjectField, StrictCharField
from orchestration.erasure import user_erase
from tenants.selectors import access_end_user, end_user_list
from tenants.services import end_user_create


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


class UserDetailApi(APIView):
    @extend_schema(responses={200: EndUserOutput}, operation_id="users_get")
    def get(self, request, user_id):
        return Response(EndUserOutput(access_end_user(tenant=request.user.tenant, user_id=user_id)).data)

    @extend_schema(responses={204: None}, operation_id="users_delete")
    def delete(self, request, user_id):
        user = access_end_user(tenant=request.user.tenant, user_id=user_id)
        user_erase(tenant=request.user.tenant, user=user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ErasureOutput(serializers.Serializer):
    user_id = serializers.UUIDField()
    memories = serializers.IntegerField()
    events = serializers.IntegerField()
    sessions = serializers.IntegerField()
    redis_keys = serializers.IntegerField()
    vector_scope_deleted = serializers.BooleanField()
    removed = serializers.DictField(help_text="Per store, what the erase removed: database rows by table, vector "
                                              "points, Redis keys, pending outbox writes, queued webhook payloads.")
    remaining = serializers.DictField(help_text="The same stores counted again after the erase.")
    complete = serializers.BooleanField(help_text="The re-check found nothing of the user left.")


class UserEraseApi(APIView):
    @extend_schema(request=None, responses={200: ErasureOutput}, operation_id="users_erase")
    def post(self, request, user_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        return Response(ErasureOutput(user_erase(tenant=tenant, user=user).as_dict()).data)
