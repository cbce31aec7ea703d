"""One message through the pipeline: classify → extract → filter secrets → verify → prioritize → persist.

Idempotent per message. The cheap skip reads Message.extracted_at; a Redis lock keeps two workers from doing
the same LLM work; the persist transaction claims the message with a conditional UPDATE, so only one run ever
writes, and memory ids derived from (message, position) make any rerun land on the same rows and points.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from redis import exceptions as redis_errors

from infra import clock
from infra.embedder import get_embedder
from infra.errors import ServiceUnavailable
from infra.llm import llm_configured
from infra.redis_client import Keys, get_redis
from sessions.models import Message

from ..models import MemoryKind
from ..services import decisions_apply, memory_id_for
from ..user_lock import user_memory_lock
from .candidate import Candidate
from .classify import message_triage, role_extracted
from .injection import candidates_screen, injection_screen
from .rules import resolve_dates, rules_extract
from .secrets import REDACTED, secrets_redact
from .verify import candidates_verify

log = logging.getLogger(__name__)

EVENT_CONFIDENCE = 0.7  # a verbatim turn: certain that it was said, not that it stays true


@dataclass
class ExtractionResult:
    message_id: str
    status: str  # done | already_done | skipped | busy | missing
    outcomes: list[str] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)


def speaker_name(message: Message) -> str:
    user = message.session.user
    return (user.display_name or "").strip() or "The user"


def event_text(*, who: str, text: str) -> str:
    """An episodic memory is the user's own words, filler trimmed, under their name (names are how people ask)."""
    return f"{who}: {text}"


def _prioritize(candidates: list[Candidate]) -> list[Candidate]:
    """Order by what matters most; drop what is too weak to keep (confidence floor) or only a redaction."""
    kept = [c for c in candidates if c.confidence >= 0.4 and c.text.replace(REDACTED, "").strip(" .:;,-")
            # A slot whose value was a secret is not a fact worth keeping ("Ada's password is [redacted]").
            and (c.kind == MemoryKind.EVENT or (REDACTED not in c.value and REDACTED not in c.text))]
    rank = {MemoryKind.FACT: 0, MemoryKind.PREFERENCE: 1, MemoryKind.GOAL: 2, MemoryKind.PROCEDURE: 3,
            MemoryKind.EVENT: 4}
    return sorted(kept, key=lambda c: (c.kind != MemoryKind.EVENT, rank.get(c.kind, 9), -c.importance))


def candidates_for_message(message: Message, *, use_llm: bool) -> list[Candidate]:
    """Every candidate of one message, secrets already removed. Pure apart from the optional LLM calls."""
    triage = message_triage(text=message.content, role=message.role)
    if not triage.keep:
        return []
    # Secrets go before anything else sees the text: rules, the LLM, the event memory, the payload.
    clean = secrets_redact(triage.text).text
    if not clean.replace(REDACTED, "").strip(" .,:;-"):
        return []
    who = speaker_name(message)
    # Then what is said to the assistant rather than about the user: no extractor, prompt or memory sees it.
    screening = injection_screen(clean, who=who)
    if screening.found:
        log.info("message %s: %d sentence(s) addressed to the assistant dropped (%s)", message.pk,
                 len(screening.dropped), ", ".join(sorted(set(screening.dropped))))
        clean = screening.text
        if not clean.replace(REDACTED, "").strip(" .,:;-"):
            return []
    candidates = [Candidate(MemoryKind.EVENT, event_text(who=who, text=clean), confidence=EVENT_CONFIDENCE,
                            importance=0.4, extractor="event")]
    dates = resolve_dates(clean, message.created_at)
    if dates:
        candidates[0].metadata["dates"] = dates
    # The rules only ever see screened sentences; their rewrites are checked as well, as the LLM's are.
    candidates += candidates_screen(rules_extract(clean, who=who, reference=message.created_at), who=who)
    if use_llm:
        from .llm_extract import EXTRACTOR_VERSION, llm_extract

        previous = (Message.objects.filter(session_id=message.session_id, seq__lt=message.seq)
                    .order_by("-seq").values_list("content", flat=True).first()) or ""
        context = injection_screen(secrets_redact(previous[:1000]).text, who=who).text
        for c in llm_extract(clean, who=who, context=context):
            c.text = secrets_redact(c.text).text
            c.value = secrets_redact(c.value).text
            c.metadata["extractor_version"] = EXTRACTOR_VERSION
            candidates.append(c)
    return _prioritize(candidates)


