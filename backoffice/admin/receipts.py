"""Context receipts, read-only: what memory each composed context was given, and what it left out, read as a page
(backoffice/receipt_page.py)."""
from __future__ import annotations

from django.contrib import admin

from orchestration.models import ContextReceipt
from sessions.labels import session_words

from ..receipt_page import receipt_page
from .toolkit import (
    ReadOnlyAdmin,
    ScopedTenantFilter,
    TenantScopedAdminMixin,
    admin_link,
)


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


@admin.register(ContextReceipt)
class ContextReceiptAdmin(TenantScopedAdminMixin, ReadOnlyAdmin):
    """A receipt reads as a page (backoffice/receipt_page.py): its sections' tokens, what was given to the model linked
    to the memories and messages, what was left out and why."""

    list_display = ("created_at", "surface", "session_link", "included_count", "left_out_count", "total_tokens",
                    "budget", "tenant")
    list_filter = (ScopedTenantFilter, "surface", MemoryUsedFilter)
    list_select_related = ("tenant", "session", "user")
    date_hierarchy = "created_at"
    fields = readonly_fields = ("created_at", "surface", "user_link", "session_link", "query", "budget",
                                "total_tokens", "memory_status")
    change_form_template = "admin/orchestration/contextreceipt/change_form.html"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("tenant", "session", "user")

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:
            context["receipt"] = receipt_page(receipt=obj)
            context["subtitle"] = (f"Context for {obj.user} in {session_words(obj.session)}, "
                                   f"{obj.created_at:%d %b %Y %H:%M:%S}")
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.display(description="session")
    def session_link(self, obj):
        return admin_link(obj.session, obj.session.title or str(obj.session_id)[:8])

    @admin.display(description="user")
    def user_link(self, obj):
        return admin_link(obj.user)
