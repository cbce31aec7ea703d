"""The portable memory format (docs/memory-format.md): one end user's memories as versioned JSON Lines, with their
history, validity and provenance (source messages with their external ids, sessions with their dates), and the
embedder that made the vectors. Importing a file into any tenant of any deployment recreates the sessions and
source messages the memories cite, writes the memories with their history, and embeds them again here.

Importing is idempotent: sessions and messages are found again by their external ids, memories by ids derived
from the tenant, the user and the exported id. A file of a newer format version is refused whole (400), as is a
file with any malformed line: nothing is written unless every line reads.
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction

from infra import clock
from infra.embedder import get_embedder
from infra.errors import ValidationFailed
from memory.actions import memories_import
from memory.models import MemoryEvent, MemoryRecord, MemoryStatus
from memory.portable import ImportedMemory, memory_import_check
from sessions.models import Message, Session
from sessions.services import NewMessage, message_rows_mark_extracted
from tenants.models import EndUser, Tenant

from .messages import messages_append
from .sessions import session_close, session_open_imported

FORMAT = "continuum.memories"
FORMAT_VERSION = 1
IMPORT_CLOSE_REASON = "memory_import"
_NAMESPACE = uuid.UUID("6f1c1d0e-3b7a-5c44-9a51-2f7d0c8e4b19")


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def _line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# --- export --------------------------------------------------------------------------------------------------------

def memories_export_lines(*, tenant: Tenant, user: EndUser) -> Iterator[str]:
    """The user's memories in the portable format, one JSON document per line (no newline at their ends)."""
    records = list(MemoryRecord.objects.for_tenant(tenant).filter(user=user).exclude(status=MemoryStatus.DELETED)
                   .order_by("created_at", "id"))
    history: dict = {}
    for e in MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid__in=[r.pk for r in records]).order_by(
            "created_at", "id"):
        history.setdefault(e.memory_uuid, []).append({
            "action": e.action, "actor_type": e.actor_type, "actor_id": e.actor_id, "before": e.before,
            "after": e.after, "note": e.note, "at": _iso(e.created_at)})
    cited = {str(i) for r in records for i in (r.source_message_ids or [])}
    cited |= {str(r.source_message_id) for r in records if r.source_message_id}
    messages = {str(m.pk): m for m in Message.objects.for_tenant(tenant).filter(pk__in=cited, session__user=user)}
    # Every session of the user, so a memory's "session 3" stays session 3 wherever it is imported.
    sessions = list(Session.objects.for_tenant(tenant).filter(user=user).order_by("opened_at", "id"))

    yield _line({"type": "header", "format": FORMAT, "version": FORMAT_VERSION, "exported_at": _iso(clock.now()),
                 "embedder": getattr(get_embedder(), "model_name", ""),
                 "user": {"external_id": user.external_id, "display_name": user.display_name}})
    for s in sessions:
        yield _line({"type": "session", "ref": str(s.pk), "external_id": s.external_id, "title": s.title,
                     "goal": s.goal, "opened_at": _iso(s.opened_at), "closed_at": _iso(s.closed_at)})
    for m in sorted(messages.values(), key=lambda m: (m.created_at, m.seq)):
        yield _line({"type": "message", "ref": str(m.pk), "session_ref": str(m.session_id),
                     "external_id": m.external_id, "role": m.role, "name": m.name, "content": m.content,
                     "created_at": _iso(m.created_at)})
    for r in records:
        sources = [str(i) for i in (r.source_message_ids or [])]
        yield _line({
            "type": "memory", "ref": str(r.pk), "kind": r.kind, "text": r.text, "subject": r.subject,
            "value": r.value, "status": r.status, "source_type": r.source_type, "confidence": r.confidence,
            "importance": r.importance, "created_at": _iso(r.created_at), "valid_from": _iso(r.valid_from),
            "valid_to": _iso(r.valid_to), "expires_at": _iso(r.expires_at),
            "superseded_by_ref": str(r.superseded_by_id) if r.superseded_by_id else None,
            "session_ref": str(r.session_id) if r.session_id else None,
            "source_message_ref": str(r.source_message_id) if r.source_message_id else None,
            "source_message_refs": sources,
            "source_message_external_ids": [messages[i].external_id for i in sources if i in messages],
            "access_count": r.access_count, "last_accessed_at": _iso(r.last_accessed_at),
            "reinforcement_count": r.reinforcement_count, "extractor": r.extractor,
            "extractor_version": r.extractor_version, "metadata": r.metadata, "history": history.get(r.pk, [])})


# --- reading a file ------------------------------------------------------------------------------------------------

@dataclass
class PortableFile:
    header: dict
    sessions: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    memories: list[dict] = field(default_factory=list)


_REQUIRED = {"session": ("ref", "opened_at"), "message": ("ref", "session_ref", "role", "content", "created_at"),
             "memory": ("ref", "kind", "text", "status", "source_type", "created_at")}


