"""A message through the pipeline: classify → extract → filter secrets → verify → prioritize → persist (a turn's
messages together: one embedding call, one transaction).

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
from infra.sentences import sentences

from ..actions import decisions_apply, history_rows_together, memory_id_for
from ..models import MemoryKind, MemoryRecord, SourceType
from ..outbox import outbox_enqueue
from ..sources import SourceMessage
from ..user_lock import user_memory_lock
from ..webhook_events import memory_webhooks_read_once
from .candidate import Candidate
from .classify import FACT_ROLES, extracted_roles, message_triage
from .forget_requests import is_forget_request
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
    if message.role == "user":
        # "Please forget my favourite band" asks something of the memory (orchestration/forgetting.py honours it);
        # it is not something to remember.
        said = sentences(clean)
        kept = [s for s in said if not is_forget_request(s)]
        if len(kept) < len(said):
            clean = " ".join(kept)
            if not clean:
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


def memory_extract_many(*, tenant, user, items: list[tuple[SourceMessage, Callable[[], bool]]],
                        allow_llm_failure: bool = False) -> list[ExtractionResult]:
    """Extract recorded messages of one user, together when there are several (a turn: the input and the replies to
    it): one hold of the user's memories, one embedding call and one transaction instead of one each. One result per
    item, in order. Safe to call any number of times: each message is claimed on its own (`claim()` runs inside the
    persist transaction and returns False when another run already extracted it), and only the run that claims it
    writes.

    At most one item may be of a role that states facts (FACT_ROLES): verifying a message's facts reads the
    memories already stored, which would not yet hold the facts of another message of the same batch. The other
    roles' memories are episodes, created without reading anything."""
    if sum(source.role in FACT_ROLES for source, _ in items) > 1:
        raise ValueError("memory_extract_many: at most one message of a fact-stating role per call")
    with contextlib.ExitStack() as held_all:
        held = [held_all.enter_context(held_lock(Keys.extract_lock(tenant.pk, user.pk, source.id),
                                                 timeout=settings.MEMORY_EXTRACTION_LOCK_SECONDS))
                for source, _ in items]
        results = {i: ExtractionResult(source.id, "busy") for i, ((source, _), ok) in enumerate(zip(items, held))
                   if not ok}
        mine = [(i, *item) for i, item in enumerate(items) if i not in results]
        results.update(_extract_locked(tenant, user, mine, allow_llm_failure=allow_llm_failure))
    return [results[i] for i in range(len(items))]


def _candidates_of(tenant, message: SourceMessage, *, allow_llm_failure: bool) -> list[Candidate]:
    if message.role not in extracted_roles(tenant):
        message = replace(message, content="")  # queued before the tenant stopped keeping these turns: claim only
    use_llm = llm_configured() and message.role in FACT_ROLES
    try:
        return candidates_for_message(message, use_llm=use_llm)
    except AppError as exc:
        if exc.retryable and not allow_llm_failure:
            raise  # an outage: the task retries with backoff
        # A refusal will not heal on retry, and on the last attempt an outage no longer blocks the message.
        log.warning("LLM pass failed for message %s (%s): rules only", message.id, exc.code)
        return candidates_for_message(message, use_llm=False)


def _extract_locked(tenant, user, items: list[tuple[int, SourceMessage, Callable[[], bool]]], *,
                    allow_llm_failure: bool) -> dict[int, ExtractionResult]:
    found = {i: _candidates_of(tenant, message, allow_llm_failure=allow_llm_failure) for i, message, _ in items}
    texts = [c.text for i, _, _ in items for c in found[i]]
    flat = iter(get_embedder().embed(texts) if texts else [])
    vectors = {i: [next(flat) for _ in found[i]] for i, _, _ in items}
    out: dict[int, ExtractionResult] = {}
    # Nothing to write but the claims (assistant turns of chatter): no other writer can be affected.
    with user_memory_lock(tenant_id=tenant.pk, user_id=user.pk) if texts else contextlib.nullcontext():
        decisions = {i: candidates_verify(tenant=tenant, user=user, candidates=found[i], vectors=vectors[i],
                                          stated_at=message.created_at, who=message.speaker) if found[i] else []
                     for i, message, _ in items}
        points: list[str] = []  # every message's vector writes, queued once
        with transaction.atomic(), memory_webhooks_read_once(), history_rows_together():
            for i, message, claim in items:
                if not claim():
                    out[i] = ExtractionResult(message.id, "already_done")
                    continue
                ids = [memory_id_for(message.id, n) for n in range(len(decisions[i]))]
                # The claim just succeeded in this transaction, so no earlier run wrote these ids.
                results = decisions_apply(tenant=tenant, user=user, decisions=decisions[i], source=message,
                                          memory_ids=ids, first_run=True, vector_writes=points) \
                    if decisions[i] else []
                records = [r for r, _ in results if r is not None]
                out[i] = ExtractionResult(message.id, "done" if found[i] else "skipped",
                                          [outcome for _, outcome in results], [str(r.pk) for r in records], records)
            if points:
                outbox_enqueue(tenant_id=str(tenant.pk), memory_ids=points)
    return out
