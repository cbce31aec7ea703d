"""A larger token budget never returns less evidence than a smaller one: everything a smaller budget returns, a larger
one returns too (the turns of its memories and the neighbouring turns shown with them)."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from infra.tokens import count_tokens
from memory.rendering import memories_block
from memory.retrieval import memory_retrieve
from sessions.turn_reads import turns_around

from .memory_support import record_turns

TOPICS = ["invoice export", "staging server", "nightly backup", "schema migration", "rate limiter", "login page",
          "search index", "email reminders", "load time", "test suite"]
WORDS = TOPICS + ["port", "bucket", "deadline", "colleague", "cache", "index", "retry", "budget", "version", "error"]


def _turn(rng: random.Random, i: int) -> str:
    """Short and long turns (lists, code) about overlapping topics, so budgets cut at different places."""
    topic = rng.choice(TOPICS)
    if i % 3:
        return f"The {topic} needs attention: the {rng.choice(WORDS)} looks wrong since {rng.choice(WORDS)} changed."
    lines = [f"Long update {i} on the {topic}."]
    for j in range(rng.randint(8, 20)):
        lines.append(f"- The {rng.choice(WORDS)} of the {rng.choice(TOPICS)} was checked in step {j} and it "
                     f"{rng.choice(['held', 'failed', 'moved', 'improved'])}.")
    lines.append("```\nrun --check " + rng.choice(WORDS).replace(" ", "_") + "\n```")
    return "\n".join(lines)


@pytest.fixture
def history(alice, alice_user):
    alice.memory_ttl_days = {"event": None, "goal": None}
    alice.save()
    rng = random.Random(7)
    for s in range(3):
        record_turns(alice, alice_user, [("user" if i % 2 == 0 else "assistant", _turn(rng, i)) for i in range(8)])
    return alice, alice_user


def _turns(found) -> set[str]:
    return {i for m in found for i in (m.source_message_ids or []) + m.neighbour_message_ids}


@pytest.mark.django_db(transaction=True)
@hsettings(max_examples=25, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), small=st.integers(20, 1500),
       extra=st.integers(1, 1500), k=st.sampled_from([5, 20, 1000]), thread=st.booleans())
def test_a_larger_budget_never_returns_less_evidence(history, words, small, extra, k, thread):
    tenant, user = history
    # A thread question ("how did ... change over time") is ranked one session at a time: the same must hold.
    query = f"How did the {' '.join(words)} change over time?" if thread else " ".join(words)
    found = {}
    for budget in (small, small + extra):
        got = memory_retrieve(tenant=tenant, user=user, query=query, k=k, token_budget=budget,
                              neighbours=turns_around, rewrite=False)
        assert count_tokens(memories_block(got)) <= budget + len(got)  # the block's joins may add a token each
        found[budget] = _turns(got)
    assert found[small] <= found[small + extra]
