"""Routes for a tenant's webhooks."""
from django.urls import path

from . import apis

urlpatterns = [
    path("webhooks", apis.WebhookListCreateApi.as_view(), name="webhooks"),
    path("webhooks/<str:webhook_id>", apis.WebhookDetailApi.as_view(), name="webhook-detail"),
    path("webhooks/<str:webhook_id>/rotate-secret", apis.WebhookSecretRotateApi.as_view(), name="webhook-rotate"),
    path("webhooks/<str:webhook_id>/deliveries", apis.WebhookDeliveryListApi.as_view(), name="webhook-deliveries"),
]