def memory_extract(*, message_id, allow_llm_failure: bool = False) -> ExtractionResult:
    """Extract the memories of one recorded message. Safe to call any number of times."""
    message = (Message.objects.select_related("session__user", "tenant").filter(pk=message_id).first())
    if message is None:
        return ExtractionResult(str(message_id), "missing")
    if message.extracted_at is not None:
        return ExtractionResult(str(message_id), "already_done")
    redis = get_redis()
    lock = Keys.extract_lock(message.tenant_id, message.session.user_id, message.pk)
    if not redis.set(lock, "1", nx=True, ex=settings.MEMORY_EXTRACTION_LOCK_SECONDS):
        return ExtractionResult(str(message_id), "busy")
    try:
        return _extract_locked(message, allow_llm_failure=allow_llm_failure)
    finally:
        redis.delete(lock)


def _extract_locked(message: Message, *, allow_llm_failure: bool) -> ExtractionResult:
    tenant, user, session = message.tenant, message.session.user, message.session
    use_llm = llm_configured() and role_extracted(message.role)
    try:
        candidates = candidates_for_message(message, use_llm=use_llm)
    except ServiceUnavailable:
        if not allow_llm_failure:
            raise  # the task retries with backoff
        log.warning("LLM unavailable on the last attempt for message %s: rules only", message.pk)
        candidates = candidates_for_message(message, use_llm=False)
    vectors = get_embedder().embed([c.text for c in candidates]) if candidates else []
    # Nothing to write but the claim (an assistant turn, chatter): no other writer can be affected.
    with user_memory_lock(tenant_id=tenant.pk, user_id=user.pk) if candidates else contextlib.nullcontext():
        decisions = candidates_verify(tenant=tenant, user=user, candidates=candidates, vectors=vectors,
                                      stated_at=message.created_at) if candidates else []
        ids = [memory_id_for(message.pk, i) for i in range(len(decisions))]
        with transaction.atomic():
            claimed = Message.objects.filter(pk=message.pk, extracted_at__isnull=True) \
                .update(extracted_at=clock.now())
            if not claimed:
                return ExtractionResult(str(message.pk), "already_done")
            results = decisions_apply(tenant=tenant, user=user, decisions=decisions, session=session,
                                      source_message=message, memory_ids=ids) if decisions else []
    _session_facts_push(message, results)
    status = "done" if candidates else "skipped"
    return ExtractionResult(str(message.pk), status, [outcome for _, outcome in results],
                            [str(r.pk) for r, _ in results if r is not None])


def _session_facts_push(message: Message, results) -> None:
    """New durable facts join the open session's buffer now, not only at its next rebuild."""
    facts = [{"id": str(r.pk), "text": r.text} for r, _ in results
             if r is not None and r.kind != MemoryKind.EVENT and r.status == "active"]
    if not facts or message.session.state != message.session.State.OPEN:
        return
    from sessions.buffer import buffer_add_facts

    try:
        buffer_add_facts(tenant_id=message.tenant_id, user_id=message.session.user_id,
                         session_id=message.session_id, facts=facts)
    except redis_errors.RedisError:  # the buffer is disposable: its rebuild reads these rows
        log.warning("could not push facts of message %s to the session buffer", message.pk)


def session_extract_pending(*, session_id) -> int:
    """Run extraction for every message of a session not yet extracted (closing a session finishes its work)."""
    done = 0
    for mid in Message.objects.filter(session_id=session_id, extracted_at__isnull=True).order_by("seq") \
            .values_list("pk", flat=True):
        if memory_extract(message_id=mid).status == "done":
            done += 1
    return done

