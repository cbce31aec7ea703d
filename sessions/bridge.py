"""Bridge summaries written when a session closes (filled in by the sessions work)."""
from __future__ import annotations

from django.db import IntegrityError, transaction

from .models import BridgeSummary, Session


def bridge_write(*, session_id) -> BridgeSummary | None:
    session = Session.objects.filter(pk=session_id).first()
    if session is None or session.state != Session.State.CLOSED:
        return None
    existing = BridgeSummary.objects.filter(session=session).first()
    if existing:
        return existing
    users = list(session.messages.filter(role="user").order_by("seq").values_list("content", flat=True))
    text = " ".join(users[:3])[:600] or "No user messages."
    try:
        with transaction.atomic():
            return BridgeSummary.objects.create(tenant_id=session.tenant_id, session=session, text=text)
    except IntegrityError:
        return BridgeSummary.objects.get(session=session)
