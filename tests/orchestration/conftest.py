"""Fixtures for the orchestration tests: the sessions tests' small deterministic embedder, so no model loads, and
the recorders of the tasks a flow hands on (extract_calls, bridge_calls)."""
from __future__ import annotations

from tests.sessions.conftest import bridge_calls, extract_calls, word_embedder  # noqa: F401
