"""Every route of the REST surface under /api/v1/, by resource. Under users/<id>/memories/ the fixed routes (search,
export, bulk-delete) come before a memory's own page, whose id would take them."""
from django.urls import path

from . import context, imports, memories, portable, profile, receipts, search, sessions, turns, users, webhooks

urlpatterns = [
    # end users
    path("users", users.UserListCreateApi.as_view(), name="users"),
    path("users/<str:user_id>", users.UserDetailApi.as_view(), name="user-detail"),
    path("users/<str:user_id>/erase", users.UserEraseApi.as_view(), name="user-erase"),
    path("users/<str:user_id>/profile", profile.UserProfileApi.as_view(), name="user-profile"),
    # a user's memories
    path("users/<str:user_id>/memories", memories.UserMemoryListApi.as_view(), name="user-memories"),
    path("users/<str:user_id>/memories/search", search.MemorySearchApi.as_view(), name="user-memories-search"),
    path("users/<str:user_id>/memories/export", memories.UserMemoryExportApi.as_view(), name="user-memories-export"),
    path("users/<str:user_id>/memories/export.jsonl", portable.UserMemoriesPortableExportApi.as_view(),
         name="user-memories-export-portable"),
    path("users/<str:user_id>/memories/bulk-delete", memories.UserMemoryBulkDeleteApi.as_view(),
         name="user-memories-bulk-delete"),
    path("users/<str:user_id>/memories/<str:memory_id>", memories.UserMemoryDetailApi.as_view(),
         name="user-memory-detail"),
    path("memories/import", portable.MemoriesImportApi.as_view(), name="memories-import"),
    # sessions and their messages, context, links, receipts and turns
    path("sessions", sessions.SessionOpenApi.as_view(), name="sessions-open"),
    path("users/<str:user_id>/sessions", sessions.UserSessionListApi.as_view(), name="user-sessions"),
    path("sessions/<str:session_id>", sessions.SessionDetailApi.as_view(), name="session-detail"),
    path("sessions/<str:session_id>/close", sessions.SessionCloseApi.as_view(), name="session-close"),
    path("sessions/<str:session_id>/messages", sessions.SessionMessagesApi.as_view(), name="session-messages"),
    path("sessions/<str:session_id>/context", context.SessionContextApi.as_view(), name="session-context"),
    path("sessions/<str:session_id>/links", context.SessionLinksApi.as_view(), name="session-links"),
    path("sessions/<str:session_id>/receipts", receipts.SessionReceiptsApi.as_view(), name="session-receipts"),
    path("sessions/<str:session_id>/turns", turns.TurnCreateApi.as_view(), name="session-turns"),
    # bulk import of a conversation export
    path("users/<str:user_id>/import", imports.UserImportApi.as_view(), name="user-import"),
    path("users/<str:user_id>/imports/<str:job_id>", imports.UserImportDetailApi.as_view(), name="user-import-detail"),
    # a tenant's webhooks
    path("webhooks", webhooks.WebhookListCreateApi.as_view(), name="webhooks"),
    path("webhooks/<str:webhook_id>", webhooks.WebhookDetailApi.as_view(), name="webhook-detail"),
    path("webhooks/<str:webhook_id>/rotate-secret", webhooks.WebhookSecretRotateApi.as_view(), name="webhook-rotate"),
    path("webhooks/<str:webhook_id>/deliveries", webhooks.WebhookDeliveryListApi.as_view(), name="webhook-deliveries"),
]
