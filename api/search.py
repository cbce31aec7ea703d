"""Memory search: GET /api/v1/users/{id}/memories/search?q=&k= — the retrieval the composer uses, over REST; and how a
retrieved memory leaves the service, wherever it is shown (search, composed context, turns)."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.errors import ValidationFailed
from memory.retrieval import memory_retrieve
from memory.validity import as_of_parse
from tenants.selectors import access_end_user

MAX_K = 50
MAX_QUERY_CHARS = 2000


# A memory as it is shown with its provenance, retrieved (search, context, turns) or in the standing profile. A comment,
# not a docstring: the schema would give it as the description of every output built on it.
class MemoryShownOutput(serializers.Serializer):
    memory_id = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField()
    source_type = serializers.CharField()
    confidence = serializers.FloatField()
    created_at = serializers.DateTimeField()
    session_id = serializers.CharField(allow_null=True)
    source_message_id = serializers.CharField(allow_null=True)
    provenance = serializers.CharField()


class RetrievedMemoryOutput(MemoryShownOutput):
    score = serializers.FloatField()
    token_count = serializers.IntegerField()
    neighbours = serializers.ListField(child=serializers.CharField())
    valid_from = serializers.DateTimeField(allow_null=True, required=False,
                                           help_text="When it began to hold (given for a search as_of a time).")
    valid_to = serializers.DateTimeField(allow_null=True, required=False,
                                         help_text="When what superseded it was said; null while it holds.")


class MemorySearchInput(serializers.Serializer):
    q = serializers.CharField(max_length=MAX_QUERY_CHARS, allow_blank=True, trim_whitespace=True)
    k = serializers.IntegerField(min_value=1, max_value=MAX_K, default=10)
    budget = serializers.IntegerField(min_value=50, max_value=20_000, required=False,
                                      help_text="Token budget; strong episodic hits then come with neighbouring turns.")
    as_of = serializers.CharField(required=False, allow_blank=True, max_length=64)


class MemorySearchOutput(serializers.Serializer):
    query = serializers.CharField()
    results = RetrievedMemoryOutput(many=True)


class MemorySearchApi(APIView):
    @extend_schema(
        operation_id="user_memories_search",
        parameters=[OpenApiParameter("q", str, required=True, description="What to look for (not empty)."),
                    OpenApiParameter("k", int, required=False, description=f"How many memories, 1–{MAX_K}."),
                    OpenApiParameter("budget", int, required=False, description="Token budget for the results."),
                    OpenApiParameter("as_of", str, required=False,
                                     description="ISO date or date-time: the memories that held then (superseded "
                                                 "ones included, with valid_from / valid_to); a date means its end.")],
        responses={200: MemorySearchOutput},
        summary="Search a user's active memories (hybrid dense + BM25, reranked, with provenance).",
    )
    def get(self, request, user_id):
        user = access_end_user(tenant=request.tenant, user_id=user_id)
        params = MemorySearchInput(data=request.query_params)
        if not params.is_valid():
            raise ValidationFailed("Invalid search parameters.", details=params.errors)
        query = params.validated_data["q"]
        if not query:
            raise ValidationFailed("The query 'q' must not be empty.", code="empty_query")
        found = memory_retrieve(tenant=request.tenant, user=user, query=query, k=params.validated_data["k"],
                                token_budget=params.validated_data.get("budget"),
                                as_of=as_of_parse(params.validated_data.get("as_of")))
        return Response(MemorySearchOutput({"query": query, "results": found}).data)
