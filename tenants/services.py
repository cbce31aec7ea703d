"""Writes for tenancy: tenants, API keys and end users."""
from __future__ import annotations

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from infra.errors import Conflict

from .models import EndUser, Tenant, TenantApiKey


def tenant_create(*, name: str, slug: str | None = None, **settings) -> Tenant:
    slug = slug or slugify(name)[:80] or "tenant"
    if Tenant.objects.filter(slug=slug).exists():
        raise Conflict(f"Tenant '{slug}' already exists.", code="tenant_exists")
    settings.setdefault("review_inferred", django_settings.TENANT_REVIEW_INFERRED_DEFAULT)
    return Tenant.objects.create(name=name, slug=slug, **settings)


def apikey_create(*, tenant: Tenant, name: str = "default") -> tuple[TenantApiKey, str]:
    """Returns the key row and the plain key, which is shown once and never stored."""
    return TenantApiKey.objects.create_key(tenant=tenant, name=name[:50] or "default")


def apikey_revoke(*, tenant: Tenant | None = None, prefix: str) -> int:
    # Without a tenant: an operator revoking a leaked key by its prefix, whichever tenant holds it.
    qs = TenantApiKey.objects.for_tenant(tenant) if tenant is not None else TenantApiKey.objects.unscoped()
    qs = qs.filter(prefix=prefix, revoked=False)
    return qs.update(revoked=True)


def end_user_create(*, tenant: Tenant, external_id: str, display_name: str = "",
                    metadata: dict | None = None) -> EndUser:
    try:
        with transaction.atomic():
            return EndUser.objects.create(tenant=tenant, external_id=external_id, display_name=display_name,
                                          metadata=metadata or {})
    except IntegrityError:
        raise Conflict(f"A user with external_id '{external_id}' already exists.", code="user_exists")


def end_user_get_or_create(*, tenant: Tenant, external_id: str, display_name: str = "") -> EndUser:
    user, _ = EndUser.objects.for_tenant(tenant).get_or_create(tenant=tenant, external_id=external_id,
                                            defaults={"display_name": display_name})
    return user

