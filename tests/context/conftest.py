"""Fixtures for the context tests: the sessions tests' deterministic embedder and task recorders (no model loads,
no broker is needed)."""
from tests.sessions.conftest import bridge_calls, extract_calls, word_embedder  # noqa: F401
