"""The tenant's and the end user's admin pages: each counts and shows what other apps hold about them (memories,
sessions) and deletes through orchestration's erasure, so they sit here, above everything they read."""
from __future__ import annotations

import copy

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected
from django.contrib.admin.utils import unquote
from django.http import QueryDict
from django.urls import reverse

from memory.models import MemoryEvent, MemoryKind, MemoryRecord, MemoryReview, MemoryStatus, SourceType
from memory.overview import (
    DISTILLED,
    NOTES,
    PASSAGES,
    decisions_select,
    goals_open,
    goals_stale_mentions,
    layer_select,
    memories_by_subject,
    memory_counts,
    said_by,
)
from memory.profile import profile_select
from orchestration.erasure import tenant_erasure_start, user_erase
from sessions.models import Session
from sessions.selectors import session_list
from tenants.models import EndUser, Tenant, TenantApiKey, TenantErasure

from ..extraction_yield import extraction_yield
from .sessions import SESSION_ORDER
from .toolkit import (
    ParentScopedInlineMixin,
    ReadOnlyAdmin,
    ScopedTenantFilter,
    TenantScopedAdminMixin,
    changelist_link,
    count_of,
    erasure_summary,
    staff_actor,
)


def _unconfirmed(request, *, keep: bool):
    """The request without its confirmation, so the admin shows the confirmation page again instead of deleting: the
    delete page deletes on any posted field, so it gets none; the delete-selected action keeps the rows chosen."""
    retry = copy.copy(request)
    post = request.POST.copy() if keep else QueryDict(mutable=True)
    post.pop("post", None)
    retry.POST = post
    return retry


def users_erase_selected(modeladmin, request, queryset):
    """The admin's delete-selected action, confirmed by typing how many users are erased."""
    if request.POST.get("post") and request.POST.get("confirm", "").strip() != str(queryset.count()):
        response = delete_selected(modeladmin, _unconfirmed(request, keep=True), queryset)
        response.context_data["confirm_error"] = "Not erased: the number typed does not match."
        response.status_code = 400
        return response
    return delete_selected(modeladmin, request, queryset)


class TenantApiKeyInline(ParentScopedInlineMixin, admin.TabularInline):
    model = TenantApiKey
    fields = ("prefix", "name", "created", "expiry_date", "revoked")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdminMixin, admin.ModelAdmin):
    tenant_lookup = ""
    list_display = ("slug", "name", "is_active", "end_users_count", "memories_count", "created_at")
    list_filter = ("is_active",)
    search_fields = ("slug", "name")
    readonly_fields = ("id", "created_at", "end_users_link")
    inlines = [TenantApiKeyInline]
    filter_horizontal = ("staff_users",)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_users=count_of(EndUser, "tenant"),
                                                      n_memories=count_of(MemoryRecord, "tenant"))

    @admin.display(description="end users", ordering="n_users")
    def end_users_count(self, obj):
        return obj.n_users

    @admin.display(description="memories", ordering="n_memories")
    def memories_count(self, obj):
        return obj.n_memories

    @admin.display(description="end users")
    def end_users_link(self, obj):
        return changelist_link(EndUser, "end users of this tenant", tenant=obj.pk) if obj.pk else "—"

    def get_changeform_initial_data(self, request):
        return {"review_inferred": settings.TENANT_REVIEW_INFERRED_DEFAULT,
                **super().get_changeform_initial_data(request)}

    def get_exclude(self, request, obj=None):
        # Who may administer a tenant is a superuser's decision.
        return () if request.user.is_superuser else ("staff_users",)

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs, request):
        return erasure_summary(objs, request, lambda t: (
            f"Tenant {t.slug}: {EndUser.objects.filter(tenant=t).count()} end users and "
            f"{MemoryRecord.objects.for_tenant(t).count()} memories, erased from the database, Qdrant and Redis"))

    # Erasing a tenant touches every store for every end user: it runs as a task (memory.tasks.tenant_erase_task),
    # not inside this request. The tenant is deactivated at once; its progress is listed under Tenant erasures.
    def delete_model(self, request, obj):
        self._erasure_start(request, [obj])

    def delete_queryset(self, request, queryset):
        self._erasure_start(request, list(queryset))

    def _erasure_start(self, request, tenants):
        for tenant in tenants:
            tenant_erasure_start(tenant=tenant, requested_by=staff_actor(request))
        self.message_user(request, f"Erasure started for {', '.join(t.slug for t in tenants)}: the tenant is "
                                   "deactivated now and removed when the erasure finishes (see Tenant erasures).",
                          messages.INFO)


