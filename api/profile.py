"""The standing profile over REST: GET /api/v1/users/{id}/profile — what every composed context shows of the user."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.errors import ValidationFailed
from memory.profile import profile_select
from tenants.selectors import access_end_user

from .search import MemoryShownOutput

MAX_LIMIT = 100


class ProfileInput(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=30)


class ProfileEntryOutput(MemoryShownOutput):
    subject = serializers.CharField(allow_blank=True)


class ProfileOutput(serializers.Serializer):
    entries = ProfileEntryOutput(many=True)


class UserProfileApi(APIView):
    @extend_schema(
        operation_id="user_profile",
        parameters=[OpenApiParameter("limit", int, required=False,
                                     description=f"At most this many entries, 1–{MAX_LIMIT}.")],
        responses={200: ProfileOutput},
        summary="The user's standing profile: active instructions, preferences and key facts, current values only, "
                "with provenance, most binding first.",
    )
    def get(self, request, user_id):
        user = access_end_user(tenant=request.tenant, user_id=user_id)
        params = ProfileInput(data=request.query_params)
        if not params.is_valid():
            raise ValidationFailed("Invalid profile parameters.", details=params.errors)
        entries = profile_select(tenant=request.tenant, user=user, limit=params.validated_data["limit"])
        return Response(ProfileOutput({"entries": entries}).data)
