"""Routes of the orchestration surface: a session's context receipts."""
from django.urls import path

from . import apis

urlpatterns = [
    path("sessions/<str:session_id>/receipts", apis.SessionReceiptsApi.as_view(), name="session-receipts"),
]
