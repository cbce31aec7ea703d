"""Admin for memory review: filters, provenance links, read-only history, and actions that go through
memory.actions, so every staff change is in the history with the staff actor and reaches Qdrant."""
from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import Q
from django.urls import reverse
from django.utils.html import format_html

from infra import clock
from infra.errors import AppError
from orchestration.models import ContextReceipt
from orchestration.receipts import memory_receipt_usage
from tenants.admin import (ParentScopedInlineMixin, ReadOnlyAdmin, ScopedTenantFilter, TenantScopedAdminMixin,
                           admin_link, changelist_link, staff_actor)

from . import actions as memory_actions
from .models import JobRun, MemoryEvent, MemoryRecord, MemoryStatus, VectorOutbox


class ConfidenceFilter(admin.SimpleListFilter):
    title = "confidence"
    parameter_name = "confidence"
    RANGES = {"low": (0.0, 0.5), "medium": (0.5, 0.8), "high": (0.8, 1.01)}

    def lookups(self, request, model_admin):
        return [("low", "below 0.5"), ("medium", "0.5 to 0.8"), ("high", "0.8 and above")]

    def queryset(self, request, queryset):
        bounds = self.RANGES.get(self.value())
        if not bounds:
            return queryset
        return queryset.filter(confidence__gte=bounds[0], confidence__lt=bounds[1])


class ExpiredFilter(admin.SimpleListFilter):
    title = "expired"
    parameter_name = "expired"

    def lookups(self, request, model_admin):
        return [("yes", "expired"), ("no", "not expired")]

    def queryset(self, request, queryset):
        past = Q(status=MemoryStatus.EXPIRED) | Q(expires_at__lte=clock.now())
        if self.value() == "yes":
            return queryset.filter(past)
        if self.value() == "no":
            return queryset.exclude(past)
        return queryset


class MemoryRecordForm(forms.ModelForm):
    class Meta:
        model = MemoryRecord
        fields = ["text"]

    def clean_text(self):
        """The same rules as any edit (length, secrets), reported on the form instead of after saving."""
        try:
            return memory_actions.memory_text_clean(self.cleaned_data.get("text", ""))
        except AppError as exc:
            raise forms.ValidationError(exc.message)


class MemoryEventInline(ParentScopedInlineMixin, admin.TabularInline):
    model = MemoryEvent
    fk_name = "memory"
    verbose_name_plural = "history"
    fields = readonly_fields = ("created_at", "action", "actor_type", "actor_id", "note", "before", "after")
    extra = 0
    can_delete = False
    ordering = ("created_at", "id")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(MemoryRecord)
