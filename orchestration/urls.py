"""Routes of the flows orchestration owns: sessions and messages, imports, a session's context, links and receipts,
the end-user operations that span the apps (delete/erase, export, deleting memories) and the portable memory
format."""
from django.urls import path, re_path

from .apis import context, portable, receipts, sessions, users

urlpatterns = [
    path("users/<str:user_id>", users.UserDetailApi.as_view(), name="user-detail"),
    path("users/<str:user_id>/erase", users.UserEraseApi.as_view(), name="user-erase"),
    path("users/<str:user_id>/memories/export", users.UserMemoryExportApi.as_view(), name="user-memories-export"),
    path("users/<str:user_id>/memories/export.jsonl", portable.UserMemoriesPortableExportApi.as_view(),
         name="user-memories-export-portable"),
    path("memories/import", portable.MemoriesImportApi.as_view(), name="memories-import"),
    path("users/<str:user_id>/memories/bulk-delete", users.UserMemoryBulkDeleteApi.as_view(),
         name="user-memories-bulk-delete"),
    # A user's memories (GET from memory/apis); its DELETE (all of them) forgets what was derived from them too.
    path("users/<str:user_id>/memories", users.UserMemoryListApi.as_view(), name="user-memories"),
    # A memory's own page (GET, PATCH from memory/apis); its DELETE forgets what was derived from it too. Ids only:
    # the other routes under memories/ (search, export, bulk-delete) are not ids.
    re_path(r"^users/(?P<user_id>[^/]+)/memories/(?P<memory_id>[0-9a-fA-F-]{32,36})$",
            users.UserMemoryDetailApi.as_view(), name="user-memory-detail"),
    path("sessions", sessions.SessionOpenApi.as_view(), name="sessions-open"),
    path("users/<str:user_id>/sessions", sessions.UserSessionListApi.as_view(), name="user-sessions"),
    path("sessions/<str:session_id>", sessions.SessionDetailApi.as_view(), name="session-detail"),
    path("sessions/<str:session_id>/close", sessions.SessionCloseApi.as_view(), name="session-close"),
    path("sessions/<str:session_id>/messages", sessions.SessionMessagesApi.as_view(), name="session-messages"),
    path("users/<str:user_id>/import", sessions.UserImportApi.as_view(), name="user-import"),
    path("users/<str:user_id>/imports/<str:job_id>", sessions.UserImportDetailApi.as_view(),
         name="user-import-detail"),
    path("sessions/<str:session_id>/context", context.SessionContextApi.as_view(), name="session-context"),
    path("sessions/<str:session_id>/links", context.SessionLinksApi.as_view(), name="session-links"),
    path("sessions/<str:session_id>/receipts", receipts.SessionReceiptsApi.as_view(), name="session-receipts"),
]
