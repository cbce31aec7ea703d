"""A message through the computing half of the pipeline: classify → extract → filter secrets → screen → prioritize.
Nothing here writes; memory.actions.extract verifies the candidates and persists them.
"""
from __future__ import annotations

import logging
from dataclasses import replace

from django.conf import settings

from infra.errors import AppError
from infra.llm import llm_configured
from infra.secrets import REDACTED, secrets_redact
from infra.sentences import sentences

from ..models import MemoryKind, SourceType
from ..sources import SourceMessage
from .candidate import Candidate
from .classify import FACT_ROLES, extracted_roles, message_triage
from .forget_requests import is_forget_request
from .injection import candidates_screen, injection_screen
from .passages import passages_split
from .rules import resolve_dates, rules_extract
from .statements import statement_normalize

log = logging.getLogger(__name__)

EVENT_CONFIDENCE = 0.7  # a verbatim turn: certain that it was said, not that it stays true


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
    candidates += candidates_screen(rules_extract(clean, who=who, reference=message.created_at,
                                                  with_project_facts=settings.MEMORY_PROJECT_FACTS), who=who)
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


def candidates_of_message(tenant, message: SourceMessage, *, allow_llm_failure: bool) -> list[Candidate]:
    """A stored message's candidates as the tenant's settings and the LLM's health allow: a role the tenant no
    longer extracts gives none, and an LLM that refuses (or is out on the last attempt) leaves the rules' ones."""
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
