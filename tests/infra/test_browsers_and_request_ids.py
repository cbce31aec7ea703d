"""Browsers on other origins (CORS: closed unless configured; preflights answered on the REST, OpenAI and MCP paths)
and the x-request-id every response carries and its log lines repeat."""
from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from infra.request_id import REQUEST_ID, RequestIdLogFilter

APP = "https://chat.example.com"
PREFLIGHT = {"HTTP_ORIGIN": APP, "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "POST",
             "HTTP_ACCESS_CONTROL_REQUEST_HEADERS": "authorization, content-type, x-user-id, x-session-id, "
                                                   "idempotency-key, x-stainless-os, x-stainless-retry-count"}


@pytest.fixture
def open_to_app(settings):
    settings.CORS_ALLOWED_ORIGINS = [APP]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/models", "/api/v1/users"])
def test_a_listed_origin_gets_its_preflight_answered(client, open_to_app, path):
    response = client.options(path, **PREFLIGHT)
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == APP
    allowed = {h.strip() for h in response["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "x-user-id", "x-session-id", "idempotency-key", "x-stainless-os"} <= allowed
    assert "POST" in response["Access-Control-Allow-Methods"]


def test_browsers_are_refused_by_default_and_other_origins_stay_refused(client, settings, open_to_app):
    assert "Access-Control-Allow-Origin" not in client.options("/v1/chat/completions", **{
        **PREFLIGHT, "HTTP_ORIGIN": "https://evil.example.net"})
    settings.CORS_ALLOWED_ORIGINS = []
    assert "Access-Control-Allow-Origin" not in client.options("/v1/chat/completions", **PREFLIGHT)


def test_the_admin_stays_same_origin(client, open_to_app):
    assert "Access-Control-Allow-Origin" not in client.options("/admin/login/", **PREFLIGHT)


@pytest.mark.django_db
def test_a_browsers_request_can_read_the_session_and_request_ids(client, open_to_app, alice):
    response = client.get("/v1/models", HTTP_ORIGIN=APP, HTTP_AUTHORIZATION=f"Bearer {alice.plain_key}")
    assert response.status_code == 200 and response["Access-Control-Allow-Origin"] == APP
    exposed = {h.strip() for h in response["Access-Control-Expose-Headers"].split(",")}
    assert {"x-request-id", "x-session-id", "idempotent-replayed"} <= exposed
    # An error answers the browser too, so its page can show the reason.
    refused = client.get("/v1/models", HTTP_ORIGIN=APP, HTTP_AUTHORIZATION="Bearer nope")
    assert refused.status_code == 401 and refused["Access-Control-Allow-Origin"] == APP


def test_the_mcp_path_answers_a_preflight_for_a_listed_origin(settings):
    from mcp_server.asgi import mcp_mount

    async def django_app(scope, receive, send):  # never reached by a preflight of /mcp
        raise AssertionError("the preflight went past /mcp")

    settings.CORS_ALLOWED_ORIGINS = [APP]
    app = mcp_mount(django_app)

    async def preflights():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as http:
            return (await http.options("/mcp", headers={
                        "Origin": APP, "Access-Control-Request-Method": "POST",
                        "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version"}),
                    await http.options("/mcp", headers={"Origin": "https://evil.example.net",
                                                        "Access-Control-Request-Method": "POST"}))

    response, refused = asyncio.run(preflights())
    assert response.status_code == 200 and response.headers["access-control-allow-origin"] == APP
    assert "mcp-protocol-version" in response.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-origin" not in refused.headers


# --- x-request-id ----------------------------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_every_response_of_the_deployed_app_carries_a_request_id(asgi_server, alice):
    ids = set()
    for path in ("/v1/models", "/api/v1/users", "/healthz", "/v1/nope"):
        response = httpx.get(f"{asgi_server}{path}", headers={"Authorization": f"Bearer {alice.plain_key}"})
        assert response.headers["x-request-id"].startswith("req_"), path
        ids.add(response.headers["x-request-id"])
    mcp = httpx.post(f"{asgi_server}/mcp", headers={"Authorization": f"Bearer {alice.plain_key}"}, json={})
    assert mcp.headers["x-request-id"].startswith("req_")
    assert len(ids) == 4  # one per request
    # A gateway's own id is kept, so one id follows the request across services; an unusable one is replaced.
    assert httpx.get(f"{asgi_server}/healthz", headers={"X-Request-Id": "gw-42.a"}).headers["x-request-id"] == "gw-42.a"
    assert httpx.get(f"{asgi_server}/healthz", headers={"X-Request-Id": "bad <id>"}).headers[
        "x-request-id"].startswith("req_")


@pytest.mark.django_db(transaction=True)
def test_the_openai_client_reads_the_request_id_and_the_turns_log_lines_carry_it(asgi_server, alice, settings):
    """A turn runs on a thread of its own; the model call it logs there says the request's id."""
    import openai

    from tests.assistant.scripted_llm import ScriptedLLM, answer, llm_scripted

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.addFilter(RequestIdLogFilter())
    handler.emit = records.append
    httpx_log = logging.getLogger("httpx")
    # httpx logs each request at INFO; an earlier test may have configured logging (dictConfig disables the loggers
    # it does not name) or switched it off, so this test switches it on for itself.
    saved = httpx_log.level, httpx_log.disabled, logging.root.manager.disable
    httpx_log.setLevel(logging.INFO)
    httpx_log.disabled = False
    logging.disable(logging.NOTSET)
    httpx_log.addHandler(handler)
    try:
        with llm_scripted(settings, ScriptedLLM().add(answer("Hi."))) as scripted:
            scripted.router.route(host="127.0.0.1").pass_through()
            client = openai.OpenAI(base_url=f"{asgi_server}/v1", api_key=alice.plain_key, max_retries=0)
            completion = client.chat.completions.create(model="continuum", user="rid-1",
                                                        messages=[{"role": "user", "content": "Hello"}])
    finally:
        httpx_log.removeHandler(handler)
        httpx_log.setLevel(saved[0])
        httpx_log.disabled = saved[1]
        logging.disable(saved[2])
    assert completion._request_id and completion._request_id.startswith("req_")
    model_calls = [r for r in records if "llm.test" in r.getMessage()]
    assert model_calls and {r.request_id for r in model_calls} == {completion._request_id}


def test_the_log_filter_says_dash_outside_a_request():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "outside", None, None)
    RequestIdLogFilter().filter(record)
    assert record.request_id == "-"
    token = REQUEST_ID.set("req_abc")
    try:
        inside = logging.LogRecord("x", logging.INFO, __file__, 1, "inside", None, None)
        RequestIdLogFilter().filter(inside)
        assert inside.request_id == "req_abc"
    finally:
        REQUEST_ID.reset(token)
