"""Sessions and their messages: open, list, read and close a session, append and list its messages. Validate, call one
service or selector, serialize."""
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
from orchestration.messages import messages_append
from orchestration.sessions import session_close, session_open
from sessions.models import Message
from sessions.selectors import access_session, message_list, session_list
from sessions.services import NewMessage
from tenants.selectors import access_end_user


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
