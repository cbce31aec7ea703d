"""Webhooks: per-tenant endpoints, signed deliveries of what changed, a transactional outbox and a delivery log."""
from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Registers the app's tasks, so services can queue them by name (infra/task_queue.py).
        from . import tasks  # noqa: F401
