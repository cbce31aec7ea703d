"""Sessions and messages: the provenance anchors every memory, summary and receipt points back to."""
from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from tenants.scoping import TenantManager


class Session(models.Model):
    class State(models.TextChoices):
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="sessions")
    user = models.ForeignKey("tenants.EndUser", on_delete=models.CASCADE, related_name="sessions")
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN, db_index=True)
    title = models.CharField(max_length=255, blank=True, default="")
    external_id = models.CharField(max_length=255, null=True, blank=True)
    opened_at = models.DateTimeField(default=timezone.now)
    last_activity_at = models.DateTimeField(default=timezone.now, db_index=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    close_reason = models.CharField(max_length=20, blank=True, default="")
    previous = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="next_sessions")
    # Monotonic per-session message sequence; allocated under a row lock.
    message_seq = models.PositiveIntegerField(default=0)
    # Goal of the session as last known (first user message until the goal stack says otherwise).
    goal = models.TextField(blank=True, default="")
    # The buffer's working state (goal stack, tool ledger, notes) so a lost Redis key rebuilds it;
    # the version only moves forward, so a late writer never overwrites a newer snapshot.
    working_state = models.JSONField(default=dict, blank=True)
    working_version = models.PositiveBigIntegerField(default=0)
    # Set once, by whoever first sees the session's first user message: that one looks for links.
    links_checked_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()

    class Meta:
        ordering = ["-opened_at", "id"]
        indexes = [models.Index(fields=["tenant", "user", "state"]),
                   models.Index(fields=["state", "last_activity_at"], name="session_idle_scan")]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user", "external_id"], name="session_unique_external_id",
                                    condition=models.Q(external_id__isnull=False)),
        ]

    def __str__(self):
        return f"session {self.id} ({self.state})"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"
        TOOL = "tool", "Tool"
        SYSTEM = "system", "System"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="messages")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True, default="")
    name = models.CharField(max_length=128, blank=True, default="")
    external_id = models.CharField(max_length=255, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    token_count = models.PositiveIntegerField(default=0)
    # Tool calls of an assistant message, or the tool_call_id a tool message answers.
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=128, blank=True, default="")
    extracted_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_unique_seq"),
            models.UniqueConstraint(fields=["session", "external_id"], name="message_unique_external_id",
                                    condition=models.Q(external_id__isnull=False)),
        ]

    def __str__(self):
        return f"{self.role}#{self.seq}"
