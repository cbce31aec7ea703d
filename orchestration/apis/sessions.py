"""REST endpoints for sessions and messages: validate, call one service or selector, serialize."""
from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.errors import ValidationFailed
from infra.openapi import cursor_page
from infra.pagination import paginate
from infra.serializer_fields import JsonObjectField, StrictCharField
from sessions import import_formats
from sessions.models import Message
from sessions.selectors import access_session, message_list, session_list
from sessions.services import NewMessage
from tenants.selectors import access_end_user

from ..imports import access_import_job, import_forecast, import_job_create, imports_backlog_pending
from ..messages import messages_append
from ..sessions import session_close, session_open


class SessionOutput(serializers.Serializer):
    id = serializers.UUIDField()
    user_id = serializers.UUIDField()
    state = serializers.CharField()
    title = serializers.CharField()
    external_id = serializers.CharField(allow_null=True)
    opened_at = serializers.DateTimeField()
    last_activity_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)
    close_reason = serializers.CharField()
    previous_id = serializers.UUIDField(allow_null=True)
    message_count = serializers.IntegerField(source="message_seq")


class MessageOutput(serializers.Serializer):
    id = serializers.UUIDField()
    session_id = serializers.UUIDField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    content = serializers.CharField()
    name = serializers.CharField()
    external_id = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    token_count = serializers.IntegerField()
    tool_calls = serializers.JSONField()
    tool_call_id = serializers.CharField()


