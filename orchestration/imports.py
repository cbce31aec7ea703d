"""Bulk import of a conversation export for one end user, through the product's own write path.

A job is created once its export validates (sessions/import_formats.py reads it as a stream), then advanced in
bounded runs. Each run writes the export's sessions in parts of at most one message batch: a part is opened as a
session of imported history, its messages appended by messages_append, and closed, all in one transaction that
also moves the job's cursor. So a part is written whole or not at all, no other transaction ever sees an imported
session open, and a run stopped anywhere resumes at the cursor. Messages are idempotent by external id: a part
whose messages are already stored (a re-import, a second delivery) writes nothing, and messages a later export
adds to a stored conversation go to a continuation session (`<id>#2`, ...), since a closed session takes no more.

Pacing. Live turns keep priority over imported history in two ways:
  * Everything an import queues runs on the `bulk` queue, which server mode serves with its own one-slot worker
    (scripts/run); the embedded worker consumes it beside its other queues, taking turns between them.
  * The expensive follow-up of imported sessions (their bridges, and the extraction of their messages, which may
    call the model) is not queued per session or per message, where hundreds of tasks would take every worker
    slot and the background LLM slot ahead of live extraction. Closing an imported session skips the per-session
    finish task; one chain per user (imports_backlog_task) does a bounded batch, pauses, and queues itself again.
    So an import holds at most one worker slot for its writes and one for its backlog, and extraction of imported
    messages runs at most CONTINUUM_IMPORT_BACKLOG_BATCH per pause, however large the file.
A token bucket alone would bound the rate but not the slots; a priority queue alone would bound neither once the
live queues are empty for a moment and every slot picks up bulk work.
"""
from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from infra import clock
from infra.errors import Conflict, NotFound, ValidationFailed
from infra.redis_client import Keys, get_redis
from infra.task_queue import task_enqueue, task_enqueue_on_commit
from memory.actions import memory_expiry, memory_ttl_days
from memory.extraction.classify import EXTRACTED_ROLES, FACT_ROLES, extracted_roles
from memory.models import MemoryKind
from sessions.import_formats import ImportedSession, export_sessions, export_summary, format_check
from sessions.models import Message, Session
from sessions.services import NewMessage
from tenants.models import EndUser, Tenant
from tenants.selectors import parse_uuid

from .messages import message_extract, messages_append
from .models import ImportJob
from .sessions import IMPORT_CLOSE_REASON, session_close, session_finish, session_open_imported

log = logging.getLogger(__name__)

PART_SEPARATOR = "#"
# The backlog chain's flag outlives one run and its pause, so a chain in flight is never started twice.
BACKLOG_FLAG_SECONDS = 600
Status = ImportJob.Status


# --- jobs ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ImportForecast:
    """What an import of this export would write, and what the tenant's memory TTLs would do to it."""
    sessions: int
    messages: int
    counted_from: str  # the tenant's lifetime start: "learned" (the import) or "said" (the messages' dates)
    # Per kind with a TTL: how many of the export's extracted messages would give memories of that kind that
    # expire at once (their lifetime would already be over when they are learned).
    expiring_at_once: dict[str, int]

    @property
    def lifetimes(self) -> dict:
        return {"counted_from": self.counted_from, "expiring_at_once": dict(self.expiring_at_once)}


def import_forecast(*, tenant: Tenant, fmt: str, payload: bytes | None = None, file_name: str = "",
                    speaker: str = "") -> ImportForecast:
    """Read and validate the export (one streamed pass) and forecast it: nothing is stored. A dry run answers this;
    import_job_create checks it before it records a job."""
    format_check(fmt)
    if "\x00" in speaker:
        raise ValidationFailed("speaker contains a NUL character.")
    now = clock.now()
    # By the kinds a message's memories take (a session's note is written per session, not per message).
    ttls = {k: days for k in MemoryKind.values
            if k != MemoryKind.NOTE and (days := memory_ttl_days(tenant=tenant, kind=k)) is not None}
    expiring = dict.fromkeys(ttls, 0)
    roles = extracted_roles(tenant)

    def on_message(message) -> None:
        if message.role not in roles:
            return
        # Only the user's words become facts, goals and the rest; other extracted turns are kept as events.
        kinds = ttls if message.role in FACT_ROLES else [k for k in ttls if k == MemoryKind.EVENT]
        for kind in kinds:
            if memory_expiry(tenant=tenant, kind=kind, said_at=message.created_at, learned_at=now) <= now:
                expiring[kind] += 1

    with _open(payload, file_name) as stream:
        summary = export_summary(fmt=fmt, stream=stream, speaker=speaker, default_time=now, on_message=on_message)
    if not summary.messages:
        # A job of nothing would end "done" at once, which reads as a successful import.
        raise ValidationFailed("The export holds no messages to import.", code="empty_export",
                               details={"conversations": summary.sessions, "blank_messages": summary.ignored})
    return ImportForecast(summary.sessions, summary.messages, tenant.memory_lifetime_from, expiring)


