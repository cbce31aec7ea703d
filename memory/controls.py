"""Controls over single memories (edit, delete, restore, approve, reject, expire) and a user's export.

Every change locks the row, checks the transition, writes a MemoryEvent naming the actor and records the vector
write in the outbox inside the same transaction, so admin edits and end-user edits reach Qdrant the same way.
"""
from __future__ import annotations

import hashlib
import re

from django.db import transaction

from infra import clock
from infra.errors import Conflict, NotFound, ValidationFailed
from tenants.models import EndUser, Tenant
from tenants.selectors import parse_uuid

from .models import MemoryEvent, MemoryRecord, MemoryStatus

Status = MemoryStatus
Action = MemoryEvent.Action
# As memory.services allows for a new memory.
MEMORY_TEXT_MAX_CHARS = 4000


def memory_snapshot(record: MemoryRecord) -> dict:
    """What history keeps of a record before and after a change (one shape, defined with the other writes)."""
    from .services import memory_snapshot as snapshot  # services imports this module: resolved at call time

    return snapshot(record)


def memory_history_write(*, record: MemoryRecord, action: str, actor_type: str, actor_id: str = "",
                         before: dict | None = None, after: dict | None = None, note: str = "") -> MemoryEvent:
    from .services import memory_event_record

    return memory_event_record(record=record, action=action, actor_type=actor_type, actor_id=actor_id,
                               before=before, after=after, note=note)


def vector_op_for(record: MemoryRecord) -> str:
    """A deleted record has no point; every other status keeps one whose payload mirrors the row."""
    return "delete" if record.status == Status.DELETED else "upsert"


def memory_vectors_enqueue(records: list[MemoryRecord]) -> None:
    """Record the vector writes these changed rows need; call inside the transaction that changed them."""
    from .outbox import outbox_enqueue

    by_op: dict[tuple[str, str], list[str]] = {}
    for r in records:
        by_op.setdefault((str(r.tenant_id), vector_op_for(r)), []).append(str(r.pk))
    for (tenant_id, op), ids in by_op.items():
        outbox_enqueue(tenant_id=tenant_id, memory_ids=ids, op=op)


def _locked(*, tenant: Tenant, memory_id=None, memory: MemoryRecord | None = None,
            user: EndUser | None = None) -> MemoryRecord:
    """The row, locked; one 404 for missing, another tenant's and (when user is given) another user's."""
    mid = memory.pk if memory is not None else parse_uuid(memory_id, what="memory")
    qs = MemoryRecord.objects.select_for_update().filter(tenant=tenant, pk=mid)
    if user is not None:
        qs = qs.filter(user=user)
    record = qs.first()
    if record is None:
        raise NotFound("Memory not found.")
    return record


def _refuse(record: MemoryRecord, verb: str) -> Conflict:
    return Conflict(f"A memory that is {record.status} cannot be {verb}.", code="invalid_transition",
                    details={"status": record.status})


def _transition(record: MemoryRecord, *, to: str, action: str, actor_type: str, actor_id: str, note: str = "",
                **changes) -> MemoryRecord:
    before = memory_snapshot(record)
    record.status = to
    record.status_changed_at = clock.now()
    for field, value in changes.items():
        setattr(record, field, value)
    record.save(update_fields=["status", "status_changed_at", "updated_at", *changes])
    memory_history_write(record=record, action=action, actor_type=actor_type, actor_id=actor_id, before=before,
                         after=memory_snapshot(record), note=note)
    memory_vectors_enqueue([record])
    return record


def _normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def content_hash_for(text: str) -> str:
    return hashlib.sha256(_normalized(text).encode()).hexdigest()


