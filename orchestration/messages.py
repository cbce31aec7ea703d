"""A message's fan-out, in one place: stored in the database → appended to the session's buffer → links and
summary anchors when due → extraction enqueued after commit → the facts it finds pushed back into the buffer.

The database row is the provenance anchor and the truth; every later step is repairable from it (a buffer that
missed an append catches up on its next read, the bridge task extracts whatever was never extracted), so a
failure after the commit is logged and never fails the request that stored the message.
"""
from __future__ import annotations

import functools
import logging

import redis
from django.db import transaction

from context.anchors import anchors_after_append
from context.buffer import buffer_add_facts, buffer_append_messages, buffer_delete
from context.links import links_create_for_first_message
from infra.errors import NotFound
from infra.task_queue import task_enqueue
from memory.actions import ExtractionResult, memory_delete, memory_extract_many
from memory.extraction.classify import FACT_ROLES, extracted_roles
from memory.models import MemoryKind, MemoryRecord, MemoryStatus
from memory.sources import SourceMessage
from sessions.models import Message, Session
from sessions.services import NewMessage, message_row_claim_extraction, message_rows_append, message_rows_delete

from .forgetting import forget_requests_honour, source_ids

log = logging.getLogger(__name__)


def messages_append(*, tenant, session_id, items: list[NewMessage],
                    enqueue_extraction: bool = True, live: bool = True) -> list[Message]:
    """Store messages (atomically), then fan them out once the transaction commits.

    Messages of the roles extraction reads wait for it; enqueue_extraction=False leaves them waiting for a caller
    that extracts them itself (an import that runs extraction in its own order). live=False: the session is closed
    before the caller commits (imported history), so there is no buffer to append to, fold or link from."""
    with transaction.atomic(savepoint=False):  # see message_rows_append: an import's transaction fails whole
        rows = message_rows_append(tenant=tenant, session_id=session_id, items=items,
                                   pending_roles=extracted_roles(tenant))
        if rows and (live or enqueue_extraction):
            tenant_id, user_id = str(tenant.pk), str(rows[0].session.user_id)
            enqueue = functools.partial(task_enqueue, "orchestration.tasks.message_extract_task") \
                if enqueue_extraction else None
            transaction.on_commit(lambda: _after_commit(tenant_id, user_id, str(rows[0].session_id), rows,
                                                        enqueue=enqueue, live=live))
    return rows


def _after_commit(tenant_id: str, user_id: str, session_id: str, rows: list[Message], *, enqueue,
                  live: bool = True) -> None:
    if live and not _live_fan_out(tenant_id, user_id, session_id, rows):
        return
    for row in rows if enqueue is not None else ():
        if row.extracted_at is None:
            enqueue(tenant_id, str(row.pk))


def _live_fan_out(tenant_id: str, user_id: str, session_id: str, rows: list[Message]) -> bool:
    """The open session's buffer, links and anchors; False when the session is gone."""
    result = None
    try:
        # The committed rows are handed over so the buffer need not read them back.
        result = buffer_append_messages(tenant_id=tenant_id, user_id=user_id, session_id=session_id,
                                        message_ids=[str(r.pk) for r in rows], messages=rows)
    except redis.exceptions.RedisError:
        log.warning("buffer append failed for session %s; the next read catches up from the database", session_id,
                    exc_info=True)
    except NotFound:  # the session was erased meanwhile
        return False
    users = [r for r in rows if r.role == Message.Role.USER]
    if users and (result is None or result.turns <= len(users)):
        try:
            links_create_for_first_message(tenant_id=tenant_id, session_id=session_id, text=users[0].content)
        except Exception:  # links enrich the first turn; they must never fail an append
            log.exception("linking session %s on its first message failed", session_id)
    if result is not None:
        try:
            anchors_after_append(tenant_id=tenant_id, user_id=user_id, session_id=session_id,
                                 unanchored_turns=result.unanchored_turns, unanchored_tokens=result.unanchored_tokens)
        except Exception:  # folding is an optimisation of the context; the turn itself is safe in the database
            log.exception("folding turns of session %s failed", session_id)
    return True


def source_of(message: Message) -> SourceMessage:
    """A stored message as memory sees it: provenance and words, nothing of the sessions app."""
    session = message.session

    def context_before() -> str:
        return (Message.objects.for_tenant(message.tenant_id)
                .filter(session_id=message.session_id, seq__lt=message.seq)
                .order_by("-seq").values_list("content", flat=True).first()) or ""

    return SourceMessage(id=str(message.pk), session_id=str(message.session_id), created_at=message.created_at,
                         role=message.role, content=message.content,
                         speaker=((session.user.display_name or "").strip() or "The user") if message.role == "user"
                         else (message.name or "").strip() or "Assistant",
                         context_before=context_before)