class SessionOpenApi(APIView):
    class Input(serializers.Serializer):
        user_id = serializers.UUIDField()
        title = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
        external_id = serializers.CharField(max_length=255, required=False, allow_null=True, default=None)
        opened_at = serializers.DateTimeField(required=False, allow_null=True, default=None)

    @extend_schema(request=Input, responses={201: SessionOutput, 200: SessionOutput}, operation_id="sessions_open")
    def post(self, request):
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=data.validated_data.pop("user_id"))
        session, created = session_open(tenant=tenant, user=user, **data.validated_data)
        return Response(SessionOutput(session).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class UserSessionListApi(APIView):
    @extend_schema(responses={200: cursor_page(SessionOutput)}, operation_id="users_sessions_list",
                   parameters=[OpenApiParameter("state", str, enum=["open", "closed"])])
    def get(self, request, user_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        state = request.query_params.get("state")
        if state not in (None, "open", "closed"):
            from infra.errors import ValidationFailed

            raise ValidationFailed("state must be 'open' or 'closed'.")
        return paginate(self, request, session_list(tenant=tenant, user=user, state=state), SessionOutput,
                        ordering="-opened_at")


class SessionDetailApi(APIView):
    @extend_schema(responses={200: SessionOutput}, operation_id="sessions_get")
    def get(self, request, session_id):
        return Response(SessionOutput(access_session(tenant=request.user.tenant, session_id=session_id)).data)


class SessionCloseApi(APIView):
    @extend_schema(request=None, responses={200: SessionOutput}, operation_id="sessions_close")
    def post(self, request, session_id):
        session = session_close(tenant=request.user.tenant, session_id=session_id)
        return Response(SessionOutput(session).data)


class MessageInput(serializers.Serializer):
    role = serializers.ChoiceField(choices=Message.Role.choices)
    content = StrictCharField(allow_blank=True, trim_whitespace=False,
                                    max_length=settings.CONTINUUM_MAX_MESSAGE_CHARS)
    external_id = serializers.CharField(max_length=255, required=False, allow_null=True, default=None)
    created_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    name = serializers.CharField(max_length=128, required=False, allow_blank=True, default="")
    tool_calls = serializers.ListField(child=JsonObjectField(), required=False, default=list, max_length=64)
    tool_call_id = serializers.CharField(max_length=128, required=False, allow_blank=True, default="")

    def validate(self, attrs):
        # Blank content is refused, not stored: nothing can be extracted, composed or answered from it. Two turns
        # carry their meaning elsewhere: an assistant turn that only calls tools, and a tool's (possibly empty)
        # result, which its tool_call_id ties to the call.
        if attrs["content"].strip():
            return attrs
        role = attrs["role"]
        if role == Message.Role.ASSISTANT and attrs.get("tool_calls"):
            return attrs
        if role == Message.Role.TOOL and attrs.get("tool_call_id"):
            return attrs
        reason = {Message.Role.ASSISTANT: "an assistant message needs text or tool_calls",
                  Message.Role.TOOL: "a tool message needs text or the tool_call_id it answers"}.get(
            role, f"a {role} message needs text")
        raise serializers.ValidationError({"content": [f"Content is empty or only whitespace: {reason}."]},
                                          code="empty_content")


class MessageBatchInput(serializers.Serializer):
    messages = MessageInput(many=True, allow_empty=False, max_length=settings.CONTINUUM_MAX_BATCH)


class SessionMessagesApi(APIView):
    @extend_schema(request=MessageBatchInput, operation_id="messages_append",
                   responses={201: inline_serializer("MessagesAppended", {"messages": MessageOutput(many=True)})},
                   description="Append one message (a MessageInput object) or a batch "
                               "({\"messages\": [...]}), atomically.")
    def post(self, request, session_id):
        body = request.data
        if isinstance(body, dict) and "messages" in body:
            data = MessageBatchInput(data=body)
            data.is_valid(raise_exception=True)
            items = data.validated_data["messages"]
        else:
            data = MessageInput(data=body)
            data.is_valid(raise_exception=True)
            items = [data.validated_data]
        rows = messages_append(tenant=request.user.tenant, session_id=session_id,
                               items=[NewMessage(**item) for item in items])
        return Response({"messages": MessageOutput(rows, many=True).data}, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: cursor_page(MessageOutput)}, operation_id="messages_list")
    def get(self, request, session_id):
        tenant = request.user.tenant
        session = access_session(tenant=tenant, session_id=session_id)
        return paginate(self, request, message_list(tenant=tenant, session=session), MessageOutput, ordering="seq")


class ImportLifetimesOutput(serializers.Serializer):
    # Not required: jobs recorded before imports forecast their lifetimes have none.
    counted_from = serializers.ChoiceField(choices=["learned", "said"], required=False, help_text=(
        "What the tenant's memory TTLs and decay count from: when Continuum learned a memory (the import), or when "
        "it was said (the messages' dates)."))
    expiring_at_once = serializers.DictField(child=serializers.IntegerField(), required=False, help_text=(
        "Per memory kind with a TTL: how many of the export's messages would give memories of that kind that "
        "expire as soon as they are learned."))


class ImportForecastOutput(serializers.Serializer):
    format = serializers.CharField()
    sessions_total = serializers.IntegerField()
    messages_total = serializers.IntegerField()
    lifetimes = ImportLifetimesOutput()


class ImportJobOutput(serializers.Serializer):
    id = serializers.UUIDField()
    user_id = serializers.UUIDField()
    format = serializers.CharField()
    source = serializers.CharField()
    status = serializers.CharField()
    sessions_total = serializers.IntegerField()
    messages_total = serializers.IntegerField()
    position = serializers.IntegerField(help_text="Messages of the export already stored or found stored.")
    sessions_created = serializers.IntegerField()
    messages_created = serializers.IntegerField()
    messages_skipped = serializers.IntegerField(help_text="Messages found already stored (by external id).")
    error = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    lifetimes = ImportLifetimesOutput()
    backlog = inline_serializer("ImportBacklog", {"bridges": serializers.IntegerField(),
                                                  "extractions": serializers.IntegerField()},
                                help_text="The user's imported sessions still without a bridge and imported messages "
                                          "not yet extracted (paced behind live turns).")


def _import_job_data(job) -> dict:
    job.backlog = imports_backlog_pending(tenant_id=job.tenant_id, user_id=job.user_id)
    return ImportJobOutput(job).data


def _json_body_check(request) -> None:
    """The body is read raw (no parser), so its media type is checked here: an export is JSON."""
    media = (request.content_type or "").split(";")[0].strip().lower()
    if not (media == "application/json" or (media.startswith("application/") and media.endswith("+json"))):
        raise ValidationFailed(f"An export is sent as JSON with Content-Type: application/json, not "
                               f"{media or 'without a Content-Type'}.", code="not_json",
                               details={"content_type": media})


class ImportOptionsInput(serializers.Serializer):
    dry_run = serializers.BooleanField(default=False)
    accept_expiry = serializers.BooleanField(default=False)


class UserImportApi(APIView):
    # The body is the export file itself, read raw and validated as a stream: no JSON parser builds it whole.
    parser_classes = []

    @extend_schema(
        operation_id="users_import",
        # Not `format`: DRF reads that query parameter as the response's renderer.
        parameters=[OpenApiParameter("export_format", str, enum=list(import_formats.FORMATS), required=True),
                    OpenApiParameter("speaker", str, description="LoCoMo: whose turns are the user's (speaker_a, "
                                                                 "speaker_b or a name; default speaker_a)"),
                    OpenApiParameter("dry_run", bool, description="Validate and forecast (200), store nothing."),
                    OpenApiParameter("accept_expiry", bool, description="Import even if the tenant's TTLs would "
                                                                        "expire memories of it at once.")],
        request={"application/json": {"oneOf": [
            {"type": "array", "items": {"type": "object"}, "description": "conversations (or LoCoMo samples)"},
            {"type": "object", "description": "one conversation, or {\"conversations\": [...]}"}]}},
        responses={202: ImportJobOutput, 200: ImportForecastOutput},
        description="Import a conversation export (LoCoMo-style dated sessions, or OpenAI-style lists of "
                    "{role, content} messages) for the user. Answers 202 with the job; poll its URL. Memory "
                    "lifetimes count from the import unless the tenant counts them from the messages' dates; then "
                    "history older than a TTL is refused (409 import_would_expire) unless accept_expiry is set.")
    def post(self, request, user_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        fmt = import_formats.format_check(request.query_params.get("export_format"))
        speaker = request.query_params.get("speaker", "")[:255]
        options = ImportOptionsInput(data=request.query_params)
        if not options.is_valid():
            raise ValidationFailed("Invalid import options.", details=options.errors)
        _json_body_check(request)
        stream = request.stream
        # The middleware refused bodies over the import limit; Django's smaller one does not apply to this route.
        payload = stream.read() if stream is not None else b""
        if options.validated_data["dry_run"]:
            forecast = import_forecast(tenant=tenant, fmt=fmt, payload=payload, speaker=speaker)
            return Response(ImportForecastOutput({
                "format": fmt, "sessions_total": forecast.sessions, "messages_total": forecast.messages,
                "lifetimes": forecast.lifetimes}).data)
        job = import_job_create(tenant=tenant, user=user, fmt=fmt, payload=payload, speaker=speaker,
                                accept_expiry=options.validated_data["accept_expiry"])
        response = Response(_import_job_data(job), status=status.HTTP_202_ACCEPTED)
        response["Location"] = f"/api/v1/users/{user.pk}/imports/{job.pk}"
        return response


class UserImportDetailApi(APIView):
    @extend_schema(responses={200: ImportJobOutput}, operation_id="users_imports_get")
    def get(self, request, user_id, job_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        return Response(_import_job_data(access_import_job(tenant=tenant, user=user, job_id=job_id)))
