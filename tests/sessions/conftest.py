"""Fixtures for the sessions tests: a small deterministic embedder, so no model loads."""
from __future__ import annotations

import hashlib
import math
import re

import pytest

_STOP = frozenset("a an the to of for in on at and or is i my me we you it this that with be".split())


class WordHashEmbedder:
    """Bag of words hashed into 384 dimensions: texts sharing words are close, others are not."""

    model_name = "word-hash"
    dim = 384

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dim
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                if word in _STOP:
                    continue
                word = word[:-1] if word.endswith("s") and len(word) > 3 else word
                vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append([v / norm for v in vec])
        return out


@pytest.fixture(autouse=True)
def word_embedder():
    from infra.embedder import set_embedder

    embedder = WordHashEmbedder()
    set_embedder(embedder)
    yield embedder
    set_embedder(None)


@pytest.fixture
def extract_calls(monkeypatch):
    """Extraction is another task's job; here we only record what the sessions code hands it."""
    from orchestration.tasks import message_extract_task as memory_extract_task

    calls: list[str] = []
    monkeypatch.setattr(memory_extract_task, "delay", lambda tenant_id, mid: calls.append(mid))
    return calls


@pytest.fixture
def bridge_calls(monkeypatch):
    """Record bridge tasks enqueued on close instead of sending them to a broker nobody consumes here."""
    from orchestration.tasks import session_finish_task as bridge_write_task

    calls: list[str] = []
    monkeypatch.setattr(bridge_write_task, "delay", lambda tenant_id, sid: calls.append(sid))
    return calls
