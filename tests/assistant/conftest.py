"""Fixtures for assistant mode: an LLM configured at a fake base URL and answered by a respx-scripted endpoint, and
the service itself live (uvicorn in a thread) for real clients."""
from __future__ import annotations

import socket
import threading
import time

import openai
import pytest
import respx
import uvicorn

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


@pytest.fixture
def live_asgi(transactional_db):
    """uvicorn serving the project's ASGI application in a thread of this process, on the test database (Django
    with the request ids config.asgi adds; /mcp is served by tests/conftest.py's asgi_server)."""
    from django.core.asgi import get_asgi_application

    from infra.request_id import RequestIdMiddleware

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(RequestIdMiddleware(get_asgi_application()), log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)
    sock.close()


@pytest.fixture
def server(llm, live_asgi):
    """The live server with the scripted model; requests to the server itself pass respx through."""
    llm.router.route(host="127.0.0.1").pass_through()
    return live_asgi


def client_for(base_url: str, tenant, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key=tenant.plain_key, max_retries=0, timeout=120, **kwargs)
