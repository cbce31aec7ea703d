"""Every error answer is JSON, under every settings module: no Django HTML page for an unknown path, a failed view or
a bad Host; /v1/* in OpenAI's error shape."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.http import HttpResponse
from django.test import AsyncClient, Client
from django.urls import include, path
from django.views.decorators.http import require_POST

ROOT = Path(__file__).resolve().parents[2]


def boom(request):
    raise RuntimeError("a bug")


@require_POST
def post_only(request):
    return HttpResponse("ok")


urlpatterns = [path("boom", boom), path("v1/boom", boom), path("post-only", post_only),
               path("", include("config.urls"))]


def assert_service_error(resp, status, code):
    assert resp.status_code == status and resp["Content-Type"] == "application/json", resp.content[:200]
    error = resp.json()["error"]
    assert error["code"] == code and error["message"] and "details" in error


def assert_openai_error(resp, status, code, kind):
    assert resp.status_code == status and resp["Content-Type"] == "application/json", resp.content[:200]
    assert resp.json()["error"] == {"message": resp.json()["error"]["message"], "type": kind, "param": None,
                                    "code": code}


@pytest.mark.parametrize("debug", [False, True])
def test_unknown_paths_are_json_404s(settings, debug):
    settings.DEBUG = debug
    client = Client()
    assert_service_error(client.get("/nowhere"), 404, "not_found")
    assert_service_error(client.get("/api/v1/nowhere"), 404, "not_found")
    assert_openai_error(client.get("/v1/nowhere"), 404, "not_found", "invalid_request_error")
    assert_openai_error(client.post("/v1/engines/x/completions", data="{}", content_type="application/json"), 404,
                        "not_found", "invalid_request_error")
    # The ASGI handler (async middleware chain) answers the same.
    assert_openai_error(async_to_sync(AsyncClient().get)("/v1/nowhere"), 404, "not_found", "invalid_request_error")


@pytest.mark.urls(__name__)
@pytest.mark.parametrize("debug", [False, True])
def test_a_failing_view_is_a_json_500_and_a_refused_method_a_json_405(settings, debug):
    settings.DEBUG = debug
    client = Client(raise_request_exception=False)
    resp = client.get("/boom")
    assert_service_error(resp, 500, "internal_error")
    assert "a bug" not in resp.content.decode()  # never the traceback
    assert_openai_error(client.get("/v1/boom"), 500, "internal_error", "server_error")
    resp = client.get("/post-only")
    assert_service_error(resp, 405, "method_not_allowed")
    assert resp["Allow"] == "POST"


def test_a_bad_host_is_a_json_400(settings):
    settings.DEBUG = True
    assert_service_error(Client().get("/healthz", HTTP_HOST="evil.example"), 400, "bad_request")


def test_the_admin_keeps_its_pages():
    resp = Client().get("/admin/")
    assert resp.status_code == 302  # to its login page, as before


PROBE = textwrap.dedent("""
    import django, json
    django.setup()
    from django.test import Client
    resp = Client().get("/v1/nowhere", HTTP_HOST="api.example")
    print(json.dumps([resp.status_code, resp["Content-Type"], resp.content.decode()]))
""")


@pytest.mark.parametrize("module", ["config.settings.local", "config.settings.production", "config.settings.test"])
def test_every_settings_module_answers_json(module, tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": module, "CONTINUUM_VAR_DIR": str(tmp_path),
           "DJANGO_SECRET_KEY": "s" * 50, "QDRANT_URL": "http://qdrant.example:6333",
           "DJANGO_ALLOWED_HOSTS": "api.example", "METRICS_TOKEN": "a-long-operator-token-0123456789"}
    run = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    status, content_type, body = json.loads(run.stdout.strip().splitlines()[-1])
    assert status == 404 and content_type == "application/json"
    assert json.loads(body)["error"]["type"] == "invalid_request_error"
