"""Writes for tenancy: tenants, API keys, end users and the record of a tenant's erasure."""
from __future__ import annotations

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils.text import slugify

from infra import clock
from infra.errors import Conflict

from .models import EndUser, Tenant, TenantApiKey, TenantErasure


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



def end_user_row_delete(*, user: EndUser) -> dict[str, int]:
    """Delete an end user's row; what it owns goes with it (sessions, messages, anchors, bridges, links, receipts,
    memories). Returns the rows deleted per table."""
    _, cascaded = user.delete()
    return cascaded


def tenant_deactivate(*, tenant: Tenant) -> None:
    """Stop the tenant's keys working (its erasure is under way); call inside a transaction."""
    Tenant.objects.select_for_update().filter(pk=tenant.pk).update(is_active=False)


def tenant_row_delete(*, tenant_id) -> None:
    """Delete the tenant's row; its keys, runs and history cascade."""
    Tenant.objects.filter(pk=tenant_id).delete()


def tenant_erasure_record(*, tenant: Tenant, requested_by: str = "") -> tuple[TenantErasure, bool]:
    """The tenant's pending erasure, or a new one recorded: (erasure, created). Call inside a transaction."""
    pending = TenantErasure.objects.filter(tenant_id_value=tenant.pk, state__in=(
        TenantErasure.State.QUEUED, TenantErasure.State.RUNNING)).first()
    if pending is not None:
        return pending, False
    return TenantErasure.objects.create(tenant_id_value=tenant.pk, slug=tenant.slug,
                                        users_total=EndUser.objects.for_tenant(tenant).count(),
                                        requested_by=requested_by[:150]), True


def tenant_erasure_running(*, erasure_id) -> None:
    """A run of the erasure starts: its first start time is kept, a previous error cleared."""
    TenantErasure.objects.filter(pk=erasure_id, started_at__isnull=True).update(started_at=clock.now())
    TenantErasure.objects.filter(pk=erasure_id).update(state=TenantErasure.State.RUNNING, error="")


def tenant_erasure_user_done(*, erasure_id) -> None:
    TenantErasure.objects.filter(pk=erasure_id).update(users_done=F("users_done") + 1)


def tenant_erasure_done(*, erasure_id) -> None:
    TenantErasure.objects.filter(pk=erasure_id).update(state=TenantErasure.State.DONE, finished_at=clock.now(),
                                                       users_total=Greatest(F("users_total"), F("users_done")))


def tenant_erasure_failed(*, erasure_id, error: str) -> None:
    """Mark the erasure failed after its last retry, with the reason an operator sees in the admin."""
    TenantErasure.objects.filter(pk=erasure_id).exclude(state=TenantErasure.State.DONE).update(
        state=TenantErasure.State.FAILED, error=error[:2000], finished_at=clock.now())
