"""Fixtures for assistant mode: an LLM configured at a fake base URL and answered by a respx-scripted endpoint, and
the service itself live (uvicorn in a thread) for real clients."""
from __future__ import annotations

import openai
import pytest

from tests.live_server import serving

from .scripted_llm import ScriptedLLM, llm_scripted


@pytest.fixture
def llm(settings):
    """Configure the LLM and script it: `llm.add(reply, ...)`; `llm.requests` holds what the model was sent."""
    with llm_scripted(settings, ScriptedLLM()) as scripted:
        yield scripted


@pytest.fixture
def live_asgi(transactional_db):
    """uvicorn serving the project's ASGI application in a thread of this process, on the test database (Django
    with the request ids config.asgi adds; /mcp is served by tests/conftest.py's asgi_server)."""
    from django.core.asgi import get_asgi_application

    from infra.request_id import RequestIdMiddleware

    with serving(RequestIdMiddleware(get_asgi_application())) as url:
        yield url


@pytest.fixture
def server(llm, live_asgi):
    """The live server with the scripted model; requests to the server itself pass respx through."""
    llm.router.route(host="127.0.0.1").pass_through()
    return live_asgi


def client_for(base_url: str, tenant, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key=tenant.plain_key, max_retries=0, timeout=120, **kwargs)
