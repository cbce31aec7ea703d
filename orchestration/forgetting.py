"""A memory the user deletes, or asks in words to forget, stays gone from everything derived from its words.

A memory's words live on in what was written from them: the message it came from and the turns of its session that
repeat them (shown as neighbouring or recent turns), other memories of that session (the episode beside a fact, a
session note), and the user's bridges, summary anchors and sessions' goal stacks, ledgers and notes, from which the
open buffers and every later bridge are written. Forgetting takes out the statements the memory was made of from each
of them, a statement at a time (infra/clauses.py): "my favourite colour is green and my favourite food is sushi" loses
the colour and keeps the food. In a message the forgotten statement leaves "[forgotten]" in its place, so the
transcript shows that something was taken back; elsewhere it just goes, and a row left with nothing goes with it. A
request to forget is the user's own message and the trace of what they asked: it is never taken out itself.

Each deletion does this, one or many: a user's delete, a bulk delete by filter and deleting all (the words of all the
memories deleted taken out in one pass), staff's delete on a memory's page, in its list or in the review queue, and
the assistant's forget tool. Receipts of composed contexts are derived text too: an item of a deleted memory reads
"[forgotten]", and an item or query that repeats forgotten words shows the marker in their place, while its rank,
score and tokens stay. A tool call's arguments and a tool's result lose the words where they stand in the JSON.

Each store is written by its owner: memories by memory.actions, messages by sessions.services, bridges, anchors and
the working state by context.forgetting, receipts by orchestration.receipts; this module decides what is forgotten.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

from context.forgetting import context_text_rewrite
from infra.clauses import statements, statements_rewrite
from infra.support import SUPPORTED_SHARE, content_words, support_share
from memory.actions import (
    BulkDeleteResult,
    memories_bulk_delete,
    memory_delete,
    memory_delete_all,
    memory_text_forget,
)
from memory.extraction.forget_requests import asks_to_forget, forget_requests, names_it
from memory.models import MemoryRecord, MemoryStatus
from memory.selectors import MemoryCriteria
from sessions.models import Message
from sessions.services import message_rows_rewrite
from tenants.models import EndUser, Tenant

from .receipts import receipts_text_rewrite

log = logging.getLogger(__name__)

FORGOTTEN = "[forgotten]"
_LIVE = (MemoryStatus.ACTIVE, MemoryStatus.PENDING_REVIEW, MemoryStatus.SUPERSEDED)


def memory_forget(*, tenant: Tenant, actor_type: str, actor_id: str = "", memory_id=None,
                  memory: MemoryRecord | None = None, user: EndUser | None = None) -> MemoryRecord:
    """Delete the memory (soft, as memory_delete: staff can restore the record) and take its words out of everything
    derived from them, which no restore brings back."""
    record = memory_delete(tenant=tenant, user=user, memory_id=memory_id, memory=memory, actor_type=actor_type,
                           actor_id=actor_id)
    _deleted_scrub(tenant=tenant, user=user or record.user, records=[record], actor_type=actor_type,
                   actor_id=actor_id)
    return record


def memories_bulk_forget(*, tenant: Tenant, user: EndUser, criteria: MemoryCriteria, actor_type: str,
                         actor_id: str = "", dry_run: bool = False, limit: int | None = None) -> BulkDeleteResult:
    """Delete the user's memories matching `criteria` as memory_forget deletes one (memory.actions
    .memories_bulk_delete: bounded per call, `more` says whether to call again), the words of all of them taken out
    of what was derived from them in one pass."""
    result = memories_bulk_delete(tenant=tenant, user=user, criteria=criteria, actor_type=actor_type,
                                  actor_id=actor_id, dry_run=dry_run, limit=limit)
    _deleted_scrub(tenant=tenant, user=user, records=result.records, actor_type=actor_type, actor_id=actor_id)
    return result


def memories_forget_all(*, tenant: Tenant, user: EndUser, actor_type: str, actor_id: str = "") -> list[MemoryRecord]:
    """Delete every memory of the user as memory_forget deletes one, their words taken out of what was derived from
    them in one pass; returns the records deleted."""
    records = memory_delete_all(tenant=tenant, user=user, actor_type=actor_type, actor_id=actor_id)
    _deleted_scrub(tenant=tenant, user=user, records=records, actor_type=actor_type, actor_id=actor_id)
    return records


def _deleted_scrub(*, tenant: Tenant, user: EndUser, records: list[MemoryRecord], actor_type: str,
                   actor_id: str) -> None:
    if records:
        derived_scrub(tenant=tenant, user=user, records=records, forgotten=_words_of(tenant, records),
                      actor_type=actor_type, actor_id=actor_id)


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
    derived_scrub(tenant=tenant, user=user, records=whole, parts=parts, forgotten=forgotten, **actor)
    return len(whole) + len(parts)


def source_ids(record: MemoryRecord) -> set[str]:
    """The messages a memory was drawn from."""
    ids = {str(i) for i in record.source_message_ids or []}
    return ids | {str(record.source_message_id)} if record.source_message_id else ids


def _words_of(tenant: Tenant, records: list[MemoryRecord]) -> list[str]:
    """The statements the memories were made of: their own, and those of their source messages that one of them
    mostly repeats (the messages read in one query)."""
    out: dict[str, None] = {}  # ordered, and a statement said twice is checked once
    ids = {m for r in records for m in source_ids(r)}
    contents = dict(Message.objects.for_tenant(tenant).filter(pk__in=list(ids)).values_list("pk", "content")) \
        if ids else {}
    contents = {str(k): v for k, v in contents.items()}
    for record in records:
        out.update((s, None) for s in statements(record.text) if s not in out and content_words(s))
        for mid in source_ids(record):
            for s in statements(contents.get(mid, "")):
                if s not in out and content_words(s) and support_share(s, [record.text]) >= 0.75:
                    out[s] = None
    return list(out)


class _Forgotten:
    """The forgotten statements' content words, read once: a statement is said again when most of its words are
    theirs and it says a fair part of one of them (the share infra.support measures). Each word points at the
    statements that hold it, so a check reads only those that share a word with it, however many were forgotten."""

    def __init__(self, said: list[str], *, ignore: tuple[str, ...]):
        self.ignore = ignore
        self.sets = [w for w in (content_words(s, ignore=ignore) for s in said) if w]
        self.holding: dict[str, list[int]] = {}
        for i, words in enumerate(self.sets):
            for w in words:
                self.holding.setdefault(w, []).append(i)

    def touches(self, text: str) -> bool:
        """Whether the text shares a word with any forgotten statement (else no statement of it says one)."""
        return not self.holding.keys().isdisjoint(content_words(text, ignore=self.ignore))

    def says(self, statement: str) -> bool:
        words = content_words(statement, ignore=self.ignore)
        shared = [w for w in words if w in self.holding]
        if not words or len(shared) < SUPPORTED_SHARE * len(words) or asks_to_forget(statement):
            return False
        candidates = {i for w in shared for i in self.holding[w]}
        return any(len(self.sets[i] & words) >= SUPPORTED_SHARE / 2 * len(self.sets[i]) for i in candidates)


def derived_scrub(*, tenant: Tenant, user: EndUser, records: list[MemoryRecord], forgotten: list[str],
                  actor_type: str, actor_id: str = "", parts: Sequence[MemoryRecord] = ()) -> None:
    """Take the forgotten statements out of what the records' sessions and the user's context and receipts hold.
    records: the memories deleted; parts: those that lost part of what they said and keep the rest."""
    if not forgotten:
        return
    forgotten_words = _Forgotten(forgotten, ignore=tuple((user.display_name or "").split()))
    says = forgotten_words.says

    def without(text: str) -> str:
        return statements_rewrite(text, says) if forgotten_words.touches(text) else text

    def marked(text: str) -> str:
        return statements_rewrite(text, says, marker=FORGOTTEN) if forgotten_words.touches(text) else text

    every = [*records, *parts]
    gone = {r.pk for r in every}
    sessions = {r.session_id for r in every if r.session_id}
    rewritten = {str(r.pk) for r in parts}
    # Other memories of those sessions: the episode beside a fact, a passage, a session note.
    for other in MemoryRecord.objects.for_tenant(tenant).filter(user=user, status__in=_LIVE, session_id__in=sessions) \
            .exclude(pk__in=gone):
        if without(other.text) != other.text:
            memory_text_forget(tenant=tenant, user=user, memory=other, rewrite=without, actor_type=actor_type,
                               actor_id=actor_id)
            rewritten.add(str(other.pk))
    message_rows_rewrite(tenant=tenant, session_ids=sessions, message_ids={m for r in every for m in source_ids(r)},
                         rewrite=marked)
    context_text_rewrite(tenant=tenant, user=user, rewrite=without)
    # A receipt keeps what the model was given and how it ranked it: a deleted memory's item reads the marker whole
    # (its text may be cut mid-sentence), a rewritten one's and each query the marker where the words stood.
    items = {mid: marked for mid in rewritten} | {str(r.pk): lambda _text: FORGOTTEN for r in records}
    receipts_text_rewrite(tenant=tenant, user=user, query=marked, items=items)
