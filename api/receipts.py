"""A session's context receipts: what memory each composed context was given, and what was left out."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.views import APIView

from infra.openapi import cursor_page
from infra.pagination import paginate
from orchestration.receipts import receipt_list
from sessions.selectors import access_session


class ReceiptItemOutput(serializers.Serializer):
    memory_id = serializers.CharField(source="memory_uuid")
    rank = serializers.IntegerField()
    section = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField()
    score = serializers.FloatField()
    score_parts = serializers.DictField()
    tokens = serializers.IntegerField()
    source_message_ids = serializers.ListField(child=serializers.CharField())
    reason = serializers.CharField()


class ReceiptOutput(serializers.Serializer):
    id = serializers.CharField()
    session_id = serializers.CharField()
    surface = serializers.CharField()
    created_at = serializers.DateTimeField()
    query = serializers.CharField()
    budget = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    breakdown = serializers.DictField(child=serializers.IntegerField())
    memory_status = serializers.CharField()
    included = serializers.SerializerMethodField()
    left_out = serializers.SerializerMethodField()

    @extend_schema_field(ReceiptItemOutput(many=True))
    def get_included(self, obj):
        return ReceiptItemOutput([i for i in obj.items.all() if i.included], many=True).data

    @extend_schema_field(ReceiptItemOutput(many=True))
    def get_left_out(self, obj):
        return ReceiptItemOutput([i for i in obj.items.all() if not i.included], many=True).data


class SessionReceiptsApi(APIView):
    @extend_schema(responses={200: cursor_page(ReceiptOutput)}, operation_id="sessions_receipts",
                   description="Receipts of the session's composed contexts, newest first: the memories each "
                               "context included (rank, score parts, tokens, source messages) and those left out "
                               "for budget. Kept for the tenant's receipt retention.")
    def get(self, request, session_id):
        tenant = request.user.tenant
        session = access_session(tenant=tenant, session_id=session_id)
        return paginate(self, request, receipt_list(tenant=tenant, session=session), ReceiptOutput,
                        ordering="-created_at")
