"""The MCP tests' endpoint on the live server of the deployed ASGI application (tests/conftest.py: asgi_server)."""
from __future__ import annotations

import pytest


@pytest.fixture
def mcp_url(asgi_server):
    return f"{asgi_server}/mcp"
