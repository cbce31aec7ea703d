"""Tenants, their hashed API keys, and the end users each tenant serves."""
from __future__ import annotations

import uuid

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from rest_framework_api_key.models import AbstractAPIKey, BaseAPIKeyManager

from .scoping import TenantManager, TenantQuerySet


class Tenant(models.Model):
    class LifetimeFrom(models.TextChoices):
        LEARNED = "learned", "When Continuum learned the memory (imported history starts its lifetime on import)"
        SAID = "said", "When it was said (the source message's date)"

    class OpenPolicy(models.TextChoices):
        RETURN_OPEN = "return_open", "Return the user's open session"
        CLOSE_PREVIOUS = "close_previous", "Close the open session, start a new one"

    class ChatSessions(models.TextChoices):
        BY_HISTORY = "by_history", "The client's history decides: a conversation that does not continue the open " \
                                   "session opens a new one"
        OPEN_SESSION = "open_session", "Every request continues the user's open session (clients that send only " \
                                       "their newest message)"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    is_active = models.BooleanField(default=True)
    # Settings a tenant may tune.
    retention_days = models.PositiveIntegerField(
        null=True, blank=True, help_text="Forget memories unused this long; empty keeps them.")
    idle_timeout_minutes = models.PositiveIntegerField(default=30)
    open_policy = models.CharField(max_length=20, choices=OpenPolicy.choices, default=OpenPolicy.CLOSE_PREVIOUS)
    chat_sessions = models.CharField(
        max_length=20, choices=ChatSessions.choices, default=ChatSessions.BY_HISTORY,
        help_text="OpenAI surface, requests without X-Session-Id: how a chat's turns find their session.")
    requests_per_minute = models.PositiveIntegerField(default=600)
    tokens_per_minute = models.PositiveIntegerField(default=200_000)
    max_input_tokens = models.PositiveIntegerField(default=8_000)
    review_inferred = models.BooleanField(default=False, help_text="Hold inferred memories for staff review.")
    review_supersede_below = models.FloatField(
        default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Hold a new value that would supersede an active memory for staff review when its confidence is "
                  "below this (0: never); the old value stays in use until a reviewer approves the new one.")
    remember_assistant_turns = models.BooleanField(
        default=True, help_text="Keep what the assistant said as episodic memories (never as facts about the user).")
    receipt_retention_days = models.PositiveIntegerField(
        default=30,
        help_text="Keep the receipts of composed contexts (what memory each turn was given) this many days.")
    memory_ttl_days = models.JSONField(
        default=dict, blank=True, help_text='Per-kind TTL override, e.g. {"event": 180}.')
    memory_lifetime_from = models.CharField(
        max_length=8, choices=LifetimeFrom.choices, default=LifetimeFrom.LEARNED,
        help_text="What memory TTLs, decay and retention count from.")
    staff_users = models.ManyToManyField("auth.User", blank=True, related_name="tenants",
                                         help_text="Staff limited to these tenants in the admin (superusers see all).")

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.slug


class TenantApiKeyManager(BaseAPIKeyManager.from_queryset(TenantQuerySet)):
    def get_usable_keys(self):
        # A key is looked up by its prefix before anyone knows its tenant: the one read that must span tenants.
        # Every authenticated request reads the key's tenant, so it comes in the same query.
        return super().get_usable_keys().unscoped().select_related("tenant")


class TenantApiKey(AbstractAPIKey):
    objects = TenantApiKeyManager()

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")

    objects = TenantApiKeyManager()

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "Tenant API key"
        verbose_name_plural = "Tenant API keys"


class EndUser(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="end_users")
    external_id = models.CharField(max_length=255)
    display_name = models.CharField(max_length=255, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "external_id"], name="enduser_unique_external_id")]
        ordering = ["created_at", "id"]

    def __str__(self):
        """A short label for lists and pickers: the name people use, then the id the tenant knows them by."""
        ext = self.external_id if len(self.external_id) <= 24 else self.external_id[:23] + "…"
        return f"{self.display_name} ({ext})" if self.display_name else ext


class TenantErasure(models.Model):
    """The progress of erasing one tenant. It holds the tenant's id and slug, not a foreign key, so the record of
    the erasure outlives the tenant it erased."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant_id_value = models.UUIDField(db_index=True)
    slug = models.SlugField(max_length=80)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    users_total = models.PositiveIntegerField(default=0)
    users_done = models.PositiveIntegerField(default=0)
    requested_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"erasure of {self.slug} ({self.state})"
