"""The deployed ASGI application (config.asgi): /mcp goes to the MCP server, every other path to Django, on one
socket."""
from __future__ import annotations

import httpx2
import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_django_routes_are_served_beside_mcp(asgi_server, alice):
    assert httpx2.get(f"{asgi_server}/healthz", timeout=30).status_code == 200
    resp = httpx2.get(f"{asgi_server}/api/v1/users", headers={"Authorization": f"Bearer {alice.plain_key}"},
                      timeout=30)
    assert resp.status_code == 200 and resp.json()["results"] == []


def test_only_the_mcp_path_reaches_the_mcp_server(asgi_server):
    mcp = httpx2.post(f"{asgi_server}/mcp", json={}, timeout=30)
    assert mcp.status_code == 401 and mcp.json()["error"]["code"] == "invalid_api_key"
    assert httpx2.post(f"{asgi_server}/mcpx", json={}, timeout=30).status_code == 404  # Django's, not the MCP's
