"""Routes for assistant mode under /api/v1/ (the OpenAI-compatible surface mounts at /v1/ from openai_urls)."""
from django.urls import path

from . import apis

urlpatterns = [
    path("sessions/<str:session_id>/turns", apis.TurnCreateApi.as_view(), name="session-turns"),
]
