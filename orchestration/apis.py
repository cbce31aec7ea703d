"""Receipts of a session's composed contexts, and the portable memory export and its import."""
from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.pagination import paginate
from sessions.selectors import access_session
from tenants.selectors import access_end_user

from .portable import memories_export_lines, memories_import_file
from .receipts import receipt_list


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

    @extend_schema(responses=ReceiptItemOutput(many=True))
    def get_included(self, obj):
        return ReceiptItemOutput([i for i in obj.items.all() if i.included], many=True).data

    @extend_schema(responses=ReceiptItemOutput(many=True))
    def get_left_out(self, obj):
        return ReceiptItemOutput([i for i in obj.items.all() if not i.included], many=True).data


class SessionReceiptsApi(APIView):
    @extend_schema(responses={200: ReceiptOutput(many=True)}, operation_id="sessions_receipts",
                   description="Receipts of the session's composed contexts, newest first: the memories each "
                               "context included (rank, score parts, tokens, source messages) and those left out "
                               "for budget. Kept for the tenant's receipt retention.")
    def get(self, request, session_id):
        tenant = request.user.tenant
        session = access_session(tenant=tenant, session_id=session_id)
        return paginate(self, request, receipt_list(tenant=tenant, session=session), ReceiptOutput,
                        ordering="-created_at")


class UserMemoriesPortableExportApi(APIView):
    @extend_schema(responses={(200, "application/x-ndjson"): str}, operation_id="users_memories_export_portable",
                   description="The user's memories in the portable format (docs/memory-format.md): versioned JSON "
                               "Lines with history, validity, provenance and the embedder's name.")
    def get(self, request, user_id):
        tenant = request.user.tenant
        user = access_end_user(tenant=tenant, user_id=user_id)
        body = "".join(line + "\n" for line in memories_export_lines(tenant=tenant, user=user))
        response = HttpResponse(body.encode(), content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="memories-{user.pk}.jsonl"'
        return response


class MemoriesImportOutput(serializers.Serializer):
    user_id = serializers.CharField()
    external_id = serializers.CharField()
    format_version = serializers.IntegerField()
    embedder_exported = serializers.CharField()
    embedder_here = serializers.CharField()
    sessions_created = serializers.IntegerField()
    messages_created = serializers.IntegerField()
    memories_created = serializers.IntegerField()
    memories_skipped = serializers.IntegerField(help_text="Already imported (a file imported twice writes once).")
    history_events = serializers.IntegerField()
    refused = serializers.ListField(child=serializers.DictField(), help_text="Memories not imported, and why.")


class MemoriesImportApi(APIView):
    @extend_schema(request={"application/x-ndjson": str}, responses={200: MemoriesImportOutput},
                   parameters=[OpenApiParameter("external_id", str, required=False,
                                                description="Import for this end user instead of the file's.")],
                   operation_id="memories_import_portable",
                   description="Import a portable memory export (docs/memory-format.md) into this tenant: sessions "
                               "and source messages recreated, memories with their history, embedded again here. "
                               "Idempotent; a newer format version is refused with 400 unsupported_format_version.")
    def post(self, request):
        tenant = request.user.tenant
        report = memories_import_file(tenant=tenant, lines=request.body.splitlines(),
                                      external_id=request.query_params.get("external_id") or None)
        return Response(MemoriesImportOutput(report).data)
