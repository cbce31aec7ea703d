"""POST /users/{id}/import and GET /users/{id}/imports/{job}: 202 and a job to poll, 4xx with a reason for a bad
file, and another tenant's user or job answers 404."""
from __future__ import annotations

import json

import pytest

from orchestration.models import ImportJob
from sessions.models import Message, Session
from tests.orchestration.exports import LOCOMO_SAMPLE, OPENAI_EXPORT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def eager(settings, monkeypatch):
    """The import task runs on commit, in the request, as a worker would run it; the backlog chain is recorded."""
    from orchestration import imports

    settings.CELERY_TASK_ALWAYS_EAGER = True
    kicks = []
    monkeypatch.setattr(imports, "imports_backlog_kick", lambda **kw: kicks.append(kw))
    return kicks


def post(client, user, body, query="export_format=openai", content_type="application/json"):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(f"/api/v1/users/{user.pk}/import?{query}", data=raw, content_type=content_type)


def test_import_answers_202_with_a_job_that_polls_to_done(alice_client, alice_user):
    r = post(alice_client, alice_user, [LOCOMO_SAMPLE], query="export_format=locomo&speaker=Caroline")
    assert r.status_code == 202, r.content
    job = r.json()
    assert (job["status"], job["messages_total"], job["sessions_total"], job["format"]) == ("queued", 5, 2, "locomo")
    assert r["Location"] == f"/api/v1/users/{alice_user.pk}/imports/{job['id']}"
    polled = alice_client.get(r["Location"])
    assert polled.status_code == 200
    body = polled.json()
    assert (body["status"], body["position"], body["messages_created"], body["sessions_created"]) == ("done", 5, 5, 2)
    # The recorded chain would work these off: the user's three turns and the assistant's two.
    assert body["backlog"] == {"bridges": 2, "extractions": 5}
    assert sorted(Message.objects.unscoped().filter(session__user=alice_user).values_list("external_id", flat=True)) \
        == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]


def test_posting_the_same_export_twice_stores_it_once(alice_client, alice_user):
    assert post(alice_client, alice_user, OPENAI_EXPORT).status_code == 202
    second = post(alice_client, alice_user, OPENAI_EXPORT).json()
    polled = alice_client.get(f"/api/v1/users/{alice_user.pk}/imports/{second['id']}").json()
    assert (polled["messages_created"], polled["messages_skipped"]) == (0, 6)
    assert Message.objects.unscoped().filter(session__user=alice_user).count() == 6


@pytest.mark.parametrize("query, body, code", [
    ("export_format=xml", OPENAI_EXPORT, "unknown_format"),
    ("", OPENAI_EXPORT, "unknown_format"),
    ("export_format=openai", b"[[{\"role\": \"user\", \"content\": ", "malformed_json"),
    ("export_format=openai", b"", "malformed_json"),
    ("export_format=openai", [[{"role": "narrator", "content": "hi"}]], "invalid_export"),
    ("export_format=locomo", [LOCOMO_SAMPLE], None),  # a control: the same route takes a good file
    ("export_format=locomo&speaker=Zed", [LOCOMO_SAMPLE], "invalid_export"),
    ("export_format=locomo", OPENAI_EXPORT, "invalid_export"),
    ("export_format=openai&speaker=%00", OPENAI_EXPORT, "invalid"),
])
def test_a_bad_export_gets_a_400_with_its_reason_and_stores_nothing(alice_client, alice_user, query, body, code):
    r = post(alice_client, alice_user, body, query=query)
    if code is None:
        assert r.status_code == 202
        return
    assert r.status_code == 400, r.content
    assert r.json()["error"]["code"] == code and r.json()["error"]["message"]
    assert not ImportJob.objects.unscoped().filter(user=alice_user).exists()
    assert not Session.objects.unscoped().filter(user=alice_user).exists()


def test_a_body_over_the_import_limit_gets_413_pointing_to_the_command(alice_client, alice_user, settings):
    settings.CONTINUUM_IMPORT_MAX_BODY_BYTES = 200
    r = post(alice_client, alice_user, OPENAI_EXPORT)
    assert r.status_code == 413
    error = r.json()["error"]
    assert error["code"] == "payload_too_large" and "import_conversations" in error["message"]
    assert error["details"] == {"limit_bytes": 200}
    assert not ImportJob.objects.unscoped().exists()


def test_the_import_route_takes_bodies_past_the_general_limit(alice_client, alice_user, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 300
    export = [{"id": f"c{i}", "messages": [{"role": "user", "content": f"I like blue number {i}."}]} for i in range(20)]
    assert len(json.dumps(export)) > 300
    r = post(alice_client, alice_user, export)
    assert r.status_code == 202, r.content
    assert alice_client.post("/api/v1/users", {"external_id": "x" * 400}, format="json").status_code == 413


def test_another_tenants_user_is_not_found(bob_client, alice_user):
    r = post(bob_client, alice_user, OPENAI_EXPORT)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert not ImportJob.objects.unscoped().exists()


def test_another_tenants_job_is_not_found(alice_client, alice_user, bob, bob_client):
    from tenants.services import end_user_create

    job = post(alice_client, alice_user, OPENAI_EXPORT).json()
    bob_user = end_user_create(tenant=bob, external_id="bob-1")
    assert bob_client.get(f"/api/v1/users/{alice_user.pk}/imports/{job['id']}").status_code == 404
    assert bob_client.get(f"/api/v1/users/{bob_user.pk}/imports/{job['id']}").status_code == 404
    other = alice_client.post("/api/v1/users", {"external_id": "alice-2"}, format="json").json()
    assert alice_client.get(f"/api/v1/users/{other['id']}/imports/{job['id']}").status_code == 404  # not this user's
    assert alice_client.get(f"/api/v1/users/{alice_user.pk}/imports/not-a-uuid").status_code == 404


@pytest.mark.parametrize("query, body", [
    ("export_format=openai", []),
    ("export_format=openai", {"conversations": []}),
    ("export_format=openai", [[], {"id": "c", "messages": []}]),
    ("export_format=openai", [[{"role": "user", "content": "   "}]]),  # blank messages only
    ("export_format=locomo", []),
])
def test_an_export_with_no_messages_is_a_400_not_an_empty_done_job(alice_client, alice_user, query, body):
    r = post(alice_client, alice_user, body, query=query)
    assert r.status_code == 400, r.content
    assert r.json()["error"]["code"] == "empty_export" and "no messages" in r.json()["error"]["message"]
    assert not ImportJob.objects.unscoped().exists()


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"])
def test_a_body_that_is_not_json_is_a_400_whatever_it_holds(alice_client, alice_user, content_type):
    for body in (json.dumps(OPENAI_EXPORT).encode(), b"I like tea."):
        r = post(alice_client, alice_user, body, content_type=content_type)
        assert r.status_code == 400, r.content
        error = r.json()["error"]
        assert error["code"] == "not_json" and content_type in error["message"]
        assert "application/json" in error["message"]
    assert not ImportJob.objects.unscoped().exists()


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/vnd.export+json"])
def test_json_media_types_with_parameters_or_suffixes_are_taken(alice_client, alice_user, content_type):
    assert post(alice_client, alice_user, OPENAI_EXPORT, content_type=content_type).status_code == 202
