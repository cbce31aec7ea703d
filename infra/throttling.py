"""The DRF throttle applied to every authenticated REST endpoint: one request against the tenant's per-minute quota."""
from __future__ import annotations

from rest_framework.throttling import BaseThrottle

from .quotas import quota_charge_request


class TenantRequestQuotaThrottle(BaseThrottle):
    """Charges the caller's tenant; over quota it raises RateLimited (429 with Retry-After) itself, so the
    body and header come from the one exception handler rather than DRF's Throttled."""

    def allow_request(self, request, view):
        tenant = getattr(request.user, "tenant", None)
        if tenant is None:
            # Anonymous requests never reach a tenant's data (authentication refuses them first).
            return True
        quota_charge_request(tenant=tenant)
        return True
