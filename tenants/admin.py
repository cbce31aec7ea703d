"""Admin for tenants, API keys and end users, and the one mixin that limits staff to their own tenants.

Superusers see everything. Any other staff user sees only the tenants listing them in Tenant.staff_users:
every scoped ModelAdmin filters its queryset in TenantScopedAdminMixin, so another tenant's object is "not
found" (the admin redirects), and actions only ever receive in-scope rows. Django's model permissions still
apply on top.
"""
from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils.html import format_html
from rest_framework_api_key.admin import APIKeyModelAdmin
from rest_framework_api_key.models import APIKey

from .models import EndUser, Tenant, TenantApiKey, TenantErasure

# The library's own key model is unused (keys belong to tenants), and its admin would be unscoped: hide it.
if admin.site.is_registered(APIKey):
    admin.site.unregister(APIKey)


def admin_tenants(request) -> QuerySet[Tenant] | None:
    """The tenants this admin user may see; None means all (superuser)."""
    if request.user.is_superuser:
        return None
    return Tenant.objects.filter(staff_users=request.user)


class TenantScopedAdminMixin:
    """Scopes a ModelAdmin to the request user's tenants. `tenant_lookup` is the path from the model to its
    Tenant ("tenant", "session__tenant"); an empty string means the model is Tenant itself."""

    tenant_lookup = "tenant"

    def _scope_filter(self, tenants) -> Q:
        return Q(**{f"{self.tenant_lookup}__in" if self.tenant_lookup else "pk__in": tenants})

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if hasattr(qs, "unscoped"):  # staff tooling spans tenants; narrowed to the user's tenants just below
            qs = qs.unscoped()
        tenants = admin_tenants(request)
        return qs if tenants is None else qs.filter(self._scope_filter(tenants))

    def tenant_of(self, obj) -> Tenant | None:
        if not self.tenant_lookup:
            return obj
        for part in self.tenant_lookup.split("__"):
            obj = getattr(obj, part, None)
        return obj

    def in_scope(self, request, obj=None) -> bool:
        if request.user.is_superuser:
            return True
        if not (request.user.is_active and request.user.is_staff):
            return False
        if obj is None:
            return request.user.tenants.exists()
        tenant = self.tenant_of(obj)
        return tenant is not None and tenant.staff_users.filter(pk=request.user.pk).exists()

    def has_module_permission(self, request):
        return super().has_module_permission(request) and self.in_scope(request)

    def has_view_permission(self, request, obj=None):
        return super().has_view_permission(request, obj) and self.in_scope(request, obj)

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and self.in_scope(request, obj)

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and self.in_scope(request, obj)

    def has_add_permission(self, request, *args):
        return super().has_add_permission(request, *args) and self.in_scope(request)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        tenants = admin_tenants(request)
        related = db_field.related_model
        if related is Tenant and tenants is not None:
            kwargs["queryset"] = tenants
        elif hasattr(related.objects, "unscoped"):  # a tenant-owned model: the choices of the user's tenants
            choices = related.objects.unscoped()
            kwargs["queryset"] = choices if tenants is None else choices.filter(tenant__in=tenants)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records the system writes (history, job runs, erasures): staff read them, nobody edits them here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ParentScopedInlineMixin:
    """An inline's rows are those of its parent object, which the parent's admin already scoped to the user's
    tenants: the inline reads them across tenants' managers and the formset narrows them to that parent."""

    def get_queryset(self, request):
        return super().get_queryset(request).unscoped()


class ScopedTenantFilter(admin.SimpleListFilter):
    """A tenant filter that lists only the tenants the user may see (the stock one would list them all)."""

    title = "tenant"
    parameter_name = "tenant"
    lookup = "tenant"

    def lookups(self, request, model_admin):
        tenants = admin_tenants(request)
        tenants = Tenant.objects.all() if tenants is None else tenants
        return [(str(t.pk), t.slug) for t in tenants.order_by("slug")]

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        try:
            return queryset.filter(**{f"{self.lookup}__pk": value})
        except Exception:  # a malformed id selects nothing rather than failing the page
            return queryset.none()


