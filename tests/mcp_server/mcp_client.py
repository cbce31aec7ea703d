"""The SDK's own client against the live server: Streamable HTTP transport and ClientSession, one connection per
call, authenticated like any MCP client configured with a URL and headers."""
from __future__ import annotations

import asyncio
import json

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


def mcp_run(url: str, script, *, key: str | None, user: str | None = "ada-1"):
    """Connect with the SDK's Streamable HTTP client as (key, user), initialize, and run `script(session)`."""
    headers = {}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if user is not None:
        headers["X-User-Id"] = user

    async def main():
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await script(session)

    return asyncio.run(main())


def call(url: str, tool: str, arguments: dict | None = None, *, key: str, user: str = "ada-1"):
    """One tool call in a fresh connection; returns the SDK's CallToolResult."""
    async def script(session):
        return await session.call_tool(tool, arguments or {})

    return mcp_run(url, script, key=key, user=user)


def structured(result) -> dict:
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content  # text and structure say the same
    return result.structured_content


def error_text(result) -> str:
    assert result.is_error
    return result.content[0].text


def client_run(url: str, script, *, key: str, user: str = "ada-1", mode: str = "auto"):
    """The SDK's high-level Client (by default it probes for the 2026-07-28 protocol, one self-contained POST per
    request, and falls back to the initialize handshake), running `script(client)`."""
    from mcp import Client

    async def main():
        headers = {"Authorization": f"Bearer {key}", "X-User-Id": user}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                return await script(client)

    return asyncio.run(main())
