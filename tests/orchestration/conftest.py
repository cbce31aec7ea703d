"""Fixtures for the orchestration tests: the sessions tests' small deterministic embedder, so no model loads, and
the recorders of the tasks a flow hands on (extract_calls, bridge_calls)."""
from __future__ import annotations

import pytest

from tests.sessions.conftest import WordHashEmbedder, bridge_calls, extract_calls  # noqa: F401


@pytest.fixture(autouse=True)
def word_embedder():
    from infra.embedder import set_embedder

    embedder = WordHashEmbedder()
    set_embedder(embedder)
    yield embedder
    set_embedder(None)