class UserFilter(admin.ListFilter):
    """Narrow a per-user list to one end user, picked by typing a name (the admin's autocomplete over end users).

    The parameter is the `user__id__exact` the end user's page links with, so those links and this filter are one
    thing; the chosen user is shown by name with a way to clear it. `lookup` is the path from the listed model to
    its EndUser; `source` names a registered model's foreign key to EndUser, which the autocomplete view requires."""

    title = "user"
    lookup = "user"
    parameter_name = "user__id__exact"
    source = ("memory", "memoryrecord", "user")
    template = "admin/continuum/user_filter.html"

    def __init__(self, request, params, model, model_admin):
        super().__init__(request, params, model, model_admin)
        if self.parameter_name in params:
            self.used_parameters[self.parameter_name] = params.pop(self.parameter_name)[-1]
        self.selected = None
        value = self.value()
        if value:
            try:
                users = EndUser.objects.unscoped().select_related("tenant")
                tenants = admin_tenants(request)
                users = users if tenants is None else users.filter(tenant__in=tenants)
                self.selected = users.filter(pk=value).first()
            except Exception:  # a malformed id selects nobody rather than failing the page
                self.selected = None

    def value(self):
        return self.used_parameters.get(self.parameter_name)

    def has_output(self):
        return True

    def expected_parameters(self):
        return [self.parameter_name]

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        if self.selected is None:
            return queryset.none()
        return queryset.filter(**{f"{self.lookup}__pk": self.selected.pk})

    def choices(self, changelist):
        yield {"selected": self.selected is not None, "label": str(self.selected) if self.selected else "",
               "value": str(self.selected.pk) if self.selected else "", "parameter": self.parameter_name,
               "clear_url": changelist.get_query_string(remove=[self.parameter_name]),
               "invalid": bool(self.value()) and self.selected is None,
               "app_label": self.source[0], "model_name": self.source[1], "field_name": self.source[2],
               "url": reverse("admin:autocomplete"),
               "user_url": reverse("admin:tenants_enduser_change", args=[self.selected.pk]) if self.selected else ""}


def user_filter(lookup: str, source: tuple[str, str, str]) -> type[UserFilter]:
    """A UserFilter for a model that reaches its user through `lookup` ("session__user")."""
    return type(f"UserFilter_{lookup}", (UserFilter,), {"lookup": lookup, "source": source,
                                                        "parameter_name": f"{lookup}__id__exact"})


class UserFilterMediaMixin:
    """The scripts the user filter's picker needs, merged into the page's media in the order they depend on; and
    the filter's parameter allowed (the admin allows a lookup across relations only for filters it knows)."""

    def lookup_allowed(self, lookup, value, request=None):
        if any(isinstance(f, type) and issubclass(f, UserFilter) and f.parameter_name == lookup
               for f in self.list_filter):
            return True
        return super().lookup_allowed(lookup, value, request)

    @property
    def media(self):
        from django import forms
        from django.conf import settings

        extra = "" if settings.DEBUG else ".min"
        return super().media + forms.Media(
            js=(f"admin/js/vendor/jquery/jquery{extra}.js", f"admin/js/vendor/select2/select2.full{extra}.js",
                "admin/js/jquery.init.js", "admin/js/autocomplete.js"),
            css={"screen": (f"admin/css/vendor/select2/select2{extra}.css", "admin/css/autocomplete.css")})


def count_of(model, fk: str, **filters):
    """A correlated COUNT subquery: counting through joins would multiply one relation by another."""
    counted = (model.objects.filter(**{fk: OuterRef("pk")}, **filters).order_by().values(fk)
               .annotate(n=Count("pk")).values("n"))
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def erasure_summary(objs, request, describe):
    """For get_deleted_objects: erasure goes through a service that removes every dependent row (and the
    points and keys) itself, so the admin lists a summary instead of collecting, and permission-checking,
    every cascaded row."""
    return [describe(obj) for obj in objs], {}, set(), []


def admin_link(obj, label=None) -> str:
    if obj is None:
        return "—"
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label if label is not None else str(obj))