@admin.register(EndUser)
class EndUserAdmin(TenantScopedAdminMixin, admin.ModelAdmin):
    list_display = ("short_label", "tenant", "active_memories", "pending_memories", "all_memories",
                    "sessions_count", "created_at")
    list_filter = (ScopedTenantFilter,)
    search_fields = ("external_id", "display_name")
    list_per_page = 50
    fields = ("id", "tenant", "external_id", "display_name", "metadata", "created_at")
    readonly_fields = ("id", "tenant", "external_id", "created_at")
    # The page opens with what is known about the user (backoffice/templates/admin/tenants/enduser/change_form.html).
    change_form_template = "admin/tenants/enduser/change_form.html"
    RECENT_SESSIONS = 10

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("tenant").annotate(
            n_active=count_of(MemoryRecord, "user", status=MemoryStatus.ACTIVE),
            n_pending=count_of(MemoryRecord, "user", status=MemoryStatus.PENDING_REVIEW),
            n_memories=count_of(MemoryRecord, "user"),
            n_sessions=count_of(Session, "user"))

    @admin.display(description="user", ordering="display_name")
    def short_label(self, obj):
        return str(obj)

    @admin.display(description="active memories", ordering="n_active")
    def active_memories(self, obj):
        return changelist_link(MemoryRecord, str(obj.n_active), user__id__exact=obj.pk, status__exact="active")

    @admin.display(description="awaiting review", ordering="n_pending")
    def pending_memories(self, obj):
        if not obj.n_pending:
            return "0"
        return changelist_link(MemoryReview, str(obj.n_pending), user__id__exact=obj.pk)

    @admin.display(description="all memories", ordering="n_memories")
    def all_memories(self, obj):
        return changelist_link(MemoryRecord, str(obj.n_memories), user__id__exact=obj.pk)

    @admin.display(description="sessions", ordering="n_sessions")
    def sessions_count(self, obj):
        return changelist_link(Session, str(obj.n_sessions), user__id__exact=obj.pk)

    TABS = {DISTILLED: "Distilled memory", PASSAGES: "Transcript passages", NOTES: "Session notes"}
    TAB_ROWS = 100

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:
            tab = request.GET.get("tab")
            context["overview"] = self.overview(obj, tab=tab if tab in self.TABS else DISTILLED)
        return super().render_change_form(request, context, add, change, form_url, obj)

    def overview(self, user, tab: str = DISTILLED) -> dict:
        """What is known about the user: the distilled memory first (profile, instructions, preferences, facts,
        decisions, open goals, each with its source); the transcript's passages and the session notes on their own
        tabs, counted. Each part is one bounded query, so the page's cost does not grow with them."""
        tenant = user.tenant
        counts = memory_counts(tenant=tenant, user=user)
        here = reverse("admin:tenants_enduser_change", args=[user.pk])
        tabs = [{"key": key, "label": label, "n": counts.by_layer.get(key, 0), "url": f"{here}?tab={key}",
                 "current": key == tab} for key, label in self.TABS.items()]
        common = {
            "tab": tab, "tabs": tabs, "counts": counts,
            "yield": extraction_yield(tenant=tenant, user=user, rows=counts.active),
            "passages_user": counts.passages_by_source.get(SourceType.USER_STATED, 0),
            "passages_assistant": counts.passages_by_source.get(SourceType.ASSISTANT, 0),
            "layer_links": {layer: changelist_link(MemoryRecord, f"all {counts.by_layer.get(layer, 0)} in the memory "
                                                   "list", user__id__exact=user.pk, layer=layer)
                            for layer in self.TABS},
        }
        if tab != DISTILLED:
            rows = layer_select(tenant=tenant, user=user, layer=tab, limit=self.TAB_ROWS)
            for m in rows:
                m.said_by_label = said_by(m.source_type)
            return {**common, "rows": rows, "rows_max": self.TAB_ROWS}

        def link(label, n, **filters):
            return {"label": label, "n": n,
                    "link": changelist_link(MemoryRecord, str(n), user__id__exact=user.pk, **filters)}

        profile = profile_select(tenant=tenant, user=user, limit=30)
        groups = memories_by_subject(tenant=tenant, user=user)
        goals = goals_open(tenant=tenant, user=user)
        for group in groups:
            for m in group.memories:
                m.said_by_label = said_by(m.source_type)
        return {
            **common,
            "decisions": decisions_select(tenant=tenant, user=user),
            "by_kind": [link(k.label, counts.by_kind.get(k.value, 0), status__exact="active", kind__exact=k.value)
                        for k in MemoryKind],
            "by_source": [link(said_by(s.value), counts.by_source.get(s.value, 0), status__exact="active",
                               source_type__exact=s.value) for s in SourceType],
            "by_status": [link(s.label, counts.by_status.get(s.value, 0), status__exact=s.value)
                          for s in MemoryStatus],
            "pending": counts.by_status.get(MemoryStatus.PENDING_REVIEW, 0),
            "review_link": changelist_link(MemoryReview, "review them", user__id__exact=user.pk),
            "duplicates_url": reverse("admin:memory_memoryreview_duplicates", args=[user.pk]),
            "total": counts.total,
            "profile": [{"entry": e, "said_by": said_by(e.source_type)} for e in profile],
            "groups": groups,
            "goals": goals,
            "stale": goals_stale_mentions(tenant=tenant, user=user, goals=goals),
            "sessions": list(session_list(tenant=tenant, user=user).select_related("bridge")
                             .order_by(*SESSION_ORDER)[:self.RECENT_SESSIONS]),
            "sessions_link": changelist_link(Session, "all sessions", user__id__exact=user.pk),
            "events_link": changelist_link(MemoryEvent, "all history events", user__id__exact=user.pk),
        }

    def has_add_permission(self, request):
        return False  # end users arrive through the API

    # Erasing a user cannot be undone: the confirmation says so and asks for their external id (or, for several, how
    # many), typed; a mismatch shows the page again with the error, erasing nothing.
    delete_confirmation_template = "admin/tenants/enduser/delete_confirmation.html"
    delete_selected_confirmation_template = "admin/tenants/enduser/delete_selected_confirmation.html"

    def delete_view(self, request, object_id, extra_context=None):
        if request.method == "POST" and request.POST.get("post"):
            obj = self.get_object(request, unquote(object_id))
            if obj is not None and request.POST.get("confirm", "").strip() != obj.external_id:
                response = super().delete_view(_unconfirmed(request, keep=False), object_id, {
                    **(extra_context or {}), "confirm_error": "Not erased: the external id typed does not match."})
                response.status_code = 400
                return response
        return super().delete_view(request, object_id, extra_context)

    def get_actions(self, request):
        actions = super().get_actions(request)
        if "delete_selected" in actions:
            actions["delete_selected"] = (users_erase_selected, "delete_selected", "Erase selected end users")
        return actions

    def get_deleted_objects(self, objs, request):
        return erasure_summary(objs, request, lambda u: (
            f"End user {u.external_id}: {MemoryRecord.objects.for_tenant(u.tenant_id).filter(user=u).count()} "
            f"memories and {Session.objects.for_tenant(u.tenant_id).filter(user=u).count()} sessions, erased from "
            "the database, Qdrant and Redis"))

    def delete_model(self, request, obj):
        user_erase(tenant=obj.tenant, user=obj)

    def delete_queryset(self, request, queryset):
        for user in queryset.select_related("tenant"):
            user_erase(tenant=user.tenant, user=user)


@admin.register(TenantErasure)
class TenantErasureAdmin(ReadOnlyAdmin):
    """Superusers only (they alone may delete a tenant): the record outlives the tenant, so it cannot be scoped."""

    list_display = ("slug", "state", "progress", "requested_by", "created_at", "started_at", "finished_at")
    list_filter = ("state",)
    search_fields = ("slug", "tenant_id_value")
    readonly_fields = ("id", "tenant_id_value", "slug", "state", "users_done", "users_total", "requested_by",
                       "created_at", "started_at", "finished_at", "error")

    @admin.display(description="users erased")
    def progress(self, obj):
        return f"{obj.users_done} / {obj.users_total}"

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser
