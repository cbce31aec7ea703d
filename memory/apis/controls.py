"""End-user memory controls: list, get, edit, delete. Validate, call one service, serialize; every id is checked
against the caller's tenant and the user in the path. Deleting all of a user's memories, export and erase span the
apps: orchestration/apis/users.py."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.errors import ValidationFailed
from infra.openapi import ErrorBody, cursor_page
from infra.pagination import paginate
from infra.serializer_fields import StrictCharField
from tenants.selectors import access_end_user

from .. import actions
from ..models import MemoryEvent, MemoryKind, MemoryStatus
from ..selectors import access_memory, memory_history, memory_list

END_USER = MemoryEvent.Actor.END_USER


class MemoryProvenanceOutput(serializers.Serializer):
    source_type = serializers.CharField()
    session_id = serializers.UUIDField(allow_null=True)
    source_message_id = serializers.UUIDField(allow_null=True)
    source_message_ids = serializers.ListField(child=serializers.CharField())
    extractor = serializers.CharField()
    extractor_version = serializers.CharField()


class UserMemoryOutput(serializers.Serializer):
    id = serializers.UUIDField()
    user_id = serializers.UUIDField()
    kind = serializers.CharField()
    text = serializers.CharField()
    subject = serializers.CharField()
    value = serializers.CharField()
    status = serializers.CharField()
    confidence = serializers.FloatField()
    importance = serializers.FloatField()
    source_type = serializers.CharField()
    created_at = serializers.DateTimeField(help_text="When it was said (its source message's time).")
    learned_at = serializers.DateTimeField(help_text="When Continuum learned it; TTL and decay count from here "
                                                     "unless the tenant counts from created_at.")
    updated_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    last_accessed_at = serializers.DateTimeField(allow_null=True)
    access_count = serializers.IntegerField()
    superseded_by = serializers.UUIDField(source="superseded_by_id", allow_null=True)
    provenance = MemoryProvenanceOutput(source="*")


class MemorySourceMessageOutput(serializers.Serializer):
    id = serializers.UUIDField()
    session_id = serializers.UUIDField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    content = serializers.CharField()
    created_at = serializers.DateTimeField()
    external_id = serializers.CharField(allow_null=True)


class MemoryHistoryEventOutput(serializers.Serializer):
    action = serializers.CharField()
    actor_type = serializers.CharField()
    actor_id = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    note = serializers.CharField()
    created_at = serializers.DateTimeField()


class UserMemoryDetailOutput(UserMemoryOutput):
    source_message = MemorySourceMessageOutput(allow_null=True)
    history = MemoryHistoryEventOutput(many=True)


def _choices(request, name: str, allowed: list[str]) -> list[str] | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    values = [v.strip() for v in raw.split(",") if v.strip()]
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise ValidationFailed(f"Unknown {name}: {', '.join(bad) or raw!r}.", details={name: allowed})
    return values


def _detail(tenant, record) -> dict:
    record.history = list(memory_history(tenant=tenant, memory_id=record.pk).order_by("created_at", "id"))
    return UserMemoryDetailOutput(record).data


class UserMemoryListApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("kind", str, description="Comma-separated kinds"),
                    OpenApiParameter("status", str, description="Comma-separated statuses; default all but deleted"),
                    OpenApiParameter("cursor", str), OpenApiParameter("limit", int)],
        responses={200: cursor_page(UserMemoryOutput)}, operation_id="users_memories_list")
    def get(self, request, user_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        kinds = _choices(request, "kind", MemoryKind.values)
        # Deleted memories wait for the forget job; the user sees them only when asking for them.
        statuses = _choices(request, "status", MemoryStatus.values) or [
            s for s in MemoryStatus.values if s != MemoryStatus.DELETED]
        qs = memory_list(tenant=tenant, user=user, kinds=kinds, statuses=statuses)
        return paginate(self, request, qs, UserMemoryOutput, ordering="-created_at")


class UserMemoryDetailApi(APIView):
    class Input(serializers.Serializer):
        text = StrictCharField(max_length=actions.MEMORY_TEXT_MAX_CHARS, trim_whitespace=True)

    @extend_schema(responses={200: UserMemoryDetailOutput}, operation_id="users_memories_get")
    def get(self, request, user_id, memory_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        return Response(_detail(tenant, access_memory(tenant=tenant, user=user, memory_id=memory_id)))

    @extend_schema(request=Input, operation_id="users_memories_update", responses={
        200: UserMemoryDetailOutput,
        409: OpenApiResponse(ErrorBody, description="The memory is deleted and cannot be edited.")})
    def patch(self, request, user_id, memory_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        access_memory(tenant=tenant, user=user, memory_id=memory_id)  # 404 before 400 for others' ids
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        actions.memory_update_text(tenant=tenant, user=user, memory_id=memory_id, text=data.validated_data["text"],
                                    actor_type=END_USER, actor_id=user.external_id)
        return Response(_detail(tenant, access_memory(tenant=tenant, user=user, memory_id=memory_id)))

    @extend_schema(responses={204: None}, operation_id="users_memories_delete")
    def delete(self, request, user_id, memory_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        actions.memory_delete(tenant=tenant, user=user, memory_id=memory_id, actor_type=END_USER,
                               actor_id=user.external_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
