"""The portable memory format: a user's export, and its import into this tenant (docs/memory-format.md)."""
from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from orchestration.portable import memories_export_lines, memories_import_file
from tenants.selectors import access_end_user


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