def wide_text(text: str, width: str = "18em") -> str:
    """A list cell that wraps at a readable width (a table ignores a cell's own min-width; a block inside it does
    not), so the other columns keep their room on a 1,400-pixel screen."""
    return format_html('<div style="min-width:{};max-width:36em;white-space:normal">{}</div>', width, text)


def user_short(user) -> str:
    """A user's label in a list column: one line, cut with an ellipsis where the column ends."""
    if user is None:
        return "—"
    return format_html('<span title="{}" style="display:inline-block;max-width:10em;overflow:hidden;'
                       'text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom">{}</span>',
                       user.external_id, str(user))


def when(value) -> str:
    """A list column's date: short and on one line."""
    if not value:
        return "—"
    return format_html('<span title="{}" style="white-space:nowrap">{}</span>', f"{value:%d %b %Y %H:%M %Z}",
                       f"{value:%Y-%m-%d}")


def changelist_link(model, label: str, **filters) -> str:
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    query = "&".join(f"{k}={v}" for k, v in filters.items())
    return format_html('<a href="{}?{}">{}</a>', url, query, label)


def _memory_model(proxy: bool = False):
    from memory.models import MemoryRecord, MemoryReview

    return MemoryReview if proxy else MemoryRecord


def _session_model():
    from sessions.models import Session

    return Session


def _event_model():
    from memory.models import MemoryEvent

    return MemoryEvent


def staff_actor(request) -> str:
    """How history names a staff user."""
    return request.user.get_username()


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
        from memory.models import MemoryRecord

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
        from django.conf import settings

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
        from memory.models import MemoryRecord

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
        from orchestration.erasure import tenant_erasure_start

        for tenant in tenants:
            tenant_erasure_start(tenant=tenant, requested_by=staff_actor(request))
        self.message_user(request, f"Erasure started for {', '.join(t.slug for t in tenants)}: the tenant is "
                                   "deactivated now and removed when the erasure finishes (see Tenant erasures).",
                          messages.INFO)


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



@admin.register(TenantApiKey)
class TenantApiKeyAdmin(TenantScopedAdminMixin, APIKeyModelAdmin):
    list_display = ("prefix", "name", "tenant", "created", "expiry_date", "_has_expired", "revoked")
    list_filter = (ScopedTenantFilter, "revoked", "created")
    search_fields = ("name", "prefix", "tenant__slug")
    actions = ["revoke_keys"]

    def get_object(self, request, object_id, from_field=None):
        # The key id is text: PostgreSQL refuses a NUL byte in it with an error (a 500), not an empty result.
        if "\x00" in str(object_id):
            return None
        return super().get_object(request, object_id, from_field)

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        # A key never moves to another tenant.
        return fields + ("tenant",) if obj is not None else fields

    @admin.action(description="Revoke selected API keys", permissions=["change"])
    def revoke_keys(self, request, queryset):
        from .services import apikey_revoke

        revoked = sum(apikey_revoke(tenant=key.tenant, prefix=key.prefix) for key in queryset.select_related("tenant"))
        self.message_user(request, f"Revoked {revoked} API key(s).", messages.SUCCESS)


