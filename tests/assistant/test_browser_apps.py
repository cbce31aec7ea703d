"""A browser app on another origin calls the OpenAI surface as a web chat UI or the AI SDK in a browser would:
real Chromium, a real preflight, the page served by a second local server (another origin)."""
from __future__ import annotations

import functools
import http.server
import json
import threading

import pytest

from tests.browser import chromium_page

from .scripted_llm import answer

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = b"<!doctype html><title>chat app</title><p>a browser chat app</p>"

CALL = """async ([base, key]) => {
  try {
    const response = await fetch(base + "/v1/chat/completions", {
      method: "POST",
      headers: {"Authorization": "Bearer " + key, "Content-Type": "application/json", "X-User-Id": "web-1",
                "x-stainless-os": "MacOS", "x-stainless-retry-count": "0"},
      body: JSON.stringify({model: "continuum", messages: [{role: "user", content: "Hello from the browser"}]}),
    });
    return {status: response.status, session: response.headers.get("x-session-id"),
            request: response.headers.get("x-request-id"), body: await response.json()};
  } catch (error) {
    return {error: String(error)};
  }
}"""


@pytest.fixture
def app_origin(tmp_path):
    """Another origin: a static page on a port of its own."""
    (tmp_path / "index.html").write_bytes(PAGE)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_browser_app_on_a_listed_origin_chats_and_reads_the_headers(server, llm, alice, app_origin, settings):
    llm.add(answer("Hi, browser."))
    with chromium_page() as page:
        page.goto(f"{app_origin}/index.html")
        settings.CORS_ALLOWED_ORIGINS = []
        refused = page.evaluate(CALL, [server, alice.plain_key])
        settings.CORS_ALLOWED_ORIGINS = [app_origin]
        allowed = page.evaluate(CALL, [server, alice.plain_key])
    # Closed by default: the browser itself refuses to hand the response over.
    assert "error" in refused and "Failed to fetch" in refused["error"], json.dumps(refused)
    assert allowed.get("status") == 200, json.dumps(allowed)
    assert allowed["body"]["choices"][0]["message"]["content"] == "Hi, browser."
    assert allowed["session"] and allowed["request"]  # exposed to the page's script
