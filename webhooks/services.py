"""Writes for webhook endpoints: register, change, enable or disable, rotate the secret, delete.

A new or rotated secret is returned once and stored sealed (infra.encryption). After a rotation the previous secret
keeps signing, beside the new one, for WEBHOOK_SECRET_GRACE_HOURS, so a receiver can switch without losing events.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction

from infra import clock
from infra.encryption import seal
from infra.errors import ValidationFailed
from tenants.models import Tenant

from .models import EventType, WebhookEndpoint
from .selectors import access_webhook_endpoint
from .signing import webhook_secret_generate
from .targets import webhook_url_clean

DESCRIPTION_MAX_CHARS = 255


def webhook_event_types_clean(event_types) -> list[str]:
    if not isinstance(event_types, list | tuple) or not event_types:
        raise ValidationFailed("event_types must be a non-empty list.", code="invalid_event_types",
                               details={"event_types": EventType.values})
    unknown = [t for t in event_types if t not in EventType.values]
    if unknown:
        raise ValidationFailed(f"Unknown event types: {', '.join(map(str, unknown))}.", code="invalid_event_types",
                               details={"event_types": EventType.values})
    return [t for t in EventType.values if t in event_types]  # deduplicated, in a stable order


def _description_clean(description) -> str:
    if not isinstance(description, str) or len(description) > DESCRIPTION_MAX_CHARS or "\x00" in description:
        raise ValidationFailed(f"description is text of at most {DESCRIPTION_MAX_CHARS} characters.",
                               details={"description": ["Invalid."]})
    return description.strip()


def webhook_endpoint_create(*, tenant: Tenant, url: str, event_types=None, description: str = "",
                            include_content: bool = False) -> tuple[WebhookEndpoint, str]:
    """Register an endpoint. Returns it and its secret (shown this once)."""
    secret = webhook_secret_generate()
    endpoint = WebhookEndpoint.objects.create(
        tenant=tenant, url=webhook_url_clean(url),
        event_types=webhook_event_types_clean(event_types) if event_types is not None else list(EventType.values),
        description=_description_clean(description), include_content=bool(include_content),
        secret_sealed=seal(secret), secret_rotated_at=clock.now())
    return endpoint, secret


def webhook_endpoint_update(*, tenant: Tenant, endpoint_id, url: str | None = None, event_types=None,
                            description: str | None = None, include_content: bool | None = None,
                            enabled: bool | None = None) -> WebhookEndpoint:
    """Change what is given; enabled=True re-enables a disabled endpoint and clears its failure count."""
    with transaction.atomic():
        endpoint = access_webhook_endpoint(tenant=tenant, endpoint_id=endpoint_id, for_update=True)
        if url is not None:
            endpoint.url = webhook_url_clean(url)
        if event_types is not None:
            endpoint.event_types = webhook_event_types_clean(event_types)
        if description is not None:
            endpoint.description = _description_clean(description)
        if include_content is not None:
            endpoint.include_content = bool(include_content)
        if enabled is True and not endpoint.is_active:
            endpoint.is_active, endpoint.consecutive_failures = True, 0
            endpoint.disabled_at, endpoint.disabled_reason = None, ""
        elif enabled is False and endpoint.is_active:
            endpoint.is_active, endpoint.disabled_at = False, clock.now()
            endpoint.disabled_reason = "disabled by the tenant"
        endpoint.save()
    return endpoint


def webhook_endpoint_enable(*, tenant: Tenant, endpoint_id) -> WebhookEndpoint:
    return webhook_endpoint_update(tenant=tenant, endpoint_id=endpoint_id, enabled=True)


def webhook_secret_rotate(*, tenant: Tenant, endpoint_id) -> tuple[WebhookEndpoint, str]:
    """A new secret (returned once); the one it replaces still signs until the grace period ends."""
    secret = webhook_secret_generate()
    with transaction.atomic():
        endpoint = access_webhook_endpoint(tenant=tenant, endpoint_id=endpoint_id, for_update=True)
        now = clock.now()
        endpoint.previous_secret_sealed = endpoint.secret_sealed
        endpoint.previous_secret_expires_at = now + timedelta(hours=settings.WEBHOOK_SECRET_GRACE_HOURS)
        endpoint.secret_sealed, endpoint.secret_rotated_at = seal(secret), now
        endpoint.save(update_fields=["previous_secret_sealed", "previous_secret_expires_at", "secret_sealed",
                                     "secret_rotated_at", "updated_at"])
    return endpoint, secret


def webhook_endpoint_delete(*, tenant: Tenant, endpoint_id) -> None:
    """Remove the endpoint with its deliveries and their log; nothing more is sent to it."""
    access_webhook_endpoint(tenant=tenant, endpoint_id=endpoint_id).delete()
