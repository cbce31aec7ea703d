"""Admin for bulk imports, read-only and tenant-scoped. The session's and the message's pages show the transcript,
bridge and memories drawn across apps: they are in backoffice/admin/sessions.py."""
from __future__ import annotations

from django.contrib import admin

from tenants.admin import ReadOnlyAdmin, ScopedTenantFilter, TenantScopedAdminMixin, UserFilterMediaMixin, user_filter

from .models import ImportJob

# A per-user list of sessions' rows, the user picked by name (the session admin's filter too).
SessionUserFilter = user_filter("user", ("chat_sessions", "session", "user"))


@admin.register(ImportJob)
class ImportJobAdmin(UserFilterMediaMixin, TenantScopedAdminMixin, ReadOnlyAdmin):
    """Bulk imports and their progress (the export itself is not shown: it is the users' conversations)."""

    list_display = ("id", "tenant", "user", "format", "source", "status", "progress", "messages_created",
                    "messages_skipped", "created_at", "finished_at")
    list_filter = (ScopedTenantFilter, SessionUserFilter, "status", "format", "source")
    search_fields = ("id", "user__external_id", "file_name")
    list_select_related = ("tenant", "user")
    fields = readonly_fields = ("id", "tenant", "user", "format", "options", "source", "status", "file_name",
                                "sessions_total", "messages_total", "position", "sessions_created",
                                "messages_created", "messages_skipped", "error", "created_at", "started_at",
                                "finished_at")

    def get_queryset(self, request):
        return super().get_queryset(request).defer("payload")

    @admin.display(description="messages consumed")
    def progress(self, obj):
        return f"{obj.position} / {obj.messages_total}"