def import_job_create(*, tenant: Tenant, user: EndUser, fmt: str, payload: bytes | None = None,
                      file_name: str = "", speaker: str = "", source: str = ImportJob.Source.API,
                      accept_expiry: bool = False) -> ImportJob:
    """Validate the export (one streamed pass: a bad file is refused before anything is stored) and record the
    job. An API job carries its export and is handed to conversations_import_task after commit; a command job
    names its file and is advanced by the command itself.

    An export whose memories the tenant's TTLs would expire on arrival (a tenant counting lifetimes from when things
    were said, importing history older than a TTL) is refused unless the caller accepts that: an import never
    reports success for what is gone minutes later without having said so."""
    forecast = import_forecast(tenant=tenant, fmt=fmt, payload=payload, file_name=file_name, speaker=speaker)
    if any(forecast.expiring_at_once.values()) and not accept_expiry:
        raise Conflict(
            "The tenant's memory TTLs count from when things were said, so memories of this history would expire "
            "as soon as they are learned. Import with accept_expiry=true to import it anyway, or change the "
            "tenant's TTLs or memory_lifetime_from.",
            code="import_would_expire", details=forecast.lifetimes)
    with transaction.atomic():
        job = ImportJob.objects.create(
            tenant=tenant, user=user, format=fmt, options={"speaker": speaker} if speaker else {}, source=source,
            payload=payload, file_name=file_name[:1000],
            sessions_total=forecast.sessions, messages_total=forecast.messages, lifetimes=forecast.lifetimes)
        if source == ImportJob.Source.API:
            tenant_id, job_id = str(tenant.pk), str(job.pk)
            task_enqueue_on_commit("orchestration.tasks.conversations_import_task", tenant_id, job_id)
    return job


def _open(payload: bytes | None, file_name: str) -> BinaryIO:
    return io.BytesIO(bytes(payload)) if payload is not None else open(file_name, "rb")


@dataclass(frozen=True)
class ImportRun:
    job: ImportJob | None
    more: bool  # this run stopped at its bound with messages left: run again


def import_job_advance(*, tenant_id, job_id, max_messages: int | None = None,
                       on_progress: Callable[[int], None] | None = None) -> ImportRun:
    """One bounded run: write parts from the cursor until about max_messages (None: to the end) have been consumed.

    The job ends DONE when every message of the export is stored. Any run may repeat or overlap another: each
    part is claimed by moving the cursor in its own transaction, so the loser of a race writes nothing and stops
    (more=False: the winner goes on)."""
    jobs = ImportJob.objects.for_tenant(tenant_id)
    job = jobs.select_related("tenant", "user").filter(pk=job_id).first()
    if job is None or job.status in (Status.DONE, Status.FAILED):
        return ImportRun(job, False)
    now = clock.now()
    jobs.filter(pk=job.pk, started_at__isnull=True).update(started_at=now)
    jobs.filter(pk=job.pk, status=Status.QUEUED).update(status=Status.RUNNING)
    job.status = Status.RUNNING
    state, wrote = _parts_write(job, max_messages=max_messages, on_progress=on_progress)
    if wrote or state == "finished":
        # Before the job is marked done: if Redis is down this raises, the task retries, and the retry kicks it.
        imports_backlog_kick(tenant_id=job.tenant_id, user_id=job.user_id)
    if state == "finished":
        jobs.filter(pk=job.pk, status=Status.RUNNING).update(status=Status.DONE, finished_at=clock.now(),
                                                             payload=None, error="")
    return ImportRun(_refreshed(job), state == "bounded")


def access_import_job(*, tenant: Tenant, user: EndUser, job_id) -> ImportJob:
    """The user's import job; one 404 for missing, another tenant's and another user's."""
    jid = parse_uuid(job_id, what="import job")
    job = ImportJob.objects.for_tenant(tenant).filter(pk=jid, user=user).defer("payload").first()
    if job is None:
        raise NotFound("Import job not found.")
    return job


