"""Admin for webhook endpoints (register, edit, re-enable, rotate the secret) and the read-only delivery log.

Writes go through webhooks.services, so the admin and the API validate the same way and the secret is made,
sealed and shown once in one place. Staff see only their tenants' endpoints and deliveries."""
from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from infra.errors import AppError
from webhooks import services
from webhooks.models import EventType, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from webhooks.targets import webhook_url_clean

from .toolkit import ParentScopedInlineMixin, ReadOnlyAdmin, ScopedTenantFilter, TenantScopedAdminMixin


class WebhookEndpointForm(forms.ModelForm):
    event_types = forms.MultipleChoiceField(choices=EventType.choices, widget=forms.CheckboxSelectMultiple,
                                            initial=EventType.values)

    class Meta:
        model = WebhookEndpoint
        fields = ["tenant", "url", "description", "event_types", "include_content", "is_active"]

    def clean_url(self):
        try:
            return webhook_url_clean(self.cleaned_data.get("url", ""))
        except AppError as exc:
            raise forms.ValidationError(exc.message)


def _show_secret(admin_view, request, endpoint, secret: str, verb: str) -> None:
    admin_view.message_user(request, format_html(
        "{} {}. Its signing secret, shown only this once: <code>{}</code>", verb, endpoint.url, secret),
        messages.WARNING)


class WebhookAttemptInline(ParentScopedInlineMixin, admin.TabularInline):
    model = WebhookAttempt
    verbose_name_plural = "attempts"
    fields = readonly_fields = ("number", "started_at", "duration_ms", "status_code", "outcome", "error")
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(TenantScopedAdminMixin, admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = ("url", "tenant", "is_active", "consecutive_failures", "disabled_at", "include_content",
                    "created_at")
    list_filter = (ScopedTenantFilter, "is_active", "include_content")
    search_fields = ("url", "description")
    list_select_related = ("tenant",)
    readonly_fields = ("consecutive_failures", "disabled_at", "disabled_reason", "secret_rotated_at",
                       "previous_secret_expires_at", "created_at", "updated_at")
    actions = ["enable_endpoints", "rotate_secrets"]

    def get_readonly_fields(self, request, obj=None):
        # An endpoint never moves to another tenant.
        return (*self.readonly_fields, "tenant") if obj is not None else self.readonly_fields

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        if change:
            services.webhook_endpoint_update(
                tenant=obj.tenant, endpoint_id=obj.pk, url=data["url"], event_types=data["event_types"],
                description=data["description"], include_content=data["include_content"], enabled=data["is_active"])
            obj.refresh_from_db()
            return
        endpoint, secret = services.webhook_endpoint_create(
            tenant=data["tenant"], url=data["url"], event_types=data["event_types"],
            description=data["description"], include_content=data["include_content"])
        if not data["is_active"]:
            endpoint = services.webhook_endpoint_update(tenant=endpoint.tenant, endpoint_id=endpoint.pk,
                                                        enabled=False)
        # The admin goes on with `obj` (its log entry, the redirect): it becomes the row the service made.
        obj.__dict__.update({k: v for k, v in endpoint.__dict__.items() if k != "_state"})
        obj._state.adding, obj._state.db = False, endpoint._state.db
        _show_secret(self, request, endpoint, secret, "Registered")

    @admin.action(description="Re-enable the selected endpoints", permissions=["change"])
    def enable_endpoints(self, request, queryset):
        for endpoint in queryset.select_related("tenant"):
            services.webhook_endpoint_enable(tenant=endpoint.tenant, endpoint_id=endpoint.pk)
        self.message_user(request, f"Enabled {queryset.count()} endpoint(s).", messages.SUCCESS)

    @admin.action(description="Rotate the signing secret of the selected endpoints", permissions=["change"])
    def rotate_secrets(self, request, queryset):
        for endpoint in queryset.select_related("tenant"):
            rotated, secret = services.webhook_secret_rotate(tenant=endpoint.tenant, endpoint_id=endpoint.pk)
            _show_secret(self, request, rotated, secret, "Rotated the secret of")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(TenantScopedAdminMixin, ReadOnlyAdmin):
    """What was sent where, and every attempt: status code, error, duration."""

    list_display = ("created_at", "event_type", "endpoint", "state", "attempts", "last_status_code",
                    "next_attempt_at", "finished_at", "tenant")
    list_filter = (ScopedTenantFilter, "state", "event_type")
    search_fields = ("event_type", "endpoint__url")
    list_select_related = ("tenant", "endpoint")
    fields = readonly_fields = ("tenant", "endpoint", "event_id", "event_type", "state", "attempts",
                                "next_attempt_at", "last_status_code", "last_error", "created_at", "finished_at",
                                "body")
    inlines = [WebhookAttemptInline]
