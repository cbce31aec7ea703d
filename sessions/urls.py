"""Routes for sessions and messages."""
from django.urls import path

from . import apis

urlpatterns = [
    path("sessions", apis.SessionOpenApi.as_view(), name="sessions-open"),
    path("users/<str:user_id>/sessions", apis.UserSessionListApi.as_view(), name="user-sessions"),
    path("sessions/<str:session_id>", apis.SessionDetailApi.as_view(), name="session-detail"),
    path("sessions/<str:session_id>/close", apis.SessionCloseApi.as_view(), name="session-close"),
    path("sessions/<str:session_id>/messages", apis.SessionMessagesApi.as_view(), name="session-messages"),
    path("users/<str:user_id>/import", apis.UserImportApi.as_view(), name="user-import"),
    path("users/<str:user_id>/imports/<str:job_id>", apis.UserImportDetailApi.as_view(), name="user-import-detail"),
]