def _parts_write(job: ImportJob, *, max_messages: int | None, on_progress) -> tuple[str, bool]:
    """Write parts from the job's cursor. Returns how it stopped (finished, bounded: the budget is spent, lost:
    another run moved the cursor) and whether it created messages."""
    budget = max_messages
    part_size = settings.CONTINUUM_MAX_BATCH
    offset, position, wrote = 0, job.position, False
    with _open(job.payload, job.file_name) as stream:
        for imported in export_sessions(fmt=job.format, stream=stream, speaker=job.options.get("speaker", ""),
                                        default_time=job.created_at):
            count = len(imported.messages)
            start = position - offset
            while 0 <= start < count:
                if budget is not None and budget <= 0:
                    return "bounded", wrote
                # Parts are cut at fixed multiples of the batch within a session, so a resumed run cuts the same.
                end = min(count, (start // part_size + 1) * part_size)
                created = _part_write(job, imported, start, end, cursor=offset + start)
                if created is None:  # another run moved the cursor: that one carries on
                    return "lost", wrote
                wrote = wrote or created > 0
                if budget is not None:
                    budget -= end - start
                position, start = offset + end, end
                if on_progress is not None:
                    on_progress(position)
            offset += count
    return "finished", wrote


def _refreshed(job: ImportJob) -> ImportJob:
    return ImportJob.objects.for_tenant(job.tenant_id).select_related("tenant", "user").defer("payload").get(pk=job.pk)


def import_job_failed(*, tenant_id, job_id, error: str) -> None:
    """Mark the job failed (what it stored stays stored; a new job with the same export resumes by skipping it)."""
    ImportJob.objects.for_tenant(tenant_id).filter(pk=job_id).exclude(status=Status.DONE).update(
        status=Status.FAILED, error=error[:2000], finished_at=clock.now())


def import_job_resume(*, tenant_id, job_id) -> ImportJob | None:
    """Put a failed command job back to running, so the command can advance it from its cursor again."""
    ImportJob.objects.for_tenant(tenant_id).filter(pk=job_id, status=Status.FAILED).update(
        status=Status.RUNNING, error="", finished_at=None)
    return ImportJob.objects.for_tenant(tenant_id).select_related("tenant", "user").filter(pk=job_id).first()


# --- one part of one session ---------------------------------------------------------------------------------------

def _part_sessions(tenant, user, base: str) -> dict[str, object]:
    """external id → session id of the stored sessions a conversation's messages may be in: its own and its
    continuations."""
    return dict(Session.objects.for_tenant(tenant).filter(user=user).filter(
        Q(external_id=base) | Q(external_id__startswith=base + PART_SEPARATOR)).values_list("external_id", "pk"))


def _next_part_id(base: str, taken: dict) -> str:
    if base not in taken:
        return base
    pattern = re.compile(re.escape(base + PART_SEPARATOR) + r"(\d+)$")
    numbers = [int(m.group(1)) for ext in taken if (m := pattern.match(ext))]
    return f"{base}{PART_SEPARATOR}{max(numbers, default=1) + 1}"


def _part_write(job: ImportJob, imported: ImportedSession, start: int, end: int, *, cursor: int) -> int | None:
    """Write imported.messages[start:end] (those not stored yet) as one closed session, moving the cursor from
    `cursor` in the same transaction. Returns how many messages it created, None when the cursor had moved."""
    tenant, user = job.tenant, job.user
    part = imported.messages[start:end]
    with transaction.atomic():
        # The claim: only the run that moves the cursor from here writes this part.
        if not ImportJob.objects.for_tenant(tenant).filter(pk=job.pk, position=cursor, status=Status.RUNNING) \
                .update(position=cursor + len(part)):
            return None
        # One user's parts are written one at a time, across jobs too, so the check below cannot race a creator.
        EndUser.objects.for_tenant(tenant).select_for_update().filter(pk=user.pk).first()
        taken = _part_sessions(tenant, user, imported.external_id)
        stored = set(Message.objects.for_tenant(tenant).filter(
            session_id__in=list(taken.values()), external_id__in=[m.external_id for m in part])
            .values_list("external_id", flat=True)) if taken else set()
        new = [m for m in part if m.external_id not in stored]
        if new:
            external_id = _next_part_id(imported.external_id, taken)
            suffix = external_id[len(imported.external_id):]
            session = session_open_imported(
                tenant=tenant, user=user, opened_at=min(m.created_at for m in new), external_id=external_id,
                title=f"{imported.title} (part {suffix[1:]})" if suffix else imported.title)
            for i in range(0, len(new), settings.CONTINUUM_MAX_BATCH):
                messages_append(tenant=tenant, session_id=session.pk, enqueue_extraction=False, live=False, items=[
                    NewMessage(role=m.role, content=m.content, external_id=m.external_id, created_at=m.created_at,
                               name=m.name, tool_calls=m.tool_calls or None, tool_call_id=m.tool_call_id)
                    for m in new[i:i + settings.CONTINUUM_MAX_BATCH]])
            # The bridge and extraction follow in the user's backlog chain, paced (see the module's docstring).
            session_close(tenant=tenant, session_id=session.pk, reason=IMPORT_CLOSE_REASON,
                          closed_at=max(m.created_at for m in new), finish=False)
        ImportJob.objects.for_tenant(tenant).filter(pk=job.pk).update(
            sessions_created=F("sessions_created") + (1 if new else 0),
            messages_created=F("messages_created") + len(new),
            messages_skipped=F("messages_skipped") + len(part) - len(new))
    return len(new)


# --- the paced backlog: bridges and extraction of imported sessions -------------------------------------------------

@dataclass(frozen=True)
class BacklogRun:
    bridges: int
    extracted: int
    more: bool


def _sessions_unbridged(tenant_id, user_id):
    return (Session.objects.for_tenant(tenant_id)
            .filter(user_id=user_id, state=Session.State.CLOSED, close_reason=IMPORT_CLOSE_REASON, bridge__isnull=True)
            .order_by("opened_at", "pk"))


def _messages_unextracted(tenant_id, user_id):
    return (Message.objects.for_tenant(tenant_id)
            .filter(session__user_id=user_id, session__close_reason=IMPORT_CLOSE_REASON,
                    session__state=Session.State.CLOSED, extracted_at__isnull=True, role__in=EXTRACTED_ROLES)
            .order_by("created_at", "seq", "pk"))


def imports_backlog_pending(*, tenant_id, user_id) -> dict:
    """What the user's imports still wait for: sessions without a bridge, messages not yet extracted."""
    return {"bridges": _sessions_unbridged(tenant_id, user_id).count(),
            "extractions": _messages_unextracted(tenant_id, user_id).count()}


def imports_backlog_work(*, tenant_id, user_id, limit: int, allow_llm_failure: bool = False) -> BacklogRun:
    """Up to `limit` steps of the user's import backlog, oldest first: each imported session's finish (its bridge,
    exactly one, as a closed session's finish writes it), then each imported message's extraction. Idempotent."""
    bridges = extracted = 0
    for session_id in list(_sessions_unbridged(tenant_id, user_id).values_list("pk", flat=True)[:limit]):
        session_finish(tenant_id=tenant_id, session_id=session_id)
        bridges += 1
    for message_id in list(_messages_unextracted(tenant_id, user_id).values_list("pk", flat=True)[:limit - bridges]):
        message_extract(tenant_id=tenant_id, message_id=message_id, allow_llm_failure=allow_llm_failure)
        extracted += 1
    more = bridges + extracted >= limit and (_sessions_unbridged(tenant_id, user_id).exists()
                                              or _messages_unextracted(tenant_id, user_id).exists())
    return BacklogRun(bridges, extracted, more)


def imports_backlog_kick(*, tenant_id, user_id) -> bool:
    """Start the user's backlog chain unless one is queued or running; True when this call started it."""
    if get_redis().set(Keys.import_backlog_flag(tenant_id, user_id), "1", nx=True, ex=BACKLOG_FLAG_SECONDS):
        task_enqueue("orchestration.tasks.imports_backlog_task", str(tenant_id), str(user_id))
        return True
    return False


def imports_backlog_next(*, tenant_id, user_id, more: bool) -> None:
    """After a run of the chain: queue the next run after the pause, or end the chain.

    Ending drops the flag before looking once more: an import that committed parts meanwhile either saw the flag
    (and left the work to this chain, which finds it now) or finds it gone and starts a new chain itself."""
    r = get_redis()
    flag = Keys.import_backlog_flag(tenant_id, user_id)
    if more:
        r.expire(flag, BACKLOG_FLAG_SECONDS)
        task_enqueue("orchestration.tasks.imports_backlog_task", str(tenant_id), str(user_id),
                     countdown=settings.CONTINUUM_IMPORT_BACKLOG_PAUSE_SECONDS)
        return
    r.delete(flag)
    if any(imports_backlog_pending(tenant_id=tenant_id, user_id=user_id).values()):
        imports_backlog_kick(tenant_id=tenant_id, user_id=user_id)
