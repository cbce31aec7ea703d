"""Bulk import of a user's conversation export: the job's creation (or a dry run's forecast) and its progress. The body
is the export itself, read raw and validated as a stream. Validate, call one service or selector, serialize."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.errors import ValidationFailed
from orchestration.imports import access_import_job, import_forecast, import_job_create, imports_backlog_pending
from sessions import import_formats
from tenants.selectors import access_end_user


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