def _claim(message: Message):
    def claim() -> bool:
        """Mark the message extracted in the caller's transaction; False when another run already did."""
        return message_row_claim_extraction(tenant_id=message.tenant_id, message_id=message.pk)
    return claim


def message_extract(*, tenant_id, message_id, allow_llm_failure: bool = False) -> ExtractionResult:
    """Extract one stored message's memories, then push the durable facts into its open session's buffer."""
    return messages_extract(tenant_id=tenant_id, message_ids=[message_id], allow_llm_failure=allow_llm_failure)[0]


def messages_extract(*, tenant_id, message_ids, allow_llm_failure: bool = False) -> list[ExtractionResult]:
    """Extract stored messages (a turn's input and the replies to it), then push the durable facts into their open
    session's buffer. One result per id, in order.

    Messages of one user are extracted together, a batch per message that states facts (memory_extract_many): a
    turn costs one hold of the user's memories, one embedding call and one transaction, not one per message."""
    ids = [str(m) for m in message_ids]
    rows = {str(m.pk): m for m in Message.objects.for_tenant(tenant_id).select_related("session__user", "tenant")
            .filter(pk__in=ids)}
    results: dict[str, ExtractionResult] = {}
    batches: list[list[Message]] = []
    for mid in ids:
        message = rows.get(mid)
        if message is None:
            results[mid] = ExtractionResult(mid, "missing")
        elif message.extracted_at is not None:
            results[mid] = ExtractionResult(mid, "already_done")
        elif (not batches or batches[-1][0].session.user_id != message.session.user_id
              or (message.role in FACT_ROLES and any(m.role in FACT_ROLES for m in batches[-1]))):
            batches.append([message])
        else:
            batches[-1].append(message)
    for batch in batches:
        first = batch[0]
        done = memory_extract_many(tenant=first.tenant, user=first.session.user,
                                   items=[(source_of(m), _claim(m)) for m in batch],
                                   allow_llm_failure=allow_llm_failure)
        for message, result in zip(batch, done):
            results[str(message.pk)] = result
            _facts_to_buffer(message, result)
            if result.status in ("done", "skipped"):
                forget_requests_honour(tenant=message.tenant, user=message.session.user, message=message)
    return [results[mid] for mid in ids]


def _facts_to_buffer(message: Message, result: ExtractionResult) -> None:
    facts = [{"id": str(r.pk), "text": r.text} for r in result.records
             if r.kind != MemoryKind.EVENT and r.status == MemoryStatus.ACTIVE]
    if facts and message.session.state == Session.State.OPEN:
        try:
            buffer_add_facts(tenant_id=message.tenant_id, user_id=message.session.user_id,
                             session_id=message.session_id, facts=facts)
        except redis.exceptions.RedisError:  # the buffer is disposable: its rebuild reads these rows
            log.warning("could not push facts of message %s to the session buffer", message.pk)


def messages_pending_extraction(*, tenant_id, session_id, limit: int) -> list[str]:
    """Ids of a session's messages still waiting for extraction, oldest first."""
    return [str(m) for m in Message.objects.for_tenant(tenant_id)
            .filter(session_id=session_id, extracted_at__isnull=True).exclude(role=Message.Role.SYSTEM)
            .order_by("seq").values_list("id", flat=True)[:limit]]


def messages_withdraw(*, tenant, session: Session, after_seq: int, actor_type: str = "system",
                      actor_id: str = "") -> int:
    """Take back what a session holds after message `after_seq` (the answer a client regenerates): the messages go,
    with the memories drawn only from them, and the session's buffer is rebuilt without them. Returns how many
    messages went."""
    with transaction.atomic():
        doomed = list(Message.objects.for_tenant(tenant).select_for_update()
                      .filter(session=session, seq__gt=after_seq).values_list("pk", flat=True))
        if not doomed:
            return 0
        ids = {str(pk) for pk in doomed}
        drawn = MemoryRecord.objects.for_tenant(tenant).filter(
            user_id=session.user_id, session=session, status__in=(MemoryStatus.ACTIVE, MemoryStatus.PENDING_REVIEW))
        for record in drawn:
            sources = source_ids(record)
            if sources and sources <= ids:
                memory_delete(tenant=tenant, memory=record, actor_type=actor_type, actor_id=actor_id)
        message_rows_delete(tenant=tenant, message_ids=doomed)
    try:
        buffer_delete(tenant_id=tenant.pk, user_id=session.user_id, session_id=session.pk)
    except redis.exceptions.RedisError:
        log.warning("withdraw: the buffer of session %s could not be dropped; it expires on its own", session.pk)
    return len(doomed)
