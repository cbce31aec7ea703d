"""/api/docs/ is served by the service itself: Swagger UI from drf-spectacular-sidecar, no third-party host."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

ORIGIN = "http://testserver"


class _References(HTMLParser):
    """Every URL the page makes the browser load or link to: src and href attributes."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _external(urls, page_url: str) -> list[str]:
    return [u for u in urls if urlsplit(urljoin(page_url, u)).netloc not in ("", "testserver")]


def test_docs_page_references_no_external_host_and_its_assets_are_served():
    client = Client()
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = _body(page).decode()
    parser = _References()
    parser.feed(html)
    assert parser.urls, "the page loads nothing: the parser or the page is broken"
    assert _external(parser.urls, f"{ORIGIN}/api/docs/") == []
    # Nor an absolute URL anywhere else in the page (an inline script building a CDN URL).
    hosts = {urlsplit(u).netloc for u in re.findall(r"https?://[^\s\"'<>)]+", html)}
    assert hosts <= {"testserver"}, hosts

    scripts = [urljoin(f"{ORIGIN}/api/docs/", u) for u in parser.urls]
    bundle = [u for u in scripts if u.endswith("swagger-ui-bundle.js")]
    assert bundle and "drf_spectacular_sidecar" in bundle[0]
    for url in scripts:
        parts = urlsplit(url)
        asset = client.get(parts.path + (f"?{parts.query}" if parts.query else ""))
        assert asset.status_code == 200, url
        assert _body(asset), url
    assert b"SwaggerUIBundle" in _body(client.get(urlsplit(bundle[0]).path))
