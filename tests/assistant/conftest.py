"""Fixtures for assistant mode: an LLM configured at a fake base URL and answered by a respx-scripted endpoint."""
from __future__ import annotations

import pytest
import respx

from .scripted_llm import LLM_BASE_URL, ScriptedLLM


def _clear_llm_client():
    from infra import llm

    llm._client.cache_clear()


@pytest.fixture
def llm(settings):
    """Configure the LLM and script it: `llm.add(reply, ...)`; `llm.requests` holds what the model was sent."""
    settings.LLM_BASE_URL = LLM_BASE_URL
    settings.LLM_MODEL = "test-model"
    settings.LLM_API_KEY = "test-key"
    settings.LLM_MAX_RETRIES = 0
    _clear_llm_client()
    scripted = ScriptedLLM()
    with respx.mock(assert_all_called=False) as router:
        router.post(f"{LLM_BASE_URL}/chat/completions").mock(side_effect=scripted)
        scripted.router = router
        yield scripted
    _clear_llm_client()
    assert not scripted.errors, scripted.errors
