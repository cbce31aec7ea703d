"""Fixtures for the orchestration tests: the sessions tests' small deterministic embedder, so no model loads."""
from __future__ import annotations

import pytest

from tests.sessions.conftest import WordHashEmbedder


@pytest.fixture(autouse=True)
def word_embedder():
    from infra.embedder import set_embedder

    embedder = WordHashEmbedder()
    set_embedder(embedder)
    yield embedder
    set_embedder(None)
