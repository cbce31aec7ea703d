"""Reads of context's rows, scoped by tenant first."""
from __future__ import annotations

from tenants.models import Tenant

from .models import BridgeSummary


def bridge_summaries(*, tenant: Tenant, session_ids) -> dict:
    """The bridge summaries of these sessions that have one, by session id."""
    return {b.session_id: b for b in BridgeSummary.objects.for_tenant(tenant).filter(session_id__in=list(session_ids))}
