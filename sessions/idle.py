"""Closing idle sessions: each tenant's idle_timeout_minutes decides when an open session has gone quiet."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from infra import clock
from tenants.models import Tenant

from .models import Session

log = logging.getLogger(__name__)


def sessions_close_idle(*, now: datetime | None = None, limit: int | None = None) -> dict:
    """Close up to `limit` sessions idle past their tenant's timeout. Returns {"closed": n, "more": bool}.

    Each close re-checks the session under its row lock (the same lock an append takes), so a message that
    arrives meanwhile keeps the session open; a session already closed is skipped. Safe to run twice.
    """
    from .services import _close_locked

    now = now or clock.now()
    limit = settings.CONTINUUM_IDLE_CLOSE_BATCH if limit is None else limit
    closed = 0
    tenants = (Tenant.objects.filter(sessions__state=Session.State.OPEN).distinct()
               .values_list("id", "idle_timeout_minutes"))
    for tenant_id, minutes in tenants:
        if closed >= limit:
            return {"closed": closed, "more": True}
        cutoff = now - timedelta(minutes=minutes)
        ids = list(Session.objects.filter(tenant_id=tenant_id, state=Session.State.OPEN, last_activity_at__lt=cutoff)
                   .order_by("last_activity_at").values_list("id", flat=True)[: limit - closed + 1])
        for sid in ids:
            if closed >= limit:
                return {"closed": closed, "more": True}
            with transaction.atomic():
                session = (Session.objects.select_for_update().select_related("tenant")
                           .filter(pk=sid, state=Session.State.OPEN, last_activity_at__lt=cutoff).first())
                if session is not None and _close_locked(tenant=session.tenant, session=session, reason="idle",
                                                         closed_at=now):
                    closed += 1
    return {"closed": closed, "more": False}
