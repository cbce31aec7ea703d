"""Bulk import jobs, read-only: their progress (the export itself is not shown: it is the users' conversations)."""
from __future__ import annotations

from django.contrib import admin

from orchestration.models import ImportJob

from .sessions import SessionUserFilter
from .toolkit import ReadOnlyAdmin, ScopedTenantFilter, TenantScopedAdminMixin, UserFilterMediaMixin


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
