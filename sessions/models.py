"""Sessions and messages (the provenance anchors), summary anchors, bridge summaries and session links."""
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


class SummaryAnchor(models.Model):
    """Older turns of a session folded into a summary ("turns 1–12: …")."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="anchors")
    first_seq = models.PositiveIntegerField()
    last_seq = models.PositiveIntegerField()
    # Turn numbers (user messages counted from 1) for the "turns 1–12: …" label.
    first_turn = models.PositiveIntegerField(default=0)
    last_turn = models.PositiveIntegerField(default=0)
    text = models.TextField()
    token_count = models.PositiveIntegerField(default=0)
    method = models.CharField(max_length=20, default="extractive")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        ordering = ["session", "first_seq"]
        constraints = [models.UniqueConstraint(fields=["session", "first_seq"], name="anchor_unique_start")]


class BridgeSummary(models.Model):
    """What a closed session hands to the user's next one. One per session, enforced by the database."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE)
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="bridge")
    text = models.TextField()
    goal = models.TextField(blank=True, default="")
    # The parts the text was written from: goal, found, decided, open.
    details = models.JSONField(default=dict, blank=True)
    # Embedding of the goal, so a later session's first message can find this one (similar_goal).
    goal_embedding = models.JSONField(null=True, blank=True)
    method = models.CharField(max_length=20, default="extractive")
    token_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()


class SessionLink(models.Model):
    class Kind(models.TextChoices):
        SAME_USER = "same_user", "Same user"
        SIMILAR_GOAL = "similar_goal", "Similar goal"
        REFERENCED_CONTEXT = "referenced_context", "Referenced context"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE)
    from_session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="links_out")
    to_session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="links_in")
    kind = models.CharField(max_length=24, choices=Kind.choices)
    score = models.FloatField(default=1.0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["from_session", "to_session", "kind"], name="link_unique")]

    def __str__(self):
        return f"{self.get_kind_display()} link"


class ImportJob(models.Model):
    """One bulk import of a conversation export for one end user: its progress is its cursor (`position`, the
    messages of the file's stream already written or found stored), advanced in the transaction that writes them,
    so a job stopped anywhere resumes exactly where it stopped."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    class Source(models.TextChoices):
        API = "api", "API"
        COMMAND = "command", "Management command"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="import_jobs")
    user = models.ForeignKey("tenants.EndUser", on_delete=models.CASCADE, related_name="import_jobs")
    format = models.CharField(max_length=16)
    options = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.API)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    # The export itself for an API job (bounded by the endpoint's body limit), dropped once the job is done; a
    # command job reads its file instead.
    payload = models.BinaryField(null=True, blank=True)
    file_name = models.CharField(max_length=1000, blank=True, default="")
    sessions_total = models.PositiveIntegerField(default=0)
    messages_total = models.PositiveIntegerField(default=0)
    position = models.PositiveIntegerField(default=0)
    sessions_created = models.PositiveIntegerField(default=0)
    messages_created = models.PositiveIntegerField(default=0)
    messages_skipped = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # What the tenant's memory TTLs do to this history, forecast before the job was created (see
    # orchestration.imports.import_forecast).
    lifetimes = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()

    class Meta:
        ordering = ["-created_at", "id"]

    def __str__(self):
        return f"import {self.id} ({self.status}, {self.position}/{self.messages_total})"
