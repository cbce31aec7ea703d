"""/mcp answers by the transport and JSON-RPC specs: no server-held stream on a stateless server (GET is 405),
Invalid Request (-32600, id null) for a request whose id is not a string or an integer, and Invalid Params
(-32602) for a call of an unknown tool or params that are not a CallToolRequest's. A tool's own argument checks
stay tool execution errors (isError), as the 2025-11-25 spec asks, so a model can read them and retry."""
from __future__ import annotations

import httpx2
import pytest
from mcp import MCPError

from .mcp_client import mcp_run

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = "application/json, text/event-stream"
INVALID_REQUEST, INVALID_PARAMS = -32600, -32602


def _headers(tenant, **extra) -> dict:
    return {"Authorization": f"Bearer {tenant.plain_key}", "X-User-Id": "ada-1", "Accept": ACCEPT,
            "MCP-Protocol-Version": "2025-11-25", **extra}


def rpc(url, tenant, body) -> httpx2.Response:
    return httpx2.post(url, json=body, headers=_headers(tenant), timeout=30)


def test_get_is_405_at_once_instead_of_an_endless_stream(mcp_url, alice):
    # A server-held SSE stream would keep this read waiting until the timeout.
    resp = httpx2.get(mcp_url, headers=_headers(alice, Accept="text/event-stream"), timeout=10)
    assert resp.status_code == 405
    assert "POST" in resp.headers["Allow"] and "GET" not in resp.headers["Allow"]
    assert resp.json()["error"]["code"] == INVALID_REQUEST and resp.json()["id"] is None


def test_get_without_a_key_is_still_401(mcp_url):
    assert httpx2.get(mcp_url, headers={"Accept": "text/event-stream"}, timeout=10).status_code == 401


@pytest.mark.parametrize("bad_id", [{"a": 1}, [1], True, 1.5])
def test_a_request_whose_id_is_not_a_string_or_integer_is_an_invalid_request(mcp_url, alice, bad_id):
    resp = rpc(mcp_url, alice, {"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"})
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == INVALID_REQUEST and body["error"]["message"]


@pytest.mark.parametrize("body", [[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], "tools/list", 7,
                                  {"id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 1, "method": 5}])
def test_a_body_that_is_no_json_rpc_message_is_an_invalid_request(mcp_url, alice, body):
    resp = rpc(mcp_url, alice, body)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["code"] == INVALID_REQUEST and resp.json()["id"] is None


def test_valid_ids_are_answered_with_the_same_id(mcp_url, alice):
    for request_id in ("abc", 0, 42):
        resp = rpc(mcp_url, alice, {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
        assert resp.status_code == 200 and resp.json()["id"] == request_id
        assert {t["name"] for t in resp.json()["result"]["tools"]} >= {"search_memories", "remember"}


def test_calling_an_unknown_tool_is_an_invalid_params_error(mcp_url, alice):
    resp = rpc(mcp_url, alice, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                "params": {"name": "drop_everything", "arguments": {}}})
    body = resp.json()
    assert "result" not in body and body["id"] == 3
    assert body["error"]["code"] == INVALID_PARAMS and "drop_everything" in body["error"]["message"]


def test_the_sdk_client_sees_an_unknown_tool_as_a_protocol_error(mcp_url, alice):
    async def script(session):
        return await session.call_tool("drop_everything", {})

    with pytest.raises(BaseException) as raised:
        mcp_run(mcp_url, script, key=alice.plain_key)
    errors = [raised.value]
    while isinstance(errors[0], BaseExceptionGroup):
        errors = [leaf for group in errors for leaf in group.exceptions]
    assert any(isinstance(e, MCPError) and e.code == INVALID_PARAMS for e in errors), errors


@pytest.mark.parametrize("params", [None, {}, {"arguments": {}}, {"name": 5}, {"name": "search_memories",
                                                                               "arguments": "query=seats"}])
def test_params_that_are_not_a_tool_call_are_invalid_params(mcp_url, alice, params):
    body = {"jsonrpc": "2.0", "id": 4, "method": "tools/call"}
    if params is not None:
        body["params"] = params
    resp = rpc(mcp_url, alice, body)
    error = resp.json()["error"]
    assert error["code"] == INVALID_PARAMS and resp.json()["id"] in (4, None)


def test_a_tools_bad_argument_stays_a_tool_execution_error(mcp_url, alice):
    resp = rpc(mcp_url, alice, {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                                "params": {"name": "search_memories", "arguments": {"query": "seats", "k": 0}}})
    result = resp.json()["result"]
    assert result["isError"] is True and result["content"][0]["text"]


def test_a_large_body_reaches_the_sdk_whole_and_one_over_the_limit_is_413(mcp_url, alice, settings):
    # Read in several chunks by the guard, then handed on: the SDK still parses the whole message.
    padded = {"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"_meta": {"pad": "x" * 600_000}}}
    resp = rpc(mcp_url, alice, padded)
    assert resp.status_code == 200 and resp.json()["id"] == 6, resp.text[:300]
    padded["params"]["_meta"]["pad"] = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    assert rpc(mcp_url, alice, padded).status_code == 413
