"""Routes of the orchestration surface: a session's context receipts; the portable memory export and import."""
from django.urls import path

from . import apis

urlpatterns = [
    path("sessions/<str:session_id>/receipts", apis.SessionReceiptsApi.as_view(), name="session-receipts"),
    path("users/<str:user_id>/memories/export.jsonl", apis.UserMemoriesPortableExportApi.as_view(),
         name="user-memories-export-portable"),
    path("memories/import", apis.MemoriesImportApi.as_view(), name="memories-import"),
]
