"""What context writes about a session: summary anchors of its older turns, the bridge a closed session hands to the
user's next one, and links between sessions. The rows sit beside the code that writes them (anchors.py, bridge.py,
links.py); sessions/ owns the sessions and messages they point at."""
from __future__ import annotations

from django.db import models

from tenants.scoping import TenantManager


class SummaryAnchor(models.Model):
    """Older turns of a session folded into a summary ("turns 1–12: …")."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE)
    session = models.ForeignKey("chat_sessions.Session", on_delete=models.CASCADE, related_name="anchors")
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
    session = models.OneToOneField("chat_sessions.Session", on_delete=models.CASCADE, related_name="bridge")
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
    from_session = models.ForeignKey("chat_sessions.Session", on_delete=models.CASCADE, related_name="links_out")
    to_session = models.ForeignKey("chat_sessions.Session", on_delete=models.CASCADE, related_name="links_in")
    kind = models.CharField(max_length=24, choices=Kind.choices)
    score = models.FloatField(default=1.0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["from_session", "to_session", "kind"], name="link_unique")]

    def __str__(self):
        return f"{self.get_kind_display()} link"
