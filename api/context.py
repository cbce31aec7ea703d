"""Memory-service endpoints: a session's composed context for a client's own LLM, and its links."""
from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from context.links import links_with_bridges
from infra.errors import ValidationFailed
from infra.rendering import rendered
from orchestration.context import turn_context
from sessions.selectors import access_session

from .profile import ProfileEntryOutput
from .search import RetrievedMemoryOutput


def _only_params(request, allowed: set[str]) -> None:
    """Strict query strings: an unknown or repeated parameter is a client error, not silently ignored."""
    unknown = sorted(set(request.query_params) - allowed)
    repeated = sorted(k for k in request.query_params if len(request.query_params.getlist(k)) > 1)
    if unknown or repeated:
        raise ValidationFailed("Unknown or repeated query parameters.", code="invalid_query",
                               details={"unknown": unknown, "repeated": repeated})


class BridgeOutput(serializers.Serializer):
    kind = serializers.CharField()
    session_id = serializers.CharField()
    text = serializers.CharField()
    goal = serializers.CharField()


class ContextOutput(serializers.Serializer):
    session_id = serializers.UUIDField()
    messages = serializers.ListField(child=serializers.DictField())
    breakdown = serializers.DictField(child=serializers.IntegerField())
    total_tokens = serializers.IntegerField()
    budget = serializers.IntegerField()
    memory_status = serializers.CharField()
    first_turn = serializers.BooleanField()
    goal = serializers.CharField()
    memories = RetrievedMemoryOutput(many=True)
    profile = ProfileEntryOutput(many=True, help_text="The standing profile entries shown (inside the memories "
                                                      "data block, before the retrieved memories).")
    bridges = BridgeOutput(many=True)


class SessionContextApi(APIView):
    class Input(serializers.Serializer):
        input = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="",
                                      max_length=settings.CONTINUUM_MAX_MESSAGE_CHARS)
        budget = serializers.IntegerField(required=False, min_value=256, max_value=1_000_000, default=None,
                                          allow_null=True)

    @extend_schema(parameters=[Input], responses={200: ContextOutput}, operation_id="sessions_context",
                   description="The composed context for the session's next turn (input: the new user input, may "
                               "be empty; budget: total tokens, default from settings).")
    def get(self, request, session_id):
        _only_params(request, {"input", "budget"})
        data = self.Input(data=request.query_params)
        data.is_valid(raise_exception=True)
        tenant = request.user.tenant
        session = access_session(tenant=tenant, session_id=session_id)
        ctx = turn_context(tenant=tenant, session=session, new_input=data.validated_data["input"],
                              budget=data.validated_data["budget"])
        return Response(rendered(ContextOutput, {
            "session_id": session.pk, "messages": ctx.messages, "breakdown": ctx.breakdown,
            "total_tokens": ctx.total_tokens, "budget": ctx.budget, "memory_status": ctx.memory_status,
            "first_turn": ctx.first_turn, "goal": ctx.goal, "memories": ctx.memories, "profile": ctx.profile,
            "bridges": ctx.bridges,
        }))


class LinkOutput(serializers.Serializer):
    kind = serializers.CharField()
    direction = serializers.CharField()
    session_id = serializers.CharField()
    score = serializers.FloatField()
    created_at = serializers.DateTimeField()
    bridge = serializers.DictField(allow_null=True)


class LinksOutput(serializers.Serializer):
    links = LinkOutput(many=True)


class SessionLinksApi(APIView):
    @extend_schema(responses={200: LinksOutput}, operation_id="sessions_links")
    def get(self, request, session_id):
        _only_params(request, set())
        tenant = request.user.tenant
        session = access_session(tenant=tenant, session_id=session_id)
        return Response(LinksOutput({"links": links_with_bridges(tenant=tenant, session=session)}).data)
