"""The model's context for a session's next turn: the buffer and the linked bridges (context) with the user's
long-term memories (memory), composed under one token budget. GET /context and every assistant turn come here."""
from __future__ import annotations

import logging

from django.conf import settings

from context.budget import ContextBudget, as_budget
from context.buffer import buffer_get
from context.composer import TurnContext, context_compose, memory_query
from context.memory_section import profile_shown_ids
from infra.errors import ServiceUnavailable
from memory import retrieval
from memory.profile import profile_select
from sessions.turn_reads import turns_around

from .receipts import receipt_build, receipt_record_later

log = logging.getLogger(__name__)


def memories_for_turn(*, tenant, session, query: str, goal: str, token_budget: int, rewrite: bool,
                      left_out: list | None = None, skip_ids=()) -> tuple[list, str]:
    """The user's memories for this turn, other sessions only, within the memory section's budget; with
    "unavailable" instead of an error when the vector store or the embedder is down (the turn goes on).
    left_out receives what was ranked in but did not fit the budget (for the receipt). With receipts on, the
    receipt's task counts the accesses of what the context included: one hand-off per turn, not two."""
    try:
        found = retrieval.memory_retrieve(tenant=tenant, user=session.user, query=query, goal=goal,
                                k=settings.CONTINUUM_CONTEXT_MEMORY_K, token_budget=token_budget,
                                exclude_session_id=session.pk, rewrite=rewrite, neighbours=turns_around,
                                left_out=left_out, skip_ids=skip_ids,
                                record_access=not settings.CONTINUUM_RECEIPTS)
        return list(found or []), "ok"
    except ServiceUnavailable as exc:
        log.warning("memory retrieval unavailable for session %s: %s", session.pk, exc)
        return [], "unavailable"


def turn_context(*, tenant, session, new_input: str, budget=None, tools: list[dict] | None = None,
                 system_prompt: str | None = None, include_memories: bool = True,
                 rewrite_query: bool = True, prompt_apart: bool = False,
                 resume_from_seq: int | None = None, surface: str = "context",
                 receipt_to: list | None = None) -> TurnContext:
    """Compose the context for the session's next turn. Redis errors propagate (the API answers 503).

    rewrite_query=False skips the LLM query rewrite: a caller whose model can search memories itself (assistant
    mode's recall tool) does not pay one more model round trip before every turn. prompt_apart: see
    context_compose (the system prompt as a stable first message); resume_from_seq: context_compose too.
    surface: who asked (context, assistant, openai, mcp), as the context's receipt records it. receipt_to: the
    receipt is appended there for the caller to hand over (a turn sends it with its extraction task) instead of
    being recorded after commit.
    """
    plan: ContextBudget = as_budget(budget)
    buf = buffer_get(tenant_id=tenant.pk, user_id=session.user_id, session_id=session.pk,
                     db_seq=session.message_seq)
    memories, status, left_out = [], "ok", []
    query = memory_query(new_input, buf)
    # Retrieval fills the memory section's allowance with what the model reads (context.budget).
    cap = plan.retrieval_allowance()
    # The standing profile is read by kind, not by the query: an instruction holds whatever the turn is about.
    profile = profile_select(tenant=tenant, user=session.user) if include_memories else []
    if include_memories and cap > 0 and query:
        memories, status = memories_for_turn(tenant=tenant, session=session, query=query, goal=buf.goal,
                                             token_budget=cap, rewrite=rewrite_query, left_out=left_out,
                                             skip_ids=profile_shown_ids(profile, limit_tokens=plan.profile_limit()))
    ctx = context_compose(tenant=tenant, session=session, new_input=new_input, budget=plan, tools=tools,
                          system_prompt=system_prompt, buffer=buf, memories=memories, memory_status=status,
                          prompt_apart=prompt_apart, profile=profile, resume_from_seq=resume_from_seq)
    if settings.CONTINUUM_RECEIPTS:
        receipt = receipt_build(tenant=tenant, session=session, surface=surface, query=query, ctx=ctx,
                                retrieved=memories, left_out=left_out, profile=profile)
        if receipt_to is not None:
            receipt_to.append(receipt)
        else:
            receipt_record_later(receipt)
    return ctx
