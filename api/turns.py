"""Assistant turns over REST: validate, call the turn service (assistant.turns), serialize."""
from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from assistant.turns import turn_run
from infra.errors import Conflict
from infra.llm import llm_required
from infra.openapi import ErrorBody
from infra.rendering import rendered
from infra.serializer_fields import StrictCharField
from sessions.models import Session
from sessions.selectors import access_session

from .search import RetrievedMemoryOutput

MAX_STEPS_CAP = 20


class TurnToolCallOutput(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    arguments = serializers.JSONField(allow_null=True)
    status = serializers.CharField()
    step = serializers.IntegerField()


class MemoryUsedOutput(serializers.Serializer):
    memory_id = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField()
    provenance = serializers.CharField()


class GroundingChangeOutput(serializers.Serializer):
    sentence = serializers.CharField()
    replaced_by = serializers.CharField(allow_blank=True, help_text="Empty when the sentence was dropped.")


class TurnOutput(serializers.Serializer):
    session_id = serializers.UUIDField(source="session.id")
    user_message_id = serializers.UUIDField(source="user_message.id")
    message_id = serializers.UUIDField(source="assistant_message.id")
    reply = serializers.CharField()
    stop_reason = serializers.CharField()
    steps = serializers.IntegerField(source="loop.steps")
    tool_calls = TurnToolCallOutput(source="loop.tool_calls", many=True)
    memories = RetrievedMemoryOutput(many=True)
    memories_used = MemoryUsedOutput(many=True, help_text="The memories the answer draws on.")
    grounding = GroundingChangeOutput(many=True, help_text="Sentences that claimed an action no tool call of the "
                                                           "turn did, and what replaced them.")
    breakdown = serializers.DictField(child=serializers.IntegerField())
    total_tokens = serializers.IntegerField()
    budget = serializers.IntegerField(allow_null=True)
    memory_status = serializers.CharField()
    usage = serializers.DictField(child=serializers.IntegerField())


class TurnCreateApi(APIView):
    class Input(serializers.Serializer):
        input = StrictCharField(trim_whitespace=False, max_length=settings.CONTINUUM_MAX_MESSAGE_CHARS)
        max_steps = serializers.IntegerField(required=False, min_value=1, max_value=MAX_STEPS_CAP, default=None,
                                             help_text="Fewer tool steps than the server allows (never more).")

        def validate_input(self, value):
            if not value.strip():
                raise serializers.ValidationError("The input is empty.")
            return value

    @extend_schema(request=Input, operation_id="sessions_turns_create",
                   responses={200: TurnOutput,
                              409: OpenApiResponse(ErrorBody, description="The session is closed."),
                              502: OpenApiResponse(ErrorBody, description="The LLM refused the request.")},
                   description="Assistant mode: record the input, run the model with memory tools, record and return "
                               "its answer with the memories it used. 503 `llm_not_configured` without an LLM.")
    def post(self, request, session_id):
        tenant = request.user.tenant
        session = access_session(tenant=tenant, session_id=session_id)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        llm_required()
        if session.state != Session.State.OPEN:
            raise Conflict("Session is closed; open a new one.", code="session_closed")
        result = turn_run(tenant=tenant, session=session, user_input=data.validated_data["input"],
                          max_steps=data.validated_data["max_steps"])
        return Response(rendered(TurnOutput, result))
