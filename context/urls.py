"""Routes for a session's composed context and its links."""
from django.urls import path

from . import apis

urlpatterns = [
    path("sessions/<str:session_id>/context", apis.SessionContextApi.as_view(), name="session-context"),
    path("sessions/<str:session_id>/links", apis.SessionLinksApi.as_view(), name="session-links"),
]
