"""Who an MCP request acts for: the tenant key and the X-User-Id header, checked before the SDK reads a message,
over real HTTP (raw requests for the status and body, and the SDK's client for what an MCP client sees)."""
from __future__ import annotations

import httpx2
import pytest
from mcp import MCPError

from memory.models import MemoryRecord
from tenants.models import EndUser
from tenants.services import apikey_revoke, end_user_create

from .mcp_client import call, mcp_run, structured

pytestmark = pytest.mark.django_db(transaction=True)

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def post(url: str, headers: dict, body: dict = INITIALIZE) -> httpx2.Response:
    return httpx2.post(url, json=body, headers={**ACCEPT, **headers}, timeout=30)


async def _list_tools(session):
    return await session.list_tools()


@pytest.mark.parametrize("authorization", [None, "", "Bearer", "Bearer not-a-key", "Basic dXNlcjpwYXNz"])
def test_a_missing_or_wrong_key_is_refused_with_401(mcp_url, alice, authorization):
    headers = {"X-User-Id": "ada-1"}
    if authorization is not None:
        headers["Authorization"] = authorization
    resp = post(mcp_url, headers)
    assert resp.status_code == 401
    assert resp.json()["error"]["code"] == "invalid_api_key"
    assert resp.headers["WWW-Authenticate"] == 'Bearer realm="continuum"'
    assert not EndUser.objects.for_tenant(alice).exists()


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _refused_connection(url: str, key: str) -> list[BaseException]:
    with pytest.raises(BaseExceptionGroup) as refused:
        mcp_run(url, _list_tools, key=key)
    return _leaves(refused.value)


def test_the_sdk_client_cannot_connect_with_a_wrong_or_revoked_key(mcp_url, alice):
    # The client's initialize fails on the 401 (it carries no JSON-RPC result), so nothing else is sent.
    assert any(isinstance(e, MCPError) for e in _refused_connection(mcp_url, "not-a-key"))

    assert {t.name for t in mcp_run(mcp_url, _list_tools, key=alice.plain_key).tools}
    apikey_revoke(tenant=alice, prefix=alice.plain_key.split(".")[0])
    assert post(mcp_url, {"Authorization": f"Bearer {alice.plain_key}", "X-User-Id": "ada-1"}).status_code == 401
    assert any(isinstance(e, MCPError) for e in _refused_connection(mcp_url, alice.plain_key))


def test_a_request_naming_no_end_user_is_400(mcp_url, alice):
    resp = post(mcp_url, {"Authorization": f"Bearer {alice.plain_key}"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "user_required"
    resp = post(mcp_url, {"Authorization": f"Bearer {alice.plain_key}", "X-User-Id": "x" * 256})
    assert resp.status_code == 400
    assert not EndUser.objects.for_tenant(alice).exists()


def test_the_end_user_is_the_tenants_own_id_created_on_first_use(mcp_url, alice, bob):
    assert structured(call(mcp_url, "list_sessions", key=alice.plain_key, user="new-person")) == {"sessions": []}
    assert EndUser.objects.for_tenant(alice).filter(external_id="new-person").count() == 1
    assert not EndUser.objects.for_tenant(bob).exists()  # a client never names a tenant: the key does

    ada = end_user_create(tenant=alice, external_id="ada-1")
    call(mcp_url, "remember", {"text": "Ada is vegetarian."}, key=alice.plain_key, user="ada-1")
    assert MemoryRecord.objects.for_tenant(alice).get().user_id == ada.pk
    assert EndUser.objects.for_tenant(alice).count() == 2


def test_a_host_outside_allowed_hosts_is_refused(mcp_url, alice):
    resp = post(mcp_url, {"Authorization": f"Bearer {alice.plain_key}", "X-User-Id": "ada-1",
                          "Host": "evil.example"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "disallowed_host"


def test_each_request_counts_against_the_tenants_request_quota(mcp_url, make_tenant):
    carol = make_tenant("Carol", requests_per_minute=2)
    headers = {"Authorization": f"Bearer {carol.plain_key}", "X-User-Id": "c-1"}
    assert [post(mcp_url, headers).status_code for _ in range(2)] == [200, 200]
    refused = post(mcp_url, headers)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert int(refused.headers["Retry-After"]) > 0
