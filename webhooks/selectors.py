"""Reads of webhook endpoints and their deliveries; another tenant's endpoint is the same 404 as a missing one."""
from __future__ import annotations

from django.db.models import QuerySet

from infra.errors import NotFound
from tenants.models import Tenant
from tenants.selectors import parse_uuid

from .models import WebhookDelivery, WebhookEndpoint


def webhook_endpoint_list(*, tenant: Tenant) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.for_tenant(tenant)


def access_webhook_endpoint(*, tenant: Tenant, endpoint_id, for_update: bool = False) -> WebhookEndpoint:
    pk = parse_uuid(endpoint_id, what="webhook")
    qs = WebhookEndpoint.objects.for_tenant(tenant)
    if for_update:
        qs = qs.select_for_update()
    endpoint = qs.filter(pk=pk).first()
    if endpoint is None:
        raise NotFound("Webhook not found.")
    return endpoint


def webhook_delivery_list(*, tenant: Tenant, endpoint_id) -> QuerySet[WebhookDelivery]:
    endpoint = access_webhook_endpoint(tenant=tenant, endpoint_id=endpoint_id)
    return (WebhookDelivery.objects.for_tenant(tenant).filter(endpoint=endpoint)
            .prefetch_related("attempt_log"))