class MemoryRecordAdmin(TenantScopedAdminMixin, admin.ModelAdmin):
    form = MemoryRecordForm
    list_display = ("short_text", "kind", "status", "source_type", "confidence", "user", "tenant", "created_at",
                    "expires_at")
    list_filter = (ScopedTenantFilter, "kind", "status", "source_type", ConfidenceFilter, ExpiredFilter)
    search_fields = ("text", "subject", "value", "user__external_id")
    list_select_related = ("user", "tenant")
    date_hierarchy = "created_at"
    fieldsets = (
        (None, {"fields": ("text", "kind", "status", "tenant", "user_link", "subject", "value")}),
        ("Provenance", {"fields": ("source_type", "provenance", "source_messages", "extractor",
                                   "extractor_version", "created_at")}),
        ("Lifecycle", {"fields": ("receipts", "valid_from", "valid_to", "confidence", "importance", "expires_at", "last_accessed_at",
                                  "access_count",
                                  "reinforcement_count", "status_changed_at", "superseded_by_link",
                                  "superseded_list", "updated_at")}),
    )
    readonly_fields = ("kind", "status", "tenant", "user_link", "subject", "value", "source_type", "provenance",
                       "source_messages", "extractor", "extractor_version", "created_at", "confidence",
                       "importance", "expires_at", "last_accessed_at", "access_count", "reinforcement_count",
                       "status_changed_at", "superseded_by_link", "superseded_list", "updated_at", "receipts",
                       "valid_from", "valid_to")
    inlines = [MemoryEventInline]
    actions = ["approve", "reject", "expire", "delete_memories", "restore"]

    @admin.display(description="text")
    def short_text(self, obj):
        return obj.text if len(obj.text) <= 90 else obj.text[:89] + "…"

    @admin.display(description="user")
    def user_link(self, obj):
        return admin_link(obj.user, obj.user.display_name or obj.user.external_id)

    @admin.display(description="source")
    def provenance(self, obj):
        parts = []
        if obj.source_message_id:
            msg = obj.source_message
            excerpt = msg.content if len(msg.content) <= 200 else msg.content[:199] + "…"
            parts.append(format_html('message <a href="{}">#{} ({}) on {}</a>: “{}”', reverse(
                "admin:chat_sessions_message_change", args=[msg.pk]), msg.seq, msg.role,
                msg.created_at.strftime("%d %b %Y %H:%M"), excerpt))
        if obj.session_id:
            url = reverse("admin:chat_sessions_session_change", args=[obj.session_id])
            anchor = f"#msg-{obj.source_message_id}" if obj.source_message_id else ""
            parts.append(format_html('in <a href="{}{}">session {}</a>', url, anchor,
                                     obj.session.title or str(obj.session_id)[:8]))
        return format_html(" ".join(["{}"] * len(parts)), *parts) if parts else "—"

    @admin.display(description="all source messages")
    def source_messages(self, obj):
        ids = [str(i) for i in (obj.source_message_ids or [])]
        if not ids:
            return "—"
        links = [format_html('<a href="{}">{}</a>', reverse("admin:chat_sessions_message_change", args=[i]), i[:8])
                 for i in ids]
        return format_html(", ".join(["{}"] * len(links)), *links)

    @admin.display(description="given to the model")
    def receipts(self, obj):
        usage = memory_receipt_usage(tenant=obj.tenant_id, memory_id=obj.pk)
        if not usage["turns"]:
            return "not in any kept receipt"
        label = f"used in {usage['turns']} turns, last on {usage['last']:%d %b %Y %H:%M}"
        return changelist_link(ContextReceipt, label, memory=obj.pk)

    @admin.display(description="superseded by")
    def superseded_by_link(self, obj):
        return admin_link(obj.superseded_by, obj.superseded_by.text[:80]) if obj.superseded_by_id else "—"

    @admin.display(description="supersedes")
    def superseded_list(self, obj):
        older = list(obj.supersedes.all()[:20])
        if not older:
            return "—"
        return format_html("<br>".join(["{}"] * len(older)), *(admin_link(o, o.text[:80]) for o in older))

    def has_add_permission(self, request):
        return False  # memories come from conversations; staff review and correct them

    def has_delete_permission(self, request, obj=None):
        return False  # deleting is an action through memory.actions, so it leaves history and reaches Qdrant

    def save_model(self, request, obj, form, change):
        """Only the text is editable; it goes through the same service as an end user's edit (re-embedded)."""
        if change and "text" in form.changed_data:
            try:
                memory_actions.memory_update_text(tenant=obj.tenant, memory=obj, text=form.cleaned_data["text"],
                                            actor_type=MemoryEvent.Actor.STAFF, actor_id=staff_actor(request))
            except AppError as exc:
                self.message_user(request, f"Not saved: {exc.message}", messages.ERROR)

    def _apply(self, request, queryset, control, verb: str):
        done, refused = 0, []
        for record in queryset.select_related("tenant"):
            try:
                control(tenant=record.tenant, memory=record, actor_type=MemoryEvent.Actor.STAFF,
                        actor_id=staff_actor(request))
                done += 1
            except AppError as exc:
                refused.append(f"{str(record.pk)[:8]} ({exc.message})")
        self.message_user(request, f"{verb.capitalize()} {done} memory(ies).", messages.SUCCESS)
        if refused:
            self.message_user(request, f"Not {verb}: " + "; ".join(refused[:20]), messages.WARNING)

    @admin.action(description="Approve selected (pending review)", permissions=["change"])
    def approve(self, request, queryset):
        self._apply(request, queryset, memory_actions.memory_approve, "approved")

    @admin.action(description="Reject selected (pending review)", permissions=["change"])
    def reject(self, request, queryset):
        self._apply(request, queryset, memory_actions.memory_reject, "rejected")

    @admin.action(description="Expire selected now", permissions=["change"])
    def expire(self, request, queryset):
        self._apply(request, queryset, memory_actions.memory_expire, "expired")

    @admin.action(description="Delete selected (restorable until forgotten)", permissions=["change"])
    def delete_memories(self, request, queryset):
        self._apply(request, queryset, memory_actions.memory_delete, "deleted")

    @admin.action(description="Restore selected (deleted, rejected or expired)", permissions=["change"])
    def restore(self, request, queryset):
        self._apply(request, queryset, memory_actions.memory_restore, "restored")


@admin.register(MemoryEvent)
class MemoryEventAdmin(TenantScopedAdminMixin, ReadOnlyAdmin):
    """Every change, including tombstones of forgotten memories (whose record is gone)."""

    list_display = ("created_at", "action", "memory_uuid", "actor_type", "actor_id", "note", "tenant")
    list_filter = (ScopedTenantFilter, "action", "actor_type")
    search_fields = ("memory_uuid", "actor_id", "note")
    list_select_related = ("tenant",)


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
