"""A memory the user deletes, or asks in words to forget, stays gone from everything derived from its words.

A memory's words live on in what was written from them: the message it came from and the turns of its session that
repeat them (shown as neighbouring or recent turns), other memories of that session (the episode beside a fact, a
session note), and the user's bridges, summary anchors and sessions' goal stacks, ledgers and notes, from which the
open buffers and every later bridge are written. Forgetting takes out the statements the memory was made of from each
of them, a statement at a time (infra/clauses.py): "my favourite colour is green and my favourite food is sushi" loses
the colour and keeps the food. In a message the forgotten statement leaves "[forgotten]" in its place, so the
transcript shows that something was taken back; elsewhere it just goes, and a row left with nothing goes with it. A
request to forget is the user's own message and the trace of what they asked: it is never taken out itself.

Each store is written by its owner: memories by memory.actions, messages by sessions.services, bridges, anchors and
the working state by context.forgetting; this module decides what is forgotten.
"""
from __future__ import annotations

import logging

from context.forgetting import context_text_rewrite
from infra.clauses import statements, statements_rewrite
from infra.support import SUPPORTED_SHARE, content_words, support_share
from memory.actions import memory_delete, memory_text_forget
from memory.extraction.forget_requests import asks_to_forget, forget_requests, names_it
from memory.models import MemoryRecord, MemoryStatus
from sessions.models import Message
from sessions.services import message_rows_rewrite
from tenants.models import EndUser, Tenant

log = logging.getLogger(__name__)

FORGOTTEN = "[forgotten]"
_LIVE = (MemoryStatus.ACTIVE, MemoryStatus.PENDING_REVIEW, MemoryStatus.SUPERSEDED)


def memory_forget(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Delete the memory (soft, as memory_delete: staff can restore the record) and take its words out of everything
    derived from them, which no restore brings back."""
    record = memory_delete(tenant=tenant, user=user, memory_id=memory_id, memory=memory, actor_type=actor_type,
                           actor_id=actor_id)
    derived_scrub(tenant=tenant, user=user or record.user, records=[record], forgotten=_words_of(record),
                  actor_type=actor_type, actor_id=actor_id)
    return record


def forget_requests_honour(*, tenant: Tenant, user: EndUser, message: Message) -> int:
    """The user's message asks to forget something ("please forget my favourite band"): each memory of theirs that
    says it loses what it says of it, as if they had deleted that part, and keeps the rest; a memory that says only
    that is deleted. Returns how many memories changed; asking again changes nothing."""
    asked = forget_requests(message.content) if message.role == "user" else []
    if not asked:
        return 0
    who = user.display_name or ""

    def named(statement: str) -> bool:
        return any(names_it(what, statement, who=who) for what in asked)

    whole, parts, forgotten = [], [], []
    for record in (MemoryRecord.objects.for_tenant(tenant).filter(user=user, status__in=_LIVE)
                   .exclude(source_message_id=message.pk)):
        said = statements(record.text)
        hits = [s for s in said if named(s)]
        if hits and len(hits) < len(said):
            parts.append(record)
            forgotten += hits
        elif hits or (record.subject and named(record.subject)):
            whole.append(record)
            forgotten += said
    if not whole and not parts:
        return 0
    sources = {mid for r in whole + parts for mid in source_ids(r)}
    for m in Message.objects.for_tenant(tenant).filter(pk__in=list(sources)):
        forgotten += [s for s in statements(m.content) if named(s) and s not in forgotten]
    actor = {"actor_type": "end_user", "actor_id": user.external_id}
    for record in whole:
        memory_delete(tenant=tenant, user=user, memory=record, **actor)
    for record in parts:
        memory_text_forget(tenant=tenant, user=user, memory=record, note="part forgotten at the user's request",
                           rewrite=lambda text: statements_rewrite(text, named), **actor)
    derived_scrub(tenant=tenant, user=user, records=whole + parts, forgotten=forgotten, **actor)
    return len(whole) + len(parts)


def source_ids(record: MemoryRecord) -> set[str]:
    """The messages a memory was drawn from."""
    ids = {str(i) for i in record.source_message_ids or []}
    return ids | {str(record.source_message_id)} if record.source_message_id else ids


def _words_of(record: MemoryRecord) -> list[str]:
    """The statements a memory was made of: its own, and those of its source messages that it mostly repeats."""
    out = [s for s in statements(record.text) if content_words(s)]
    for m in Message.objects.for_tenant(record.tenant_id).filter(pk__in=list(source_ids(record))):
        out += [s for s in statements(m.content) if content_words(s) and support_share(s, [record.text]) >= 0.75
                and s not in out]
    return out


class _Forgotten:
    """The forgotten statements' content words, read once: a statement is said again when most of its words are
    theirs and it says a fair part of one of them (the share infra.support measures)."""

    def __init__(self, said: list[str], *, ignore: tuple[str, ...]):
        self.ignore = ignore
        self.sets = [w for w in (content_words(s, ignore=ignore) for s in said) if w]
        self.pool = set().union(*self.sets)

    def says(self, statement: str) -> bool:
        words = content_words(statement, ignore=self.ignore)
        if not words or len(words & self.pool) < SUPPORTED_SHARE * len(words) or asks_to_forget(statement):
            return False
        return any(len(f & words) >= SUPPORTED_SHARE / 2 * len(f) for f in self.sets)


def derived_scrub(*, tenant: Tenant, user: EndUser, records: list[MemoryRecord], forgotten: list[str],
                  actor_type: str, actor_id: str = "") -> None:
    """Take the forgotten statements out of what the records' sessions and the user's context hold."""
    if not forgotten:
        return
    says = _Forgotten(forgotten, ignore=tuple((user.display_name or "").split())).says

    def without(text: str) -> str:
        return statements_rewrite(text, says)

    gone = {r.pk for r in records}
    sessions = {r.session_id for r in records if r.session_id}
    # Other memories of those sessions: the episode beside a fact, a passage, a session note.
    for other in MemoryRecord.objects.for_tenant(tenant).filter(user=user, status__in=_LIVE, session_id__in=sessions) \
            .exclude(pk__in=gone):
        if without(other.text) != other.text:
            memory_text_forget(tenant=tenant, user=user, memory=other, rewrite=without, actor_type=actor_type,
                               actor_id=actor_id)
    message_rows_rewrite(tenant=tenant, session_ids=sessions, message_ids={m for r in records for m in source_ids(r)},
                         rewrite=lambda text: statements_rewrite(text, says, marker=FORGOTTEN))
    context_text_rewrite(tenant=tenant, user=user, rewrite=without)
