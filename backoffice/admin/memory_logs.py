"""Admin for memory history, lifecycle job runs and the vector outbox, read-only. A memory's own page and the review
queue are memories.py and review.py."""
from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from memory.models import JobRun, MemoryEvent, VectorOutbox
from memory.timeline import actor_words, event_other_id, event_sentence

from .memory_columns import UserColumn, memory_text_short
from .toolkit import (
    ReadOnlyAdmin,
    ScopedTenantFilter,
    TenantScopedAdminMixin,
    UserFilter,
    UserFilterMediaMixin,
    admin_link,
    when,
    wide_text,
)


@admin.register(MemoryEvent)
class MemoryEventAdmin(UserColumn, UserFilterMediaMixin, TenantScopedAdminMixin, ReadOnlyAdmin):
    """Every change, including tombstones of forgotten memories (whose record is gone)."""

    list_display = ("at", "action", "memory_link", "what_happened", "actor", "user_column", "tenant")
    list_filter = (ScopedTenantFilter, UserFilter, "action", "actor_type")
    search_fields = ("=memory_uuid", "actor_id", "note", "memory__text")
    list_select_related = ("tenant", "user", "memory")
    list_per_page = 100
    fields = readonly_fields = ("created_at", "action", "memory_link", "what_happened", "actor", "user", "tenant",
                                "note", "before_after")

    @admin.display(description="at", ordering="created_at")
    def at(self, obj):
        return when(obj.created_at, time=True)

    @admin.display(description="memory", ordering="memory__text")
    def memory_link(self, obj):
        if obj.memory_id is None:
            return format_html("<em>gone</em> ({})", str(obj.memory_uuid)[:8])
        return wide_text(admin_link(obj.memory, memory_text_short(obj.memory.text, 80)), "14em")

    @admin.display(description="what happened")
    def what_happened(self, obj):
        sentence = event_sentence(obj, source_type=obj.memory.source_type if obj.memory_id else "")
        sentence = sentence if len(sentence) <= 140 else sentence[:139] + "…"
        other = event_other_id(obj)
        if other:  # linked by id: reading each other memory's text here would cost a query per row
            url = reverse("admin:memory_memoryrecord_change", args=[other])
            return wide_text(format_html('{} → <a href="{}">memory {}</a>', sentence, url, other[:8]), "14em")
        return wide_text(sentence, "14em")

    @admin.display(description="by", ordering="actor_type")
    def actor(self, obj):
        return actor_words(obj)

    @admin.display(description="before → after")
    def before_after(self, obj):
        import json

        return format_html("<pre style='white-space:pre-wrap'>{}</pre><pre style='white-space:pre-wrap'>{}</pre>",
                           json.dumps(obj.before, indent=1, ensure_ascii=False),
                           json.dumps(obj.after, indent=1, ensure_ascii=False))


@admin.register(JobRun)
class JobRunAdmin(TenantScopedAdminMixin, ReadOnlyAdmin):
    list_display = ("job", "tenant", "status", "started_at", "duration", "stats")
    list_filter = ("job", "status", ScopedTenantFilter)
    list_select_related = ("tenant",)

    @admin.display(description="seconds")
    def duration(self, obj):
        return round((obj.finished_at - obj.started_at).total_seconds(), 3) if obj.finished_at else "—"


@admin.register(VectorOutbox)
class VectorOutboxAdmin(ReadOnlyAdmin):
    """Pending vector writes; spans tenants by id, so superusers only."""

    list_display = ("id", "tenant_id_value", "memory_uuid", "op", "attempts", "created_at", "done_at", "last_error")
    list_filter = ("op",)

    def get_queryset(self, request):
        # The admin looks an object up before it checks the permission: for anyone else the outbox is empty.
        qs = super().get_queryset(request).unscoped()
        return qs if request.user.is_superuser else qs.none()

    def has_module_permission(self, request):
        return request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser

