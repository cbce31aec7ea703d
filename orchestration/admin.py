"""Read-only admins for orchestration's rows: context receipts (what memory each composed context was given, and what it
left out) and bulk import jobs."""
from __future__ import annotations

from django.contrib import admin

from sessions.admin import SessionUserFilter
from tenants.admin import (
    ParentScopedInlineMixin,
    ReadOnlyAdmin,
    ScopedTenantFilter,
    TenantScopedAdminMixin,
    UserFilterMediaMixin,
    admin_link,
)

from .models import ContextReceipt, ContextReceiptItem, ImportJob


class MemoryUsedFilter(admin.SimpleListFilter):
    """The receipts that included one memory (the memory's admin page links here)."""

    title = "memory"
    parameter_name = "memory"

    def lookups(self, request, model_admin):
        value = self.value()
        return [(value, f"memory {value[:8]}")] if value else []

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        try:
            return queryset.filter(items__memory_uuid=value, items__included=True).distinct()
        except Exception:  # a malformed id selects nothing rather than failing the page
            return queryset.none()


class ContextReceiptItemInline(ParentScopedInlineMixin, admin.TabularInline):
    model = ContextReceiptItem
    fields = readonly_fields = ("rank", "included", "reason", "section", "kind", "text", "score", "score_parts",
                                "tokens", "source_message_ids")
    extra = 0
    can_delete = False
    ordering = ("-section", "rank")  # the profile first, as the context shows it, then what retrieval ranked

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ContextReceipt)
class ContextReceiptAdmin(TenantScopedAdminMixin, ReadOnlyAdmin):
    list_display = ("created_at", "surface", "session_link", "included_count", "left_out_count", "total_tokens",
                    "budget", "tenant")
    list_filter = (ScopedTenantFilter, "surface", MemoryUsedFilter)
    list_select_related = ("tenant", "session")
    date_hierarchy = "created_at"
    fields = readonly_fields = ("created_at", "surface", "tenant", "user", "session_link", "query", "budget",
                                "total_tokens", "breakdown", "memory_status", "included_count", "left_out_count")
    inlines = [ContextReceiptItemInline]

    @admin.display(description="session")
    def session_link(self, obj):
        return admin_link(obj.session, obj.session.title or str(obj.session_id)[:8])


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
