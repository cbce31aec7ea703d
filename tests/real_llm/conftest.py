"""The real-model tier: tests that talk to a running local llama-server (scripts/local_model.py start).

Where it is looked for: REAL_LLM_BASE_URL, else the local model's default port. Unavailable means skipped in a plain
developer run, and a failure under CI (CI=true), so the tier can never pass by silently not running there.
"""
from __future__ import annotations

import json
import os
import urllib.request

import pytest

from tests.live_server import serving

DEFAULT_BASE_URL = f"http://127.0.0.1:{os.environ.get('LOCAL_MODEL_PORT', '8090')}/v1"


def _base_url() -> str:
    return os.environ.get("REAL_LLM_BASE_URL") or DEFAULT_BASE_URL


def _served_model(base_url: str) -> str | None:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=3) as resp:
            return json.load(resp)["data"][0]["id"]
    except Exception:
        return None


@pytest.fixture(scope="session")
def real_model_id() -> str:
    model = _served_model(_base_url())
    if model is None:
        reason = (f"no local model answers at {_base_url()} (start one with `python scripts/local_model.py start`; "
                  "./scripts/test does it when the model is set up)")
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the real-model tier: {reason}")
        pytest.skip(reason)
    return model


class CallCounter:
    """Counts the model calls a test makes (every chat call goes through infra.llm.chat_completion_send)."""

    def __init__(self):
        self.calls: list[dict] = []

    def wrap(self, send):
        def counted(client, body, **kwargs):
            self.calls.append(body)
            return send(client, body, **kwargs)
        return counted


@pytest.fixture
def real_llm(settings, real_model_id, monkeypatch):
    """Continuum configured for the real local model, with timeouts that fit a CPU model; yields a call counter."""
    from infra import llm, llm_chat
    from infra.local_profile import profile_apply

    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_API_KEY = _base_url(), real_model_id, ""
    settings.LLM_FAST_MODEL = ""
    profile_apply(settings)  # configured as scripts/run configures the local model
    llm._client.cache_clear()
    counter = CallCounter()
    monkeypatch.setattr(llm, "chat_completion_send", counter.wrap(llm.chat_completion_send))
    monkeypatch.setattr(llm_chat, "chat_completion_send", counter.wrap(llm_chat.chat_completion_send))
    yield counter
    llm._client.cache_clear()



@pytest.fixture
def live_asgi(transactional_db):
    """uvicorn serving the project's ASGI application in a thread of this process, on the test database."""

    from django.core.asgi import get_asgi_application

    with serving(get_asgi_application()) as url:
        yield url