# The type every field that has a value must have (booleans are not numbers here).
_STR = (str,)
_TYPES = {**{k: _STR for k in ("ref", "session_ref", "role", "content", "created_at", "opened_at", "closed_at",
                               "kind", "text", "status", "source_type", "subject", "value", "valid_from", "valid_to",
                               "expires_at", "superseded_by_ref", "source_message_ref", "title", "goal", "name",
                               "external_id", "last_accessed_at", "extractor", "extractor_version")},
          "confidence": (int, float), "importance": (int, float), "access_count": (int,),
          "reinforcement_count": (int,), "metadata": (dict,), "history": (list,), "source_message_refs": (list,)}


def _when(value, where: str) -> datetime | None:
    if value in (None, ""):
        return None
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ValidationFailed(f"{where}: {value!r} is not an ISO 8601 date-time.", code="invalid_export")
    if parsed.tzinfo is None:
        raise ValidationFailed(f"{where}: {value!r} has no time zone.", code="invalid_export")
    return parsed


def portable_read(lines: Iterable[str | bytes]) -> PortableFile:
    """Every line parsed and checked before anything is written; the first problem is a 400 naming its line."""
    found: PortableFile | None = None
    for number, raw in enumerate(lines, 1):
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError:
            raise ValidationFailed(f"Line {number} is not UTF-8.", code="invalid_export")
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise ValidationFailed(f"Line {number} is not JSON: {exc}.", code="invalid_export")
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise ValidationFailed(f"Line {number} is not an object with a type.", code="invalid_export")
        if found is None:
            found = PortableFile(header=_header_check(obj, number))
            continue
        kind = obj["type"]
        if kind not in _REQUIRED:
            raise ValidationFailed(f"Line {number}: unknown type {kind!r}.", code="invalid_export")
        missing = [k for k in _REQUIRED[kind] if obj.get(k) in (None, "")]
        if missing:
            raise ValidationFailed(f"Line {number} ({kind}) lacks {', '.join(missing)}.", code="invalid_export")
        wrong = [k for k, types in _TYPES.items() if k in obj and obj[k] is not None and not isinstance(obj[k], types)]
        if wrong:
            raise ValidationFailed(f"Line {number} ({kind}): {', '.join(wrong)} of the wrong type.",
                                   code="invalid_export")
        if kind == "message" and obj["role"] not in Message.Role.values:
            raise ValidationFailed(f"Line {number}: unknown role {obj['role']!r}.", code="invalid_export")
        {"session": found.sessions, "message": found.messages, "memory": found.memories}[kind].append(
            {**obj, "_line": number})
    if found is None:
        raise ValidationFailed("The file is empty: a portable export starts with its header line.",
                               code="invalid_export")
    return found


def _header_check(obj: dict, number: int) -> dict:
    if obj.get("type") != "header" or obj.get("format") != FORMAT:
        raise ValidationFailed(f"Line {number} is not a {FORMAT} header: the file is not a portable memory export.",
                               code="invalid_export")
    version = obj.get("version")
    if not isinstance(version, int) or version < 1:
        raise ValidationFailed("The header's version must be a positive integer.", code="invalid_export")
    if version > FORMAT_VERSION:
        raise ValidationFailed(f"This export is format version {version}; this deployment reads versions up to "
                               f"{FORMAT_VERSION}. Upgrade it, or export again from a deployment that writes "
                               f"version {FORMAT_VERSION}.", code="unsupported_format_version",
                               details={"version": version, "supported": FORMAT_VERSION})
    user = obj.get("user") or {}
    if not isinstance(user, dict) or not str(user.get("external_id") or "").strip():
        raise ValidationFailed("The header names no user external_id.", code="invalid_export")
    return obj


# --- import --------------------------------------------------------------------------------------------------------

def _derived(tenant: Tenant, user_external_id: str, ref: str) -> uuid.UUID:
    return uuid.uuid5(_NAMESPACE, f"{tenant.pk}/{user_external_id}/{ref}")


def _user_for(*, tenant: Tenant, external_id: str, display_name: str) -> EndUser:
    user = EndUser.objects.for_tenant(tenant).filter(external_id=external_id).first()
    if user is None:
        from tenants.services import end_user_create

        user = end_user_create(tenant=tenant, external_id=external_id, display_name=display_name)
    return user


