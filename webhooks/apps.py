"""Webhooks: per-tenant endpoints, signed deliveries of what changed, a transactional outbox and a delivery log."""
from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"
