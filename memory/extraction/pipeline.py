"""One message through the pipeline: classify → extract → filter secrets → verify → prioritize → persist.

Idempotent per message. A Redis lock keeps two workers from doing the same LLM work; the persist transaction
claims the message through the caller's `claim` (a conditional UPDATE of the stored message), so only one run
ever writes, and memory ids derived from (message, position) make any rerun land on the same rows and points.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db import transaction

from infra.embedder import get_embedder
from infra.errors import AppError
from infra.llm import llm_configured
from infra.redis_client import Keys, held_lock
from infra.secrets import REDACTED, secrets_redact

from ..actions import decisions_apply, memory_id_for
from ..models import MemoryKind, MemoryRecord, SourceType
from ..sources import SourceMessage
from ..user_lock import user_memory_lock
from .candidate import Candidate
from .classify import FACT_ROLES, extracted_roles, message_triage
from .injection import candidates_screen, injection_screen
from .passages import passages_split
from .rules import resolve_dates, rules_extract
from .statements import statement_normalize
from .verify import candidates_verify

log = logging.getLogger(__name__)

EVENT_CONFIDENCE = 0.7  # a verbatim turn: certain that it was said, not that it stays true


@dataclass
class ExtractionResult:
    message_id: str
    status: str  # done | already_done | skipped | busy | missing
    outcomes: list[str] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)
    records: list[MemoryRecord] = field(default_factory=list)


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


def candidates_for_message(message: SourceMessage, *, use_llm: bool) -> list[Candidate]:
    """Every candidate of one message, secrets already removed. Pure apart from the optional LLM calls."""
    triage = message_triage(text=message.content, role=message.role)
    if not triage.keep:
        return []
    # Secrets go before anything else sees the text: rules, the LLM, the event memory, the payload.
    clean = secrets_redact(triage.text).text
    if not clean.replace(REDACTED, "").strip(" .,:;-"):
        return []
    who = message.speaker
    # Then what is said to the assistant rather than about the user: no extractor, prompt or memory sees it.
    screening = injection_screen(clean, who=who)
    if screening.found:
        log.info("message %s: %d sentence(s) addressed to the assistant dropped (%s)", message.id,
                 len(screening.dropped), ", ".join(sorted(set(screening.dropped))))
        clean = screening.text
        if not clean.replace(REDACTED, "").strip(" .,:;-"):
            return []
    candidates = episodes_for_message(message, clean)
    if message.role != "user":
        # What the assistant said is episodic context the user may ask about, never a fact about the user.
        return _prioritize(candidates)
    # The rules only ever see screened sentences; their rewrites are checked as well, as the LLM's are.
    candidates += candidates_screen(rules_extract(clean, who=who, reference=message.created_at), who=who)
    if use_llm:
        from .llm_extract import EXTRACTOR_VERSION, llm_extract

        previous = message.context_before() if message.context_before is not None else ""
        context = injection_screen(secrets_redact(previous[:1000]).text, who=who).text
        for c in llm_extract(clean, who=who, context=context):
            c.text = secrets_redact(c.text).text
            c.value = secrets_redact(c.value).text
            c.metadata["extractor_version"] = EXTRACTOR_VERSION
            candidates.append(c)
    return _prioritize(_statements_only(candidates, who=who))


def _statements_only(candidates: list[Candidate], *, who: str) -> list[Candidate]:
    """Every candidate but the events as a third-person statement about the user; a fragment with no subject or
    predicate (an implicit pass's "aisle seats") is dropped."""
    out = []
    for c in candidates:
        if c.kind != MemoryKind.EVENT:
            text = statement_normalize(c.text, who=who)
            if text is None:
                log.info("extraction dropped a fragment with no subject or predicate: %r", c.text[:80])
                continue
            c.text = text
        out.append(c)
    return out


def episodes_for_message(message: SourceMessage, clean: str) -> list[Candidate]:
    """The message's own words as episodic memories: one, or one per passage of a long message, each with the dates
    its words refer to resolved against when it was said."""
    source_type = SourceType.USER_STATED if message.role == "user" else SourceType.ASSISTANT
    passages = passages_split(clean)
    out = []
    for i, passage in enumerate(passages):
        c = Candidate(MemoryKind.EVENT, event_text(who=message.speaker, text=passage), source_type=source_type,
                      confidence=EVENT_CONFIDENCE, importance=0.4, extractor="event")
        if len(passages) > 1:
            c.metadata["passage"] = i
            c.metadata["passages"] = len(passages)
        dates = resolve_dates(passage, message.created_at)
        if dates:
            c.metadata["dates"] = dates
        out.append(c)
    return out


def memory_extract(*, tenant, user, source: SourceMessage, claim: Callable[[], bool],
                   allow_llm_failure: bool = False) -> ExtractionResult:
    """Extract the memories of one recorded message. Safe to call any number of times.

    `claim()` runs inside the persist transaction and returns False when another run already extracted the
    message; only the run that claims it writes."""
    with held_lock(Keys.extract_lock(tenant.pk, user.pk, source.id),
                   timeout=settings.MEMORY_EXTRACTION_LOCK_SECONDS) as held:
        if not held:
            return ExtractionResult(source.id, "busy")
        return _extract_locked(tenant, user, source, claim, allow_llm_failure=allow_llm_failure)


def _extract_locked(tenant, user, message: SourceMessage, claim, *, allow_llm_failure: bool) -> ExtractionResult:
    if message.role not in extracted_roles(tenant):
        message = replace(message, content="")  # queued before the tenant stopped keeping these turns: claim only
    use_llm = llm_configured() and message.role in FACT_ROLES
    try:
        candidates = candidates_for_message(message, use_llm=use_llm)
    except AppError as exc:
        if exc.retryable and not allow_llm_failure:
            raise  # an outage: the task retries with backoff
        # A refusal will not heal on retry, and on the last attempt an outage no longer blocks the message.
        log.warning("LLM pass failed for message %s (%s): rules only", message.id, exc.code)
        candidates = candidates_for_message(message, use_llm=False)
    vectors = get_embedder().embed([c.text for c in candidates]) if candidates else []
    # Nothing to write but the claim (an assistant turn, chatter): no other writer can be affected.
    with user_memory_lock(tenant_id=tenant.pk, user_id=user.pk) if candidates else contextlib.nullcontext():
        decisions = candidates_verify(tenant=tenant, user=user, candidates=candidates, vectors=vectors,
                                      stated_at=message.created_at) if candidates else []
        ids = [memory_id_for(message.id, i) for i in range(len(decisions))]
        with transaction.atomic():
            if not claim():
                return ExtractionResult(message.id, "already_done")
            # The claim just succeeded in this transaction, so no earlier run wrote these ids.
            results = decisions_apply(tenant=tenant, user=user, decisions=decisions, source=message,
                                      memory_ids=ids, first_run=True) if decisions else []
    status = "done" if candidates else "skipped"
    records = [r for r, _ in results if r is not None]
    return ExtractionResult(message.id, status, [outcome for _, outcome in results], [str(r.pk) for r in records],
                            records)
