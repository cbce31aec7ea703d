"""Rows orchestration writes. Receipts of composed contexts: what each context handed the model from long-term memory,
ranked how, and what was left out for budget, written by a task after the turn (receipts.py), never on the request
path. Import jobs: one bulk import of a conversation export and its cursor (imports.py)."""
from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from tenants.scoping import TenantManager


class ContextReceipt(models.Model):
    # The id is chosen when the context is composed, so a task that runs twice writes one receipt.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    # Erasing the user (or the session) removes its receipts: they quote the user's words and memories (words the
    # user takes back leave the query and the items, orchestration/forgetting.py).
    user = models.ForeignKey("tenants.EndUser", on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey("chat_sessions.Session", on_delete=models.CASCADE, related_name="+")
    surface = models.CharField(max_length=20)  # context | assistant | openai | mcp | ...
    created_at = models.DateTimeField(db_index=True)  # when the context was composed
    query = models.TextField(blank=True, default="")
    budget = models.PositiveIntegerField(default=0)
    total_tokens = models.PositiveIntegerField(default=0)
    breakdown = models.JSONField(default=dict, blank=True)
    memory_status = models.CharField(max_length=16, default="ok")
    included_count = models.PositiveIntegerField(default=0)
    left_out_count = models.PositiveIntegerField(default=0)

    objects = TenantManager()

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [models.Index(fields=["tenant", "session", "created_at"], name="receipt_session_time")]

    def __str__(self):
        return f"receipt {str(self.pk)[:8]} ({self.surface}, {self.included_count} memories)"


class ContextReceiptItem(models.Model):
    """One memory a context included, or one ranked in but left out."""

    class Reason(models.TextChoices):
        INCLUDED = "", "Included"
        BUDGET = "budget", "Did not fit retrieval's token budget"
        SECTION_BUDGET = "section_budget", "Dropped when the memory section shrank to fit the context"

    receipt = models.ForeignKey(ContextReceipt, on_delete=models.CASCADE, related_name="items")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    # Not a foreign key: a receipt keeps saying what the model was given, ranked how, after the memory is edited or
    # deleted. Its text is derived from the memory's words, so words the user takes back leave it too ("[forgotten]"
    # in their place, orchestration/forgetting.py); an edit leaves it as the model read it.
    memory_uuid = models.UUIDField()
    included = models.BooleanField(default=True)
    reason = models.CharField(max_length=16, choices=Reason.choices, blank=True, default="")
    section = models.CharField(max_length=16, default="memories")
    rank = models.PositiveIntegerField()  # 1 = best ranked, over included and left-out items together
    kind = models.CharField(max_length=12, blank=True, default="")
    text = models.TextField(blank=True, default="")
    score = models.FloatField(default=0.0)
    score_parts = models.JSONField(default=dict, blank=True)
    tokens = models.PositiveIntegerField(default=0)
    source_message_ids = models.JSONField(default=list, blank=True)

    objects = TenantManager()

    class Meta:
        ordering = ["receipt", "rank"]
        indexes = [models.Index(fields=["tenant", "memory_uuid"], name="receipt_item_memory")]

    def __str__(self):
        return f"{self.section} #{self.rank}"


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
