"""Messages extracted and persisted: memory.extraction computes each message's candidates and verifies them against
what the user has; this writes the decisions (a turn's messages together: one embedding call, one transaction).

Idempotent per message. A Redis lock keeps two workers from doing the same LLM work; the persist transaction
claims the message through the caller's `claim` (a conditional UPDATE of the stored message), so only one run
ever writes, and memory ids derived from (message, position) make any rerun land on the same rows and points.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from infra.embedder import get_embedder
from infra.redis_client import Keys, held_lock

from ..extraction.classify import FACT_ROLES
from ..extraction.pipeline import candidates_of_message
from ..extraction.verify import candidates_verify
from ..models import MemoryRecord
from ..outbox import outbox_enqueue
from ..sources import SourceMessage
from ..user_lock import user_memory_lock
from ..webhook_events import memory_webhooks_read_once
from .decisions import decisions_apply
from .records import history_rows_together, memory_id_for


@dataclass
class ExtractionResult:
    message_id: str
    status: str  # done | already_done | skipped | busy | missing
    outcomes: list[str] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)
    records: list[MemoryRecord] = field(default_factory=list)


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


def _extract_locked(tenant, user, items: list[tuple[int, SourceMessage, Callable[[], bool]]], *,
                    allow_llm_failure: bool) -> dict[int, ExtractionResult]:
    found = {i: candidates_of_message(tenant, message, allow_llm_failure=allow_llm_failure) for i, message, _ in items}
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
