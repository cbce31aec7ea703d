"""Memory records (the truth), their change history, the vector outbox and lifecycle job runs."""
from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from infra.labels import label_cut
from tenants.scoping import TenantManager


class MemoryKind(models.TextChoices):
    PREFERENCE = "preference", "Preference"
    FACT = "fact", "Fact"
    GOAL = "goal", "Goal"
    EVENT = "event", "Event"
    PROCEDURE = "procedure", "Procedure"
    # A line of a closed session's note (topics, decisions, facts, open items), citing the turns it comes from.
    NOTE = "note", "Session note"


# A note line's `metadata.note` when it is the session's topics line (its other labels: decision, fact, open); the
# note's writer sets it and retrieval leaves such lines out (memory/retrieval/reads.py).
NOTE_TOPIC_LABEL = "topic"


class SourceType(models.TextChoices):
    USER_STATED = "user_stated", "Stated by the user"
    TOOL_RESULT = "tool_result", "Tool result"
    INFERRED = "inferred", "Inferred"
    SYSTEM = "system", "System"
    # Episodic only: what the assistant said, kept so the user can ask about it; never a fact about the user.
    ASSISTANT = "assistant", "Said by the assistant"


class MemoryStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    PENDING_REVIEW = "pending_review", "Pending review"
    SUPERSEDED = "superseded", "Superseded"
    EXPIRED = "expired", "Expired"
    DELETED = "deleted", "Deleted"


class MemoryRecord(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="memories")
    user = models.ForeignKey("tenants.EndUser", on_delete=models.CASCADE, related_name="memories")
    kind = models.CharField(max_length=12, choices=MemoryKind.choices)
    text = models.TextField()
    # For contradiction detection: "destination" → "Newark". Empty for episodic events.
    subject = models.CharField(max_length=200, blank=True, default="", db_index=True)
    value = models.TextField(blank=True, default="")
    confidence = models.FloatField(default=0.8)
    importance = models.FloatField(default=0.5)
    source_type = models.CharField(max_length=12, choices=SourceType.choices, default=SourceType.USER_STATED)
    source_message = models.ForeignKey("chat_sessions.Message", null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="memories")
    source_message_ids = models.JSONField(default=list, blank=True)
    session = models.ForeignKey("chat_sessions.Session", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="memories")
    # When it was said (its source message's time): provenance, recency and "as of" read it.
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # When Continuum learned it (stored it): TTL, decay and retention count from here unless the tenant counts
    # from created_at, so history imported today is not old on arrival.
    learned_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_accessed_at = models.DateTimeField(null=True, blank=True)
    access_count = models.PositiveIntegerField(default=0)
    reinforcement_count = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=MemoryStatus.choices, default=MemoryStatus.ACTIVE, db_index=True)
    status_changed_at = models.DateTimeField(default=timezone.now)
    superseded_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="supersedes")
    # When it held: from when it was said (its source message's time) until what superseded it was said. Retrieval
    # `as_of` a time returns the memories valid then, superseded ones included.
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    extractor = models.CharField(max_length=40, default="rules")
    extractor_version = models.CharField(max_length=20, default="1")
    content_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)
    metadata = models.JSONField(default=dict, blank=True)

    objects = TenantManager()

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [models.Index(fields=["tenant", "user", "status", "kind"])]

    def __str__(self):
        return f"{self.kind}: {label_cut(self.text, 60)}"  # a page's title: cut at a word edge, with an ellipsis

    REJECTED_WORDS = "rejected"

    @property
    def status_words(self) -> str:
        """The status as a reviewer reads it: a deleted memory whose removal was a review's rejection reads
        "rejected" (a rejection sets the status a deletion does). Known where the query annotated `removed_by`
        (memory.overview.with_removal); otherwise the status as stored."""
        if self.status == MemoryStatus.DELETED and getattr(self, "removed_by", None) == MemoryEvent.Action.REJECTED:
            return self.REJECTED_WORDS
        return self.status


class MemoryEvent(models.Model):
    """History of a memory: every change, who made it, before and after. Survives a hard delete."""

    class Action(models.TextChoices):
        CREATED = "created"
        REINFORCED = "reinforced"
        UPDATED = "updated"
        SUPERSEDED = "superseded"
        EXPIRED = "expired"
        DELETED = "deleted"
        RESTORED = "restored"
        APPROVED = "approved"
        REJECTED = "rejected"
        FORGOTTEN = "forgotten"  # hard delete: the tombstone
        DECAYED = "decayed"  # effective importance recomputed by the decay job

    class Actor(models.TextChoices):
        SYSTEM = "system"
        STAFF = "staff"
        END_USER = "end_user"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE)
    user = models.ForeignKey("tenants.EndUser", on_delete=models.CASCADE, null=True, blank=True)
    memory = models.ForeignKey(MemoryRecord, null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    memory_uuid = models.UUIDField(db_index=True)
    action = models.CharField(max_length=12, choices=Action.choices)
    actor_type = models.CharField(max_length=10, choices=Actor.choices, default=Actor.SYSTEM)
    actor_id = models.CharField(max_length=255, blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    note = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantManager()

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self):
        what = self.memory.text if self.memory_id is not None and self.memory else str(self.memory_uuid)[:8]
        what = label_cut(what, 60)
        return f"{self.action} · {what} · {self.created_at:%Y-%m-%d %H:%M}"


class VectorOutbox(models.Model):
    """Pending vector writes: recorded in the same transaction as the row, applied to Qdrant after commit."""

    class Op(models.TextChoices):
        UPSERT = "upsert"  # embed the text and write the whole point
        PAYLOAD = "payload"  # the text is unchanged: set the point's payload from the row
        DELETE = "delete"

    tenant_id_value = models.UUIDField(db_index=True)
    memory_uuid = models.UUIDField(db_index=True)
    op = models.CharField(max_length=8, choices=Op.choices)
    created_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    done_at = models.DateTimeField(null=True, blank=True, db_index=True)

    # The outbox names its tenant by id: a row may outlive its tenant's deletion until it is applied.
    tenant_field = "tenant_id_value"
    objects = TenantManager()

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "vector outbox"  # not "vector outboxs"


class JobRun(models.Model):
    """One run of a lifecycle job for one tenant, with what it did."""

    job = models.CharField(max_length=40, db_index=True)
    tenant = models.ForeignKey("tenants.Tenant", null=True, blank=True, on_delete=models.CASCADE)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=12, default="running")
    stats = models.JSONField(default=dict, blank=True)

    objects = TenantManager()

    class Meta:
        ordering = ["-started_at"]


class MemoryReview(MemoryRecord):
    """The review queue: the same rows as MemoryRecord, listed apart for the reviewer (the admin shows those held
    for review). A proxy: no table of its own."""

    class Meta:
        proxy = True
        verbose_name = "memory awaiting review"
        verbose_name_plural = "memories awaiting review"
