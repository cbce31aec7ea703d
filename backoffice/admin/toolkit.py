"""The toolkit every admin page is built from: the one mixin that limits staff to their own tenants, the tenant and user
filters, read-only and inline bases, and the list cells and links.

Superusers see everything. Any other staff user sees only the tenants listing them in Tenant.staff_users:
every scoped ModelAdmin filters its queryset in TenantScopedAdminMixin, so another tenant's object is "not
found" (the admin redirects), and actions only ever receive in-scope rows. Django's model permissions still
apply on top.
"""
from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.forms import BaseInlineFormSet, ModelChoiceField
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from tenants.models import EndUser, Tenant


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


class ParentScopedInlineFormSet(BaseInlineFormSet):
    """Each row's hidden id is looked up among the parent's rows: the stock field looks it up through the model's
    default manager, which refuses a query without a tenant, and an id of another parent's row is no choice here."""

    def add_fields(self, form, index):
        super().add_fields(form, index)
        field = form.fields.get(self._pk_field.name)
        if isinstance(field, ModelChoiceField) and field.queryset.model is self.model:
            field.queryset = self.queryset.using(field.queryset.db)


class ParentScopedInlineMixin:
    """An inline's rows are those of its parent object, which the parent's admin already scoped to the user's
    tenants: the inline reads them across tenants' managers and the formset narrows them to that parent."""

    formset = ParentScopedInlineFormSet

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


def when(value, *, time: bool = False) -> str:
    """A list column's date, short and on one line; with its time where several happen in a day (history)."""
    if not value:
        return "—"
    value = timezone.localtime(value)
    return format_html('<span title="{}" style="white-space:nowrap">{}</span>', f"{value:%d %b %Y %H:%M %Z}",
                       f"{value:%Y-%m-%d %H:%M}" if time else f"{value:%Y-%m-%d}")


def changelist_link(model, label: str, **filters) -> str:
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    query = "&".join(f"{k}={v}" for k, v in filters.items())
    return format_html('<a href="{}?{}">{}</a>', url, query, label)


def staff_actor(request) -> str:
    """How history names a staff user."""
    return request.user.get_username()