def memory_text_clean(text: str) -> str:
    """An edited text obeys what extraction obeys: not empty, not too long, and no secret is ever stored."""
    from .extraction.secrets import secrets_redact

    text = (text or "").strip()
    if not text:
        raise ValidationFailed("Text must not be empty.", details={"text": ["This field may not be blank."]})
    if len(text) > MEMORY_TEXT_MAX_CHARS:
        raise ValidationFailed(f"A memory's text is at most {MEMORY_TEXT_MAX_CHARS} characters.",
                               details={"text": ["Too long."]})
    redaction = secrets_redact(text)
    if redaction.found and not redaction.text.replace("[redacted]", " ").strip(" .,:;-"):
        raise ValidationFailed("This text is a secret (credential, token, card or account number) and is not "
                               "stored.", code="secret_refused")
    return redaction.text


def memory_update_text(*, tenant: Tenant, text: str, actor_type: str, actor_id: str = "", memory_id=None,
                       memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Replace a memory's text; the outbox re-embeds it. Unchanged text writes nothing."""
    text = memory_text_clean(text)
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status == Status.DELETED:
            raise _refuse(record, "edited")
        if record.text == text:
            return record
        before = memory_snapshot(record)
        record.text = text
        record.content_hash = content_hash_for(text)
        record.save(update_fields=["text", "content_hash", "updated_at"])
        memory_history_write(record=record, action=Action.UPDATED, actor_type=actor_type, actor_id=actor_id,
                             before=before, after=memory_snapshot(record), note="text edited")
        memory_vectors_enqueue([record])
    return record


def memory_delete(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Soft delete: the point goes at once, the row waits for the forget job. Deleting twice is a no-op."""
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status == Status.DELETED:
            return record
        return _transition(record, to=Status.DELETED, action=Action.DELETED, actor_type=actor_type,
                           actor_id=actor_id)


def memory_delete_all(*, tenant: Tenant, user: EndUser, actor_type: str, actor_id: str = "",
                      batch_size: int = 500) -> int:
    """Soft-delete every memory of the user; returns how many changed. Batched so no lock is held long."""
    changed = 0
    while True:
        with transaction.atomic():
            records = list(MemoryRecord.objects.select_for_update()
                           .filter(tenant=tenant, user=user).exclude(status=Status.DELETED)
                           .order_by("pk")[:batch_size])
            if not records:
                return changed
            now = clock.now()
            for record in records:
                before = memory_snapshot(record)
                record.status, record.status_changed_at = Status.DELETED, now
                record.save(update_fields=["status", "status_changed_at", "updated_at"])
                memory_history_write(record=record, action=Action.DELETED, actor_type=actor_type,
                                     actor_id=actor_id, before=before, after=memory_snapshot(record),
                                     note="all memories deleted")
            memory_vectors_enqueue(records)
            changed += len(records)


def _status_before_removal(record: MemoryRecord) -> str:
    """The status a memory had before it was deleted, rejected or expired (restore returns it there)."""
    event = (MemoryEvent.objects.filter(memory_uuid=record.pk, action__in=[Action.DELETED, Action.REJECTED,
                                                                           Action.EXPIRED])
             .order_by("-created_at", "-id").first())
    previous = (event.before or {}).get("status") if event else None
    return previous if previous in (Status.ACTIVE, Status.PENDING_REVIEW) else Status.ACTIVE


def memory_restore(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                   memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Bring back a deleted, rejected or expired memory (a past expiry is cleared, or it would expire again)."""
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status not in (Status.DELETED, Status.EXPIRED):
            raise _refuse(record, "restored")
        changes = {}
        if record.expires_at is not None and record.expires_at <= clock.now():
            changes["expires_at"] = None
        return _transition(record, to=_status_before_removal(record), action=Action.RESTORED,
                           actor_type=actor_type, actor_id=actor_id, **changes)


def _displaced_by(record: MemoryRecord) -> list[MemoryRecord]:
    """What a memory held for review replaces once approved: the active records it contradicts (same subject,
    another value) and the events it was consolidated from."""
    from django.db.models import Q

    cond = Q(pk__in=[str(i) for i in (record.metadata or {}).get("consolidated_from", [])])
    if record.subject:
        cond |= Q(subject=record.subject) & ~Q(value=record.value)
    return list(MemoryRecord.objects.select_for_update()
                .filter(cond, tenant_id=record.tenant_id, user_id=record.user_id, status=Status.ACTIVE)
                .exclude(pk=record.pk).order_by("pk"))


def memory_approve(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                   memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Make a memory held for review active; what it supersedes (it was held, so did not yet) goes now."""
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status != Status.PENDING_REVIEW:
            raise _refuse(record, "approved")
        _transition(record, to=Status.ACTIVE, action=Action.APPROVED, actor_type=actor_type, actor_id=actor_id)
        for old in _displaced_by(record):
            _transition(old, to=Status.SUPERSEDED, action=Action.SUPERSEDED, actor_type=actor_type,
                        actor_id=actor_id, note=f"superseded by approved {record.pk}", superseded_by=record)
        return record


def memory_reject(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status != Status.PENDING_REVIEW:
            raise _refuse(record, "rejected")
        return _transition(record, to=Status.DELETED, action=Action.REJECTED, actor_type=actor_type,
                           actor_id=actor_id)


def memory_expire(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None, note: str = "") -> MemoryRecord:
    """Expire now (or record that a past expires_at took effect). Expiring an expired memory is a no-op."""
    with transaction.atomic():
        record = _locked(tenant=tenant, memory_id=memory_id, memory=memory, user=user)
        if record.status == Status.EXPIRED:
            return record
        if record.status not in (Status.ACTIVE, Status.PENDING_REVIEW):
            raise _refuse(record, "expired")
        now = clock.now()
        expires_at = record.expires_at if record.expires_at and record.expires_at <= now else now
        return _transition(record, to=Status.EXPIRED, action=Action.EXPIRED, actor_type=actor_type,
                           actor_id=actor_id, note=note, expires_at=expires_at)


def _iso(value):
    return value.isoformat() if value else None


def memory_export(*, tenant: Tenant, user: EndUser) -> dict:
    """Everything stored about one end user, as JSON-ready data: memories with provenance and history,
    sessions with their transcript, bridges and links."""
    from sessions.models import BridgeSummary, Message, Session, SessionLink, SummaryAnchor

    sessions = list(Session.objects.filter(tenant=tenant, user=user).order_by("opened_at", "id"))
    session_ids = [s.pk for s in sessions]
    messages: dict = {}
    for m in Message.objects.filter(tenant=tenant, session_id__in=session_ids).order_by("session_id", "seq"):
        messages.setdefault(m.session_id, []).append({
            "id": str(m.pk), "seq": m.seq, "role": m.role, "content": m.content, "name": m.name,
            "external_id": m.external_id, "created_at": _iso(m.created_at)})
    anchors: dict = {}
    for a in SummaryAnchor.objects.filter(tenant=tenant, session_id__in=session_ids):
        anchors.setdefault(a.session_id, []).append({"first_seq": a.first_seq, "last_seq": a.last_seq,
                                                     "text": a.text, "method": a.method})
    bridges = {b.session_id: b for b in BridgeSummary.objects.filter(tenant=tenant, session_id__in=session_ids)}
    links: dict = {}
    for link in SessionLink.objects.filter(tenant=tenant, from_session_id__in=session_ids):
        links.setdefault(link.from_session_id, []).append({"to_session_id": str(link.to_session_id),
                                                          "kind": link.kind, "score": link.score})
    history: dict = {}
    records = list(MemoryRecord.objects.filter(tenant=tenant, user=user).order_by("created_at", "id"))
    for e in MemoryEvent.objects.filter(tenant=tenant, memory_uuid__in=[r.pk for r in records]).order_by(
            "created_at", "id"):
        history.setdefault(e.memory_uuid, []).append({
            "action": e.action, "actor_type": e.actor_type, "actor_id": e.actor_id, "before": e.before,
            "after": e.after, "note": e.note, "at": _iso(e.created_at)})
    message_ids = {r.source_message_id for r in records if r.source_message_id}
    sources = {m.pk: m for m in Message.objects.filter(tenant=tenant, pk__in=message_ids)}

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
            "created_at": _iso(r.created_at), "updated_at": _iso(r.updated_at), "expires_at": _iso(r.expires_at),
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
