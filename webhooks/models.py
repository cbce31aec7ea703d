"""Webhook endpoints of a tenant, the deliveries of events to them (the outbox) and every attempt (the log)."""
from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from tenants.scoping import TenantManager


class EventType(models.TextChoices):
    MEMORY_CREATED = "memory.created"
    MEMORY_UPDATED = "memory.updated"
    MEMORY_SUPERSEDED = "memory.superseded"
    MEMORY_DELETED = "memory.deleted"
    SESSION_CLOSED = "session.closed"
    BRIDGE_WRITTEN = "bridge.written"
    USER_ERASED = "user.erased"


def all_event_types() -> list[str]:
    return list(EventType.values)


class WebhookEndpoint(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=255, blank=True, default="")
    event_types = models.JSONField(default=all_event_types, help_text="Event types sent to this endpoint.")
    include_content = models.BooleanField(
        default=False, help_text="Also send memory and bridge text (secrets filtered). Off: ids and provenance only.")
    # Sealed with infra.encryption; the plain secret is shown once, when it is made.
    secret_sealed = models.TextField(editable=False)
    secret_rotated_at = models.DateTimeField(default=timezone.now, editable=False)
    # After a rotation the previous secret signs too, until this time, so receivers can switch without a gap.
    previous_secret_sealed = models.TextField(blank=True, default="", editable=False)
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    is_active = models.BooleanField(default=True, help_text="Disabled endpoints are sent nothing.")
    consecutive_failures = models.PositiveIntegerField(default=0, help_text="Failed deliveries since the last success.")
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["tenant", "is_active"])]

    def __str__(self):
        return self.url


class WebhookDelivery(models.Model):
    """One event for one endpoint: written in the transaction of the change it reports, sent after commit."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE)
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    # The idempotency key (webhook-id): one per event, the same on every attempt.
    event_id = models.UUIDField(default=uuid.uuid4)
    event_type = models.CharField(max_length=40, choices=EventType.choices)
    # The exact bytes sent (UTF-8 JSON), fixed when the event happened.
    body = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # When a pending delivery may next be tried; a claimed attempt pushes it past the attempt's lease.
    next_attempt_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [models.UniqueConstraint(fields=["endpoint", "event_id"], name="webhook_delivery_once")]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="webhook_delivery_due")]

    def __str__(self):
        return f"{self.event_type} {self.event_id} ({self.state})"


class WebhookAttempt(models.Model):
    """One HTTP request of a delivery: what came back and how long it took."""

    class Outcome(models.TextChoices):
        SUCCESS = "success", "Success"
        RETRYABLE = "retryable", "Failed, retried"
        PERMANENT = "permanent", "Failed, not retried"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE)
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    error = models.TextField(blank=True, default="")

    objects = TenantManager()

    class Meta:
        ordering = ["delivery", "number", "id"]
