"""The tenant and end user a management command names (slug or id, external id or id), or the command's error."""
from __future__ import annotations

from django.core.management.base import CommandError

from tenants.models import EndUser, Tenant
from tenants.selectors import end_user_by_ref, tenant_by_ref


def tenant_and_user_by_ref(*, tenant: str, user: str) -> tuple[Tenant, EndUser]:
    tenant_row = tenant_by_ref(tenant)
    if tenant_row is None:
        raise CommandError(f"No tenant '{tenant}'.")
    user_row = end_user_by_ref(tenant=tenant_row, ref=user)
    if user_row is None:
        raise CommandError(f"Tenant '{tenant_row.slug}' has no end user '{user}'.")
    return tenant_row, user_row