@admin.register(EndUser)
class EndUserAdmin(TenantScopedAdminMixin, admin.ModelAdmin):
    list_display = ("short_label", "tenant", "active_memories", "pending_memories", "all_memories",
                    "sessions_count", "created_at")
    list_filter = (ScopedTenantFilter,)
    search_fields = ("external_id", "display_name")
    list_per_page = 50
    fields = ("id", "tenant", "external_id", "display_name", "metadata", "created_at")
    readonly_fields = ("id", "tenant", "external_id", "created_at")
    # The page opens with what is known about the user (templates/admin/tenants/enduser/change_form.html).
    change_form_template = "admin/tenants/enduser/change_form.html"
    RECENT_SESSIONS = 10

    def get_queryset(self, request):
        from memory.models import MemoryRecord, MemoryStatus
        from sessions.models import Session

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
        return changelist_link(_memory_model(), str(obj.n_active), user__id__exact=obj.pk, status__exact="active")

    @admin.display(description="awaiting review", ordering="n_pending")
    def pending_memories(self, obj):
        if not obj.n_pending:
            return "0"
        return changelist_link(_memory_model(proxy=True), str(obj.n_pending), user__id__exact=obj.pk)

    @admin.display(description="all memories", ordering="n_memories")
    def all_memories(self, obj):
        return changelist_link(_memory_model(), str(obj.n_memories), user__id__exact=obj.pk)

    @admin.display(description="sessions", ordering="n_sessions")
    def sessions_count(self, obj):
        from sessions.models import Session

        return changelist_link(Session, str(obj.n_sessions), user__id__exact=obj.pk)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        extra_context = dict(extra_context or {})
        if obj is not None:
            extra_context["overview"] = self.overview(obj)
        return super().change_view(request, object_id, form_url, extra_context)

    def overview(self, user) -> dict:
        """What is known about the user, each part one bounded query (the page's cost does not grow with them)."""
        from memory.models import MemoryKind, MemoryStatus, SourceType
        from memory.overview import goals_open, goals_stale_mentions, memories_by_subject, memory_counts, said_by
        from memory.profile import profile_select
        from sessions.selectors import session_list

        tenant = user.tenant
        counts = memory_counts(tenant=tenant, user=user)
        memories = _memory_model()

        def link(label, n, **filters):
            return {"label": label, "n": n,
                    "link": changelist_link(memories, str(n), user__id__exact=user.pk, **filters)}

        profile = profile_select(tenant=tenant, user=user, limit=30)
        groups = memories_by_subject(tenant=tenant, user=user)
        goals = goals_open(tenant=tenant, user=user)
        for group in groups:
            for m in group.memories:
                m.said_by_label = said_by(m.source_type)
        return {
            "by_kind": [link(k.label, counts.by_kind.get(k.value, 0), status__exact="active", kind__exact=k.value)
                        for k in MemoryKind],
            "by_source": [link(said_by(s.value), counts.by_source.get(s.value, 0), status__exact="active",
                               source_type__exact=s.value) for s in SourceType],
            "by_status": [link(s.label, counts.by_status.get(s.value, 0), status__exact=s.value)
                          for s in MemoryStatus],
            "pending": counts.by_status.get(MemoryStatus.PENDING_REVIEW, 0),
            "review_link": changelist_link(_memory_model(proxy=True), "review them", user__id__exact=user.pk),
            "duplicates_url": reverse("admin:memory_memoryreview_duplicates", args=[user.pk]),
            "total": counts.total,
            "profile": [{"entry": e, "said_by": said_by(e.source_type)} for e in profile],
            "groups": groups,
            "goals": goals,
            "stale": goals_stale_mentions(tenant=tenant, user=user, goals=goals),
            "sessions": list(session_list(tenant=tenant, user=user).select_related("bridge")
                             .order_by("-opened_at", "id")[:self.RECENT_SESSIONS]),
            "sessions_link": changelist_link(_session_model(), "all sessions", user__id__exact=user.pk),
            "events_link": changelist_link(_event_model(), "all history events", user__id__exact=user.pk),
        }

    def has_add_permission(self, request):
        return False  # end users arrive through the API

    def get_deleted_objects(self, objs, request):
        from memory.models import MemoryRecord
        from sessions.models import Session

        return erasure_summary(objs, request, lambda u: (
            f"End user {u.external_id}: {MemoryRecord.objects.for_tenant(u.tenant_id).filter(user=u).count()} "
            f"memories and {Session.objects.for_tenant(u.tenant_id).filter(user=u).count()} sessions, erased from "
            "the database, Qdrant and Redis"))

    def delete_model(self, request, obj):
        from orchestration.erasure import user_erase

        user_erase(tenant=obj.tenant, user=obj)

    def delete_queryset(self, request, queryset):
        from orchestration.erasure import user_erase

        for user in queryset.select_related("tenant"):
            user_erase(tenant=user.tenant, user=user)
