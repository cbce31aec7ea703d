"""A live server for the MCP tests: uvicorn serving the deployed ASGI application (config.asgi: Django with /mcp
beside it) on a real socket in a thread of this process, on the test database."""
from __future__ import annotations

import socket
import threading
import time

import pytest
import uvicorn


@pytest.fixture(scope="session")
def asgi_server(django_db_setup):
    """One server for the run: config.asgi builds one application, and the SDK's session manager in it can run
    (its ASGI lifespan) only once."""
    from django.db import connections

    from config.asgi import application

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(application, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)
    sock.close()
    # The request threads keep their database connections open (that is their point); close them before the test
    # database is dropped.
    for executor in application._free:
        executor.submit(connections.close_all).result()


@pytest.fixture
def mcp_url(asgi_server):
    return f"{asgi_server}/mcp"