def _sessions_write(*, tenant: Tenant, user: EndUser, data: PortableFile) -> tuple[dict, dict, int, int]:
    """The exported sessions and source messages, found again or created (closed): ({session ref: id},
    {message ref: Message}, sessions created, messages created)."""
    by_session: dict[str, list[dict]] = {}
    for m in data.messages:
        by_session.setdefault(m["session_ref"], []).append(m)
    session_ids, messages, made_sessions, made_messages = {}, {}, 0, 0
    for s in sorted(data.sessions, key=lambda s: s["opened_at"]):
        ref = str(s["ref"])
        external = str(s.get("external_id") or f"continuum:{ref}")[:255]
        opened = _when(s["opened_at"], f"line {s['_line']}")
        closed = _when(s.get("closed_at"), f"line {s['_line']}") or opened
        wanted = sorted(by_session.get(ref, []), key=lambda m: m["created_at"])
        session = Session.objects.for_tenant(tenant).filter(user=user, external_id=external).first()
        if session is None:
            session = session_open_imported(tenant=tenant, user=user, opened_at=opened, external_id=external,
                                            title=str(s.get("title") or "")[:200])
            made_sessions += 1
        stored = {m.external_id: m for m in Message.objects.for_tenant(tenant).filter(session=session)}
        new = [m for m in wanted if str(m.get("external_id") or f"continuum:{m['ref']}") not in stored]
        if new and session.state == Session.State.OPEN:
            rows = []
            for i in range(0, len(new), settings.CONTINUUM_MAX_BATCH):
                rows += messages_append(tenant=tenant, session_id=session.pk, enqueue_extraction=False, live=False,
                                        items=[NewMessage(role=m["role"], content=m["content"],
                                                          name=str(m.get("name") or "")[:128],
                                                          external_id=str(m.get("external_id")
                                                                          or f"continuum:{m['ref']}")[:255],
                                                          created_at=_when(m["created_at"], f"line {m['_line']}"))
                                               for m in new[i:i + settings.CONTINUUM_MAX_BATCH]])
            # Their memories come with the file: extraction must not draw them a second time.
            message_rows_mark_extracted(tenant=tenant, message_ids=[r.pk for r in rows])
            stored.update({r.external_id: r for r in rows})
            made_messages += len(rows)
        if session.state == Session.State.OPEN:
            session_close(tenant=tenant, session_id=session.pk, reason=IMPORT_CLOSE_REASON,
                          closed_at=max([closed, *(r.created_at for r in stored.values())]), finish=False)
        session_ids[ref] = session.pk
        for m in wanted:
            row = stored.get(str(m.get("external_id") or f"continuum:{m['ref']}"))
            if row is not None:
                messages[str(m["ref"])] = row
    return session_ids, messages, made_sessions, made_messages


def memories_import_file(*, tenant: Tenant, lines: Iterable[str | bytes], external_id: str | None = None) -> dict:
    """Import a portable export into this tenant, for the user it names (or `external_id`), created if new."""
    data = portable_read(lines)
    user_info = data.header["user"]
    ext = (external_id or str(user_info["external_id"])).strip()[:255]
    refs = {str(m["ref"]) for m in data.memories}
    items, refused = [], []
    for m in data.memories:
        where = f"line {m['_line']}"
        item = ImportedMemory(
            id=_derived(tenant, ext, str(m["ref"])), kind=m["kind"], text=str(m["text"]), status=m["status"],
            source_type=m["source_type"], created_at=_when(m["created_at"], where), subject=str(m.get("subject") or ""),
            value=str(m.get("value") or ""), confidence=float(m.get("confidence", 0.8)),
            importance=float(m.get("importance", 0.5)), valid_from=_when(m.get("valid_from"), where),
            valid_to=_when(m.get("valid_to"), where), expires_at=_when(m.get("expires_at"), where),
            superseded_by=(_derived(tenant, ext, str(m["superseded_by_ref"]))
                           if m.get("superseded_by_ref") and str(m["superseded_by_ref"]) in refs else None),
            access_count=int(m.get("access_count") or 0), last_accessed_at=_when(m.get("last_accessed_at"), where),
            reinforcement_count=int(m.get("reinforcement_count") or 0), extractor=str(m.get("extractor") or "import"),
            extractor_version=str(m.get("extractor_version") or "1"), metadata=m.get("metadata") or {},
            history=[{**e, "at": _when(e.get("at"), where) or clock.now()} for e in (m.get("history") or [])
                     if isinstance(e, dict)])
        problem = memory_import_check(item)
        if problem:
            refused.append({"line": m["_line"], "reason": problem})
            continue
        items.append((m, item))
    with transaction.atomic():
        user = _user_for(tenant=tenant, external_id=ext, display_name=str(user_info.get("display_name") or ""))
        sessions, messages, made_sessions, made_messages = _sessions_write(tenant=tenant, user=user, data=data)
        for m, item in items:
            item.session_id = sessions.get(str(m.get("session_ref")))
            source = messages.get(str(m.get("source_message_ref")))
            item.source_message_id = source.pk if source is not None else None
            item.source_message_ids = [str(messages[str(r)].pk) for r in (m.get("source_message_refs") or [])
                                       if str(r) in messages]
        written = memories_import(tenant=tenant, user=user, items=[item for _, item in items])
    return {"user_id": str(user.pk), "external_id": ext, "format_version": data.header["version"],
            "embedder_exported": data.header.get("embedder") or "",
            "embedder_here": getattr(get_embedder(), "model_name", ""), "sessions_created": made_sessions,
            "messages_created": made_messages, "memories_created": written["created"],
            "memories_skipped": written["skipped"], "history_events": written["events"], "refused": refused}
