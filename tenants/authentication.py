"""Bearer API-key authentication: the key resolves to its tenant, and request.tenant is set once here."""
from __future__ import annotations

from rest_framework import authentication, exceptions, permissions

from .models import TenantApiKey


class TenantPrincipal:
    """The authenticated caller: a tenant acting through one of its keys."""

    is_authenticated = True

    def __init__(self, tenant, api_key):
        self.tenant = tenant
        self.api_key = api_key

    def __str__(self):
        return f"tenant:{self.tenant.slug}"


def tenant_from_bearer(header: str):
    """Resolve an Authorization header to (tenant, key) or raise AuthenticationFailed."""
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise exceptions.NotAuthenticated("Authorization: Bearer <api key> is required.")
    try:
        key = TenantApiKey.objects.get_from_key(token.strip())
    except TenantApiKey.DoesNotExist:
        raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
    if key.has_expired:
        raise exceptions.AuthenticationFailed("API key has expired.")
    if not key.tenant.is_active:
        raise exceptions.AuthenticationFailed("Tenant is disabled.")
    return key.tenant, key


def tenant_from_api_key(header: str):
    """The surfaces outside DRF (OpenAI-compatible, MCP): the tenant of an Authorization header, charged one
    request against its quota like every REST request (429/503 as AppError); a bad or missing key is a 401."""
    from infra.errors import AppError
    from infra.quotas import quota_charge_request

    try:
        tenant, _ = tenant_from_bearer(header)
    except (exceptions.AuthenticationFailed, exceptions.NotAuthenticated) as exc:
        raise AppError(str(exc.detail), code="invalid_api_key", status=401)
    quota_charge_request(tenant=tenant)
    return tenant


class TenantApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        tenant, key = tenant_from_bearer(header)
        request._request.tenant = tenant
        return TenantPrincipal(tenant, key), key

    def authenticate_header(self, request):
        return 'Bearer realm="continuum"'


class IsTenant(permissions.BasePermission):
    def has_permission(self, request, view):
        return isinstance(request.user, TenantPrincipal)
