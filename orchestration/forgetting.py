"""A memory the user deletes, or asks in words to forget, stays gone from everything derived from its words.

A memory's words live on in what was written from them: the message it came from (shown as a neighbouring or
recent turn), other memories of that message (the episode beside a fact, a session note), the session's bridge to
the next one and its summary anchors, and the open sessions' buffers. Forgetting finds the sentences the memory was
made of and takes them out of each: a row made mostly of them is deleted, any other text loses them.
"""
from __future__ import annotations

import logging

import redis
from django.db import transaction

from context.buffer import buffer_delete
from context.models import BridgeSummary, SummaryAnchor
from infra.sentences import sentences
from infra.support import SUPPORTED_SHARE, content_words, support_share
from infra.tokens import count_tokens
from memory.actions import memory_delete, memory_update_text
from memory.extraction.forget_requests import forget_requests, names_it
from memory.models import MemoryRecord, MemoryStatus
from sessions.models import Message, Session
from tenants.models import EndUser, Tenant

log = logging.getLogger(__name__)

FORGOTTEN = "[forgotten]"
_LIVE = (MemoryStatus.ACTIVE, MemoryStatus.PENDING_REVIEW, MemoryStatus.SUPERSEDED)


def memory_forget(*, tenant: Tenant, user: EndUser, memory_id, actor_type: str, actor_id: str = "") -> MemoryRecord:
    """Delete the memory (soft, as memory_delete) and take its words out of everything derived from them."""
    record = memory_delete(tenant=tenant, user=user, memory_id=memory_id, actor_type=actor_type, actor_id=actor_id)
    derived_scrub(tenant=tenant, user=user, records=[record], actor_type=actor_type, actor_id=actor_id)
    return record


def forget_requests_honour(*, tenant: Tenant, user: EndUser, message: Message) -> int:
    """The user's message asks to forget something ("please forget my favourite band"): every memory of theirs
    about it is forgotten, as if they had deleted each. Returns how many were; asking again changes nothing."""
    asked = forget_requests(message.content) if message.role == "user" else []
    if not asked:
        return 0
    who = user.display_name or ""
    found = [r for r in MemoryRecord.objects.for_tenant(tenant).filter(user=user, status__in=_LIVE)
             .exclude(source_message_id=message.pk)
             if any(names_it(what, r.text, who=who) or (r.subject and names_it(what, r.subject)) for what in asked)]
    for record in found:
        memory_delete(tenant=tenant, user=user, memory=record, actor_type="end_user", actor_id=user.external_id)
    derived_scrub(tenant=tenant, user=user, records=found, actor_type="end_user", actor_id=user.external_id)
    return len(found)


def source_ids(record: MemoryRecord) -> set[str]:
    """The messages a memory was drawn from."""
    ids = {str(i) for i in record.source_message_ids or []}
    return ids | {str(record.source_message_id)} if record.source_message_id else ids


def _words_of(record: MemoryRecord) -> list[str]:
    """The sentences a memory was made of: its own (its speaker's name off), and those of its source messages that
    it mostly repeats."""
    own = record.text.split(": ", 1)[1] if record.kind == "event" and ": " in record.text[:80] else record.text
    out = [s for s in sentences(own) if content_words(s)]
    for m in Message.objects.for_tenant(record.tenant_id).filter(pk__in=list(source_ids(record))):
        out += [s for s in sentences(m.content) if content_words(s) and support_share(s, [record.text]) >= 0.75
                and s not in out]
    return out


def _says(text: str, forgotten: list[str]) -> bool:
    """A text that mostly says what is forgotten (a bridge line, a note, an episode of one sentence)."""
    return bool(content_words(text)) and support_share(text, forgotten) >= SUPPORTED_SHARE \
        and support_share(" ".join(forgotten), [text]) >= SUPPORTED_SHARE / 2


def _without(text: str, forgotten: list[str]) -> str:
    kept = [s for s in sentences(text) if not _says(s, forgotten)]
    return " ".join(kept)


def derived_scrub(*, tenant: Tenant, user: EndUser, records: list[MemoryRecord], actor_type: str,
                  actor_id: str = "") -> None:
    forgotten = [s for r in records for s in _words_of(r)]
    if not forgotten:
        return
    gone = {r.pk for r in records}
    sessions = {r.session_id for r in records if r.session_id}
    messages = {mid for r in records for mid in source_ids(r)}
    # Other memories of those messages and sessions: the episode beside a fact, a passage, a session note.
    for other in MemoryRecord.objects.for_tenant(tenant).filter(user=user, status__in=_LIVE, session_id__in=sessions) \
            .exclude(pk__in=gone):
        if _says(other.text, forgotten):
            memory_delete(tenant=tenant, user=user, memory=other, actor_type=actor_type, actor_id=actor_id)
        elif any(_says(s, forgotten) for s in sentences(other.text)):
            memory_update_text(tenant=tenant, user=user, memory=other, text=_without(other.text, forgotten),
                               actor_type=actor_type, actor_id=actor_id)
    with transaction.atomic():
        for m in Message.objects.for_tenant(tenant).select_for_update().filter(pk__in=list(messages)):
            kept = [FORGOTTEN if _says(s, forgotten) else s for s in sentences(m.content)]
            content = " ".join(kept)
            if content != m.content:
                m.content, m.token_count = content, count_tokens(content)
                m.save(update_fields=["content", "token_count"])
        user_sessions = Session.objects.for_tenant(tenant).filter(user=user)
        for bridge in BridgeSummary.objects.for_tenant(tenant).select_for_update().filter(session__in=user_sessions):
            text, goal = _without(bridge.text, forgotten), _without(bridge.goal, forgotten)
            details = {k: (_without(v, forgotten) if isinstance(v, str) else
                           [x for x in v if not (isinstance(x, str) and _says(x, forgotten))] if isinstance(v, list)
                           else v) for k, v in (bridge.details or {}).items()}
            if (text, goal, details) != (bridge.text, bridge.goal, bridge.details):
                bridge.text, bridge.goal, bridge.details = text, goal, details
                bridge.token_count = count_tokens(text)
                bridge.save(update_fields=["text", "goal", "details", "token_count"])
        for anchor in SummaryAnchor.objects.for_tenant(tenant).select_for_update().filter(session__in=user_sessions):
            text = _without(anchor.text, forgotten)
            if text != anchor.text:
                anchor.text, anchor.token_count = text, count_tokens(text)
                anchor.save(update_fields=["text", "token_count"])
    # Open sessions' buffers hold the turns and facts as they were: dropped, they are rebuilt from the database.
    for sid in user_sessions.filter(state=Session.State.OPEN).values_list("pk", flat=True):
        try:
            buffer_delete(tenant_id=tenant.pk, user_id=user.pk, session_id=sid)
        except redis.exceptions.RedisError:
            log.warning("forget: the buffer of session %s could not be dropped; it expires on its own", sid)
