"""Tenants' API keys: listed, scoped to the staff user's tenants, revoked through tenants.services."""
from __future__ import annotations

from django.contrib import admin, messages
from rest_framework_api_key.admin import APIKeyModelAdmin
from rest_framework_api_key.models import APIKey

from tenants.models import TenantApiKey
from tenants.services import apikey_revoke

from .toolkit import ScopedTenantFilter, TenantScopedAdminMixin

# The library's own key model is unused (keys belong to tenants), and its admin would be unscoped: hide it.
if admin.site.is_registered(APIKey):
    admin.site.unregister(APIKey)


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
        revoked = sum(apikey_revoke(tenant=key.tenant, prefix=key.prefix) for key in queryset.select_related("tenant"))
        self.message_user(request, f"Revoked {revoked} API key(s).", messages.SUCCESS)
