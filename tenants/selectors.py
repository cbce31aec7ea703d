"""Reads for tenancy. Every selector takes tenant= first; access_* raise one 404 for missing and not-yours."""
from __future__ import annotations

import uuid

from django.db.models import QuerySet

from infra.errors import NotFound

from .models import EndUser, Tenant


def parse_uuid(value, *, what: str = "object") -> uuid.UUID:
    """Ids from clients are UUIDs; anything else is simply not found (never a 500)."""
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        raise NotFound(f"{what.capitalize()} not found.")


def end_user_list(*, tenant: Tenant) -> QuerySet[EndUser]:
    return EndUser.objects.for_tenant(tenant)


def access_end_user(*, tenant: Tenant, user_id) -> EndUser:
    uid = parse_uuid(user_id, what="user")
    try:
        return EndUser.objects.for_tenant(tenant).get(id=uid)
    except EndUser.DoesNotExist:
        raise NotFound("User not found.")


def end_user_hold(*, tenant: Tenant, user: EndUser) -> None:
    """Locks the user's row until the transaction ends, so two requests of one user that each look for an open
    session take turns."""
    EndUser.objects.for_tenant(tenant).select_for_update().filter(pk=user.pk).first()


def end_user_by_external_id(*, tenant: Tenant, external_id: str) -> EndUser | None:
    return EndUser.objects.for_tenant(tenant).filter(external_id=external_id).first()


def tenant_by_ref(ref: str) -> Tenant | None:
    """A tenant named by slug or id (operators' commands)."""
    tenant = Tenant.objects.filter(slug=ref).first()
    if tenant is None:
        try:
            tenant = Tenant.objects.filter(pk=uuid.UUID(str(ref))).first()
        except ValueError:
            return None
    return tenant


def end_user_by_ref(*, tenant: Tenant, ref: str) -> EndUser | None:
    """The tenant's end user named by id or external id (operators' commands)."""
    user = end_user_by_external_id(tenant=tenant, external_id=ref)
    if user is None:
        try:
            user = EndUser.objects.for_tenant(tenant).filter(pk=uuid.UUID(str(ref))).first()
        except ValueError:
            return None
    return user
