"""What a user's context keeps of words they took back (a deleted memory, a request to forget): their sessions'
bridges, summary anchors and working state (goal stack, tool ledger, notes) are rewritten without them, and the open
sessions' buffers are dropped, to be rebuilt from the rewritten rows. Orchestration decides what is forgotten."""
from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from infra.tokens import count_tokens
from sessions.models import Session
from tenants.models import EndUser, Tenant

from .buffer import buffer_working_rewrite
from .models import BridgeSummary, SummaryAnchor


def _details_rewritten(details: dict, rewrite: Callable[[str], str]) -> dict:
    out = {}
    for k, v in (details or {}).items():
        if isinstance(v, str):
            v = rewrite(v).strip()
        elif isinstance(v, list):
            v = [x for x in ((rewrite(x).strip() if isinstance(x, str) else x) for x in v) if x != ""]
        out[k] = v
    return out


def context_text_rewrite(*, tenant: Tenant, user: EndUser, rewrite: Callable[[str], str]) -> dict:
    """Rewrite every text the context keeps of the user's sessions; returns how many rows of each kind changed."""
    counts = {"bridges": 0, "anchors": 0}
    sessions = Session.objects.for_tenant(tenant).filter(user=user)
    with transaction.atomic():
        for bridge in BridgeSummary.objects.for_tenant(tenant).select_for_update().filter(session__in=sessions):
            text, goal = rewrite(bridge.text).strip(), rewrite(bridge.goal).strip()
            details = _details_rewritten(bridge.details, rewrite)
            if (text, goal, details) != (bridge.text, bridge.goal, bridge.details):
                # The goal's embedding was made of the old words too; links embed the new goal when they need it.
                bridge.text, bridge.goal, bridge.details, bridge.goal_embedding = text, goal, details, None
                bridge.token_count = count_tokens(text)
                bridge.save(update_fields=["text", "goal", "details", "goal_embedding", "token_count"])
                counts["bridges"] += 1
        for anchor in SummaryAnchor.objects.for_tenant(tenant).select_for_update().filter(session__in=sessions):
            text = rewrite(anchor.text).strip()
            if text != anchor.text:
                anchor.text, anchor.token_count = text, count_tokens(text)
                anchor.save(update_fields=["text", "token_count"])
                counts["anchors"] += 1
    counts["sessions"] = buffer_working_rewrite(tenant_id=tenant.pk, user_id=user.pk, rewrite=rewrite)
    return counts
