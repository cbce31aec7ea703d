"""Remembering what the user (or the assistant's remember tool) states: split into the statements it makes,
refused when it is only a secret or tells the assistant what to do, then checked against what the user already has
(a near-duplicate reinforces, a new value supersedes).
"""

from __future__ import annotations

import logging
import re

from django.db import transaction

from infra.embedder import get_embedder
from infra.secrets import secrets_redact
from infra.support import SUPPORTED_SHARE, support_share
from tenants.models import EndUser, Tenant

from ..extraction.candidate import Candidate, slot_of, subject_normalize
from ..extraction.injection import candidate_instruction_kinds
from ..extraction.rules import rules_extract
from ..extraction.statements import statement_normalize
from ..extraction.verify import candidates_verify
from ..models import MemoryKind, MemoryRecord
from ..user_lock import user_memory_lock
from .create import GivenMemory, given_redacted
from .decisions import decisions_apply

log = logging.getLogger(__name__)


INCOMPLETE = "incomplete"
# What a caller hears when a memory is refused for lacking a subject or a predicate.
INCOMPLETE_REASON = (
    "a memory is one statement about the user, with the user as its subject and a verb "
    "('Dana prefers aisle seats'); a fragment such as 'aisle seats' says nothing on its own"
)


def _statements(text: str, *, kind: str, who: str, subject: str, value: str) -> list[tuple[str, str, str, str]]:
    """(kind, text, subject, value) of each statement the text makes. First-person text goes through the rules
    extraction runs on messages, so "I prefer aisle seats, and never United" becomes the statements extraction
    itself makes of those words (and lands on the same memories); otherwise the text is one statement, in the
    third person, or none when it has no subject or predicate."""
    if re.search(r"\b(?:I|my|me|I'm|I've)\b", text):
        found = [c for c in rules_extract(text, who=who) if c.kind != MemoryKind.GOAL or kind == MemoryKind.GOAL]
        # The rules' statements stand for the text when they say most of it; otherwise part would be lost.
        if found and support_share(text, [c.text for c in found], ignore=tuple(who.split())) >= SUPPORTED_SHARE:
            return [(c.kind, c.text, c.subject, c.value) for c in found]
    normalized = statement_normalize(text, who=who)
    return [(kind, normalized, subject, value)] if normalized else []


def memory_remember(*, tenant: Tenant, user: EndUser, **statement) -> tuple[MemoryRecord | None, str]:
    """Store a memory unless the user already has it: a near-duplicate is reinforced, a new value for the same
    subject supersedes the old one. Takes memory_remember_statements' arguments and returns (record, outcome) of the
    first statement: created | reinforced | superseded | secret | refused_instruction (the text tells the assistant
    what to do instead of saying something about the user; nothing is stored, so a fooled model cannot plant an
    instruction for later turns) | incomplete (no subject or predicate)."""
    return memory_remember_statements(tenant=tenant, user=user, **statement)[0]


def memory_remember_statements(
    *, tenant: Tenant, user: EndUser, importance: float = 0.6, **given
) -> list[tuple[MemoryRecord | None, str]]:
    """memory_remember for every statement the text (GivenMemory's fields) makes, in the third person: one
    (record, outcome) each, or one (None, reason) when nothing is stored."""
    given = GivenMemory(**given)
    redaction, only_secret = given_redacted(tenant=tenant, user=user, given=given)
    if only_secret:
        return [(None, "secret")]
    kind, subject, value, source = given.kind, given.subject, given.value, given.source
    name = (user.display_name or "").strip()
    if candidate_instruction_kinds(Candidate(kind, redaction.text, subject=subject, value=value), who=name):
        log.info("remember refused for user %s: an instruction", user.pk)
        return [(None, "refused_instruction")]
    who = name or "The user"
    candidates = [
        Candidate(s_kind, s_text, source_type=given.source_type, subject=slot_of(s_subject, who), value=s_value,
                  confidence=given.confidence, importance=importance, extractor="remember")
        for s_kind, s_text, s_subject, s_value in _statements(
            redaction.text, kind=kind, who=who, subject=subject_normalize(subject), value=secrets_redact(value).text
        )
    ]
    if not candidates:
        return [(None, INCOMPLETE)]
    # Refused whole, not trimmed: the caller (a model) hears why and can store the plain fact on its own.
    refused = sorted({k for c in candidates for k in candidate_instruction_kinds(c, who=name)})
    if refused:
        log.info("remember refused for user %s: %s", user.pk, ", ".join(refused))
        return [(None, "refused_instruction")]
    vectors = get_embedder().embed([c.text for c in candidates])
    with user_memory_lock(tenant_id=tenant.pk, user_id=user.pk):
        decisions = candidates_verify(tenant=tenant, user=user, candidates=candidates, vectors=vectors,
                                      stated_at=source.created_at if source is not None else None)
        with transaction.atomic():
            return decisions_apply(tenant=tenant, user=user, decisions=decisions, source=source,
                                   session_id=given.session_id, actor_type=given.actor_type, actor_id=given.actor_id)
