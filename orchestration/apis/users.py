"""End-user endpoints whose work spans the apps: a user's erasure (also DELETE of the user), the export of what is
kept about them, and the deletes of their memories (one, by filter, all), which take the memories' words out of what
was derived from them (orchestration/forgetting.py); a session filter is checked against their sessions. Validate,
call one service, serialize."""
from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.errors import ValidationFailed
from memory.apis import controls
from memory.models import MemoryEvent, MemoryKind, SourceType
from memory.selectors import MemoryCriteria
from tenants.apis import EndUserOutput
from tenants.selectors import access_end_user

from ..erasure import user_erase
from ..export import memory_export
from ..forgetting import memories_bulk_forget, memories_forget_all, memory_forget
from ..sessions import access_user_session

END_USER = MemoryEvent.Actor.END_USER


class UserDetailApi(APIView):
    @extend_schema(responses={200: EndUserOutput}, operation_id="users_get")
    def get(self, request, user_id):
        return Response(EndUserOutput(access_end_user(tenant=request.user.tenant, user_id=user_id)).data)

    @extend_schema(responses={204: None}, operation_id="users_delete")
    def delete(self, request, user_id):
        user = access_end_user(tenant=request.user.tenant, user_id=user_id)
        user_erase(tenant=request.user.tenant, user=user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class UserMemoryExportApi(APIView):
    @extend_schema(responses={200: {"type": "object"}}, operation_id="users_memories_export")
    def get(self, request, user_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        response = Response(memory_export(tenant=tenant, user=user))
        response["Content-Disposition"] = f'attachment; filename="memories-{user.pk}.json"'
        return response


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


# A user's memories: GET from memory/apis/controls.py; DELETE deletes them all and takes their words out of what was
# derived from them, as a single delete does (orchestration/forgetting.py). A comment, not a docstring: the API
# documentation would show a docstring as the description of both operations.
class UserMemoryListApi(controls.UserMemoryListApi):
    @extend_schema(responses={200: inline_serializer("MemoriesDeletedOutput", {"deleted": serializers.IntegerField()})},
                   operation_id="users_memories_delete_all",
                   description="Soft-delete all of the user's memories and take their words out of the messages, "
                               "notes, bridges and receipts derived from them, as a single delete does.")
    def delete(self, request, user_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        deleted = memories_forget_all(tenant=tenant, user=user, actor_type=END_USER, actor_id=user.external_id)
        return Response({"deleted": len(deleted)})


class UserMemoryDetailApi(controls.UserMemoryDetailApi):
    """A user's memory (memory/apis/controls.py), whose DELETE also takes its words out of what was derived from
    them: the message, the session's other memories, bridges, anchors and open buffers (orchestration/forgetting.py)."""

    @extend_schema(responses={204: None}, operation_id="users_memories_delete")
    def delete(self, request, user_id, memory_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        memory_forget(tenant=tenant, user=user, memory_id=memory_id, actor_type=END_USER, actor_id=user.external_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
