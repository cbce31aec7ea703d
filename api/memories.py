"""A user's memories, the end user's own controls: list, read, edit and delete one, delete by filter or all, and the
export of what is kept about them. Every delete takes the memories' words out of what was derived from them
(orchestration/forgetting.py); a session filter is checked against the user's sessions. Every id is checked against
the caller's tenant and the user in the path. Validate, call one service or selector, serialize."""
from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.errors import ValidationFailed
from infra.openapi import ErrorBody, cursor_page
from infra.pagination import paginate
from infra.serializer_fields import StrictCharField
from memory import actions
from memory.models import MemoryEvent, MemoryKind, MemoryStatus, SourceType
from memory.selectors import MemoryCriteria, access_memory, memory_history, memory_list
from orchestration.export import memory_export
from orchestration.forgetting import memories_bulk_forget, memories_forget_all, memory_forget
from orchestration.sessions import access_user_session
from tenants.selectors import access_end_user

from .sessions import MessageOutput

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


# The message a memory was said in, as the session lists it without its name, token count and tool calls (a
# comment: a docstring would become the schema's description).
class MemorySourceMessageOutput(MessageOutput):
    name = token_count = tool_calls = tool_call_id = None


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


# A user's memories: GET lists them; DELETE deletes them all and takes their words out of what was derived from them,
# as a single delete does. A comment, not a docstring: the API documentation would show a docstring as the
# description of both operations.
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

    @extend_schema(responses={200: inline_serializer("MemoriesDeletedOutput", {"deleted": serializers.IntegerField()})},
                   operation_id="users_memories_delete_all",
                   description="Soft-delete all of the user's memories and take their words out of the messages, "
                               "notes, bridges and receipts derived from them, as a single delete does.")
    def delete(self, request, user_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        deleted = memories_forget_all(tenant=tenant, user=user, actor_type=END_USER, actor_id=user.external_id)
        return Response({"deleted": len(deleted)})


class UserMemoryDetailApi(APIView):
    """A user's memory, whose DELETE also takes its words out of what was derived from them: the message, the session's
    other memories, bridges, anchors and open buffers."""

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
        memory_forget(tenant=tenant, user=user, memory_id=memory_id, actor_type=END_USER, actor_id=user.external_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]})
class OneOrManyChoiceField(serializers.ListField):
    """"fact" or ["fact", "event"]."""

    def __init__(self, *, choices, **kwargs):
        super().__init__(child=serializers.ChoiceField(choices=choices), allow_empty=False, max_length=20, **kwargs)

    def to_internal_value(self, data):
        return super().to_internal_value([data] if isinstance(data, str) else data)


class MemoryBulkDeleteOutput(serializers.Serializer):
    matched = serializers.IntegerField(help_text="Matching memories not yet deleted, before this call.")
    deleted = serializers.IntegerField()
    sample_ids = serializers.ListField(child=serializers.UUIDField())
    more = serializers.BooleanField(help_text="More match than one call deletes: call again.")
    dry_run = serializers.BooleanField()


class UserMemoryBulkDeleteApi(APIView):
    class Input(serializers.Serializer):
        kind = OneOrManyChoiceField(choices=MemoryKind.values, required=False)
        source_type = OneOrManyChoiceField(choices=SourceType.values, required=False)
        session_id = serializers.UUIDField(required=False)
        created_from = serializers.DateTimeField(required=False, help_text="Created at or after (inclusive).")
        created_to = serializers.DateTimeField(required=False, help_text="Created before (exclusive).")
        dry_run = serializers.BooleanField(default=False)
        limit = serializers.IntegerField(min_value=1, max_value=settings.CONTINUUM_BULK_DELETE_MAX, required=False)

        def validate(self, attrs):
            if not any(attrs.get(k) for k in ("kind", "source_type", "session_id", "created_from", "created_to")):
                raise ValidationFailed("Give at least one filter (kind, source_type, session_id, created_from, "
                                       "created_to); DELETE /memories deletes them all.", code="filter_required")
            if attrs.get("created_from") and attrs.get("created_to") and attrs["created_from"] >= attrs["created_to"]:
                raise ValidationFailed("created_from must be before created_to.", code="invalid_range")
            return attrs

    @extend_schema(request=Input, responses={200: MemoryBulkDeleteOutput}, operation_id="users_memories_bulk_delete",
                   description="Soft-delete the user's memories matching every given filter, oldest first, at most "
                               "`limit` per call (`more` says whether to call again), and take their words out of "
                               "the messages, notes, bridges and receipts derived from them, as a single delete "
                               "does. `dry_run: true` returns the count and a sample of ids and deletes nothing.")
    def post(self, request, user_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        session_id = None
        if v.get("session_id"):
            session_id = str(access_user_session(tenant=tenant, user=user, session_id=v["session_id"]).pk)
        criteria = MemoryCriteria(kinds=tuple(v.get("kind") or ()), source_types=tuple(v.get("source_type") or ()),
                                  session_id=session_id, created_from=v.get("created_from"),
                                  created_to=v.get("created_to"))
        result = memories_bulk_forget(tenant=tenant, user=user, criteria=criteria, actor_type=END_USER,
                                      actor_id=user.external_id, dry_run=v["dry_run"], limit=v.get("limit"))
        return Response(MemoryBulkDeleteOutput(result).data)


class UserMemoryExportApi(APIView):
    @extend_schema(responses={200: {"type": "object"}}, operation_id="users_memories_export")
    def get(self, request, user_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        response = Response(memory_export(tenant=tenant, user=user))
        response["Content-Disposition"] = f'attachment; filename="memories-{user.pk}.json"'
        return response
