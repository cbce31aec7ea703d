"""Everything stored about one end user as one JSON document: memories with provenance and history (memory),
sessions with their transcripts, anchors, bridges and links (conversations)."""
from __future__ import annotations

from context.models import BridgeSummary, SessionLink, SummaryAnchor
from infra import clock
from memory.models import MemoryEvent, MemoryRecord
from sessions.models import Message, Session
from tenants.models import EndUser, Tenant


def _iso(value):
    return value.isoformat() if value else None


def memory_export(*, tenant: Tenant, user: EndUser) -> dict:
    """Everything stored about one end user, as JSON-ready data: memories with provenance and history,
    sessions with their transcript, bridges and links."""
    sessions = list(Session.objects.for_tenant(tenant).filter(user=user).order_by("opened_at", "id"))
    session_ids = [s.pk for s in sessions]
    messages: dict = {}
    for m in Message.objects.for_tenant(tenant).filter(session_id__in=session_ids).order_by("session_id", "seq"):
        messages.setdefault(m.session_id, []).append({
            "id": str(m.pk), "seq": m.seq, "role": m.role, "content": m.content, "name": m.name,
            "external_id": m.external_id, "created_at": _iso(m.created_at)})
    anchors: dict = {}
    for a in SummaryAnchor.objects.for_tenant(tenant).filter(session_id__in=session_ids):
        anchors.setdefault(a.session_id, []).append({"first_seq": a.first_seq, "last_seq": a.last_seq,
                                                     "text": a.text, "method": a.method})
    bridges = {b.session_id: b for b in BridgeSummary.objects.for_tenant(tenant).filter(session_id__in=session_ids)}
    links: dict = {}
    for link in SessionLink.objects.for_tenant(tenant).filter(from_session_id__in=session_ids):
        links.setdefault(link.from_session_id, []).append({"to_session_id": str(link.to_session_id),
                                                          "kind": link.kind, "score": link.score})
    history: dict = {}
    records = list(MemoryRecord.objects.for_tenant(tenant).filter(user=user).order_by("created_at", "id"))
    for e in MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid__in=[r.pk for r in records]).order_by(
            "created_at", "id"):
        history.setdefault(e.memory_uuid, []).append({
            "action": e.action, "actor_type": e.actor_type, "actor_id": e.actor_id, "before": e.before,
            "after": e.after, "note": e.note, "at": _iso(e.created_at)})
    message_ids = {r.source_message_id for r in records if r.source_message_id}
    sources = {m.pk: m for m in Message.objects.for_tenant(tenant).filter(pk__in=message_ids)}

    def provenance(r: MemoryRecord) -> dict:
        src = sources.get(r.source_message_id)
        return {
            "source_type": r.source_type,
            "session_id": str(r.session_id) if r.session_id else None,
            "source_message_id": str(r.source_message_id) if r.source_message_id else None,
            "source_message_ids": r.source_message_ids,
            "source_message": ({"role": src.role, "content": src.content, "created_at": _iso(src.created_at),
                                "external_id": src.external_id} if src else None),
            "extractor": r.extractor, "extractor_version": r.extractor_version,
        }

    return {
        "user": {"id": str(user.pk), "external_id": user.external_id, "display_name": user.display_name,
                 "metadata": user.metadata, "created_at": _iso(user.created_at)},
        "exported_at": _iso(clock.now()),
        "memories": [{
            "id": str(r.pk), "kind": r.kind, "text": r.text, "subject": r.subject, "value": r.value,
            "status": r.status, "confidence": r.confidence, "importance": r.importance,
            "created_at": _iso(r.created_at), "learned_at": _iso(r.learned_at), "updated_at": _iso(r.updated_at),
            "expires_at": _iso(r.expires_at),
            "last_accessed_at": _iso(r.last_accessed_at), "access_count": r.access_count,
            "superseded_by": str(r.superseded_by_id) if r.superseded_by_id else None,
            "provenance": provenance(r), "history": history.get(r.pk, []),
        } for r in records],
        "sessions": [{
            "id": str(s.pk), "title": s.title, "state": s.state, "external_id": s.external_id, "goal": s.goal,
            "opened_at": _iso(s.opened_at), "closed_at": _iso(s.closed_at),
            "previous_id": str(s.previous_id) if s.previous_id else None,
            "messages": messages.get(s.pk, []), "anchors": anchors.get(s.pk, []), "links": links.get(s.pk, []),
        } for s in sessions],
        "bridges": [{"session_id": str(sid), "text": b.text, "goal": b.goal, "method": b.method,
                     "created_at": _iso(b.created_at)} for sid, b in bridges.items()],
    }
