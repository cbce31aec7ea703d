"""The webhooks REST API: register (secret shown once, stored sealed), list, edit, re-enable, rotate, delete, the
delivery log; bad input is a 400 with a reason; another tenant's endpoints are the same 404 as missing ones."""
from __future__ import annotations

import uuid

import pytest

from infra.encryption import unseal
from webhooks.models import EventType, WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db

URL = "https://hooks.example.com/continuum"


def _create(client, **body):
    return client.post("/api/v1/webhooks", {"url": URL, **body}, format="json")


def test_registering_returns_the_secret_once_and_stores_it_sealed(alice, alice_client):
    response = _create(alice_client, description="CRM sync")
    assert response.status_code == 201
    body = response.json()
    secret = body["secret"]
    assert secret.startswith("whsec_") and body["event_types"] == EventType.values
    assert body["include_content"] is False and body["enabled"] is True and body["description"] == "CRM sync"
    row = WebhookEndpoint.objects.for_tenant(alice).get(pk=body["id"])
    assert secret not in row.secret_sealed and unseal(row.secret_sealed) == secret
    shown = alice_client.get(f"/api/v1/webhooks/{body['id']}").json()
    assert "secret" not in shown and secret not in str(alice_client.get("/api/v1/webhooks").json())


def test_registering_for_some_event_types_and_content(alice_client):
    body = _create(alice_client, event_types=["session.closed", "memory.created", "memory.created"],
                   include_content=True).json()
    assert body["event_types"] == ["memory.created", "session.closed"] and body["include_content"] is True


@pytest.mark.parametrize("body, field", [
    ({"url": "ftp://hooks.example.com/x"}, "url"),
    ({"url": "not a url"}, "url"),
    ({"url": "https://user:pw@hooks.example.com/x"}, "url"),
    ({"url": "http://127.0.0.1:8000/x"}, "url"),
    ({"url": "http://localhost/x"}, "url"),
    ({"url": "http://169.254.169.254/latest/meta-data"}, "url"),
    ({"url": "http://[::1]/x"}, "url"),
    ({"url": "http://10.0.0.7/x"}, "url"),
    ({"url": URL, "event_types": ["memory.exploded"]}, "event_types"),
    ({"url": URL, "event_types": []}, "event_types"),
    ({"url": URL, "event_types": "memory.created"}, "event_types"),
    ({"url": URL, "include_content": "yes"}, "include_content"),
    ({"url": URL, "description": 7}, "description"),
    ({}, "url"),
])
def test_bad_input_is_a_400_that_names_the_field(alice_client, body, field):
    response = alice_client.post("/api/v1/webhooks", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] and error["message"] and field in str(error)


def test_private_targets_are_accepted_when_the_deployment_allows_them(alice_client, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    assert _create(alice_client, url="http://127.0.0.1:9000/hook").status_code == 201


def test_a_tenant_lists_only_its_own_endpoints(alice_client, bob_client):
    mine = _create(alice_client).json()["id"]
    _create(bob_client)
    listed = alice_client.get("/api/v1/webhooks").json()
    assert [e["id"] for e in listed["results"]] == [mine]


@pytest.mark.parametrize("method, suffix, body", [
    ("get", "", None), ("patch", "", {"description": "mine now"}), ("delete", "", None),
    ("post", "/rotate-secret", None), ("get", "/deliveries", None),
])
def test_another_tenants_endpoint_is_not_found(alice, alice_client, bob_client, method, suffix, body):
    theirs = _create(alice_client).json()
    before = WebhookEndpoint.objects.for_tenant(alice).values().get(pk=theirs["id"])
    for target in (theirs["id"], str(uuid.uuid4()), "not-an-id"):
        response = getattr(bob_client, method)(f"/api/v1/webhooks/{target}{suffix}", body, format="json")
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert WebhookEndpoint.objects.for_tenant(alice).values().get(pk=theirs["id"]) == before


def test_editing_changes_what_was_given(alice_client):
    created = _create(alice_client).json()
    response = alice_client.patch(f"/api/v1/webhooks/{created['id']}", {
        "url": "https://other.example.com/h", "event_types": ["user.erased"], "include_content": True}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["url"] == "https://other.example.com/h" and body["event_types"] == ["user.erased"]
    assert body["include_content"] is True and body["description"] == created["description"]
    bad = alice_client.patch(f"/api/v1/webhooks/{created['id']}", {"url": "http://localhost/x"}, format="json")
    assert bad.status_code == 400


def test_disabling_and_re_enabling(alice, alice_client):
    created = _create(alice_client).json()
    WebhookEndpoint.objects.for_tenant(alice).filter(pk=created["id"]).update(consecutive_failures=4)
    off = alice_client.patch(f"/api/v1/webhooks/{created['id']}", {"enabled": False}, format="json").json()
    assert off["enabled"] is False and off["disabled_reason"] == "disabled by the tenant" and off["disabled_at"]
    on = alice_client.patch(f"/api/v1/webhooks/{created['id']}", {"enabled": True}, format="json").json()
    assert on["enabled"] is True and on["consecutive_failures"] == 0 and on["disabled_at"] is None


def test_rotating_returns_a_new_secret_and_keeps_the_old_one_signing_for_the_grace(alice, alice_client, settings):
    from webhooks.delivery import endpoint_signing_secrets

    created = _create(alice_client).json()
    response = alice_client.post(f"/api/v1/webhooks/{created['id']}/rotate-secret")
    assert response.status_code == 200
    new = response.json()["secret"]
    assert new != created["secret"] and new.startswith("whsec_")
    endpoint = WebhookEndpoint.objects.for_tenant(alice).get(pk=created["id"])
    assert endpoint_signing_secrets(endpoint) == [new, created["secret"]]


def test_deleting_removes_the_endpoint_and_its_deliveries(alice, alice_client, alice_user):
    from memory.actions import memory_create

    created = _create(alice_client).json()
    memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
    assert WebhookDelivery.objects.for_tenant(alice).count() == 1
    assert alice_client.delete(f"/api/v1/webhooks/{created['id']}").status_code == 204
    assert alice_client.get(f"/api/v1/webhooks/{created['id']}").status_code == 404
    assert WebhookDelivery.objects.for_tenant(alice).count() == 0


def test_the_delivery_log_lists_attempts(alice, alice_client, alice_user, endpoint_for, receiver, task_queue,
                                         django_capture_on_commit_callbacks):
    from memory.actions import memory_create

    endpoint = endpoint_for(alice)
    receiver.script = [503]
    with django_capture_on_commit_callbacks(execute=True):
        memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
    task_queue.run()
    page = alice_client.get(f"/api/v1/webhooks/{endpoint.pk}/deliveries").json()
    (delivery,) = page["results"]
    assert delivery["event_type"] == "memory.created" and delivery["state"] == "delivered"
    assert [(a["number"], a["status_code"], a["outcome"]) for a in delivery["attempt_log"]] == [
        (1, 503, "retryable"), (2, 200, "success")]
    assert all(a["duration_ms"] >= 0 for a in delivery["attempt_log"])
    assert "Porto" not in str(page)
