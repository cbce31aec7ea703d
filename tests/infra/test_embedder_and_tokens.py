"""The local embedder and the token counter work offline (HF_HUB_OFFLINE=1, no tiktoken download)."""
from __future__ import annotations

import math
import os

import pytest

from infra.embedder import LocalEmbedder, get_embedder
from infra.tokens import count_message_tokens, count_tokens, truncate_to_tokens


def _cos(a, b):
    return sum(x * y for x, y in zip(a, b))


@pytest.fixture(scope="module")
def embedder():
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    return get_embedder()


def test_local_embedder_loads_offline_and_gives_384_d_unit_vectors(embedder):
    assert isinstance(embedder, LocalEmbedder)
    vectors = embedder.embed(["I fly to Newark on Friday.", "My dog is called Rex."])
    assert len(vectors) == 2
    for v in vectors:
        assert len(v) == 384 == embedder.dim
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, abs_tol=1e-4)
    assert embedder.embed([]) == []


def test_similar_sentences_are_closer_than_unrelated_ones(embedder):
    hiking, trekking, invoice = embedder.embed([
        "I love hiking in the mountains.",
        "Mountain trekking is my favourite hobby.",
        "The invoice total came to 42 dollars.",
    ])
    assert _cos(hiking, trekking) > _cos(hiking, invoice) + 0.3


def test_embedding_is_deterministic(embedder):
    a, b = embedder.embed(["same text", "same text"])
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5


def test_token_counter_works_offline():
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    long = "word " * 500
    assert 450 <= count_tokens(long) <= 550
    cut = truncate_to_tokens(long, 20)
    assert count_tokens(cut) <= 20 and cut.endswith("…")
    assert truncate_to_tokens("short", 20) == "short"
    assert truncate_to_tokens("anything", 0) == ""


def test_message_tokens_include_framing():
    messages = [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": "hi"}]
    assert count_message_tokens(messages) == 3 + (4 + 2) + (4 + 1)
