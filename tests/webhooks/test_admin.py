"""Admin for webhooks: staff register endpoints (secret shown once), re-enable and rotate them, and read the
delivery log, which nobody edits; staff see only their own tenants' endpoints and deliveries."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.test import Client

from infra.encryption import unseal
from webhooks.models import EventType, WebhookDelivery, WebhookEndpoint
from webhooks.services import webhook_endpoint_create, webhook_endpoint_update

pytestmark = pytest.mark.django_db

ENDPOINTS = "/admin/webhooks/webhookendpoint/"
DELIVERIES = "/admin/webhooks/webhookdelivery/"


def _staff(*tenants, username="hookstaff") -> Client:
    user = User.objects.create_user(username=username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="webhooks"))
    for t in tenants:
        t.staff_users.add(user)
    client = Client()
    client.force_login(user)
    return client


def _messages(response) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def test_registering_in_the_admin_shows_the_secret_once(alice):
    client = _staff(alice)
    response = client.post(f"{ENDPOINTS}add/", {
        "tenant": str(alice.pk), "url": "https://hooks.example.com/a", "description": "crm",
        "event_types": ["memory.created", "user.erased"], "is_active": "on"}, follow=True)
    assert response.status_code == 200
    secret = re.search(r"(whsec_[A-Za-z0-9+/=]+)", _messages(response)).group(1)
    endpoint = WebhookEndpoint.objects.for_tenant(alice).get()
    assert unseal(endpoint.secret_sealed) == secret and endpoint.event_types == ["memory.created", "user.erased"]
    assert secret not in client.get(f"{ENDPOINTS}{endpoint.pk}/change/").content.decode()


def test_the_admin_refuses_a_private_url_on_the_form(alice):
    client = _staff(alice)
    response = client.post(f"{ENDPOINTS}add/", {"tenant": str(alice.pk), "url": "http://127.0.0.1/x",
                                                "event_types": EventType.values})
    assert response.status_code == 200 and "private or loopback" in response.content.decode()
    assert not WebhookEndpoint.objects.for_tenant(alice).exists()


def test_staff_cannot_register_or_open_another_tenants_endpoint(alice, bob):
    theirs, _ = webhook_endpoint_create(tenant=bob, url="https://hooks.example.com/bob")
    client = _staff(alice)
    response = client.post(f"{ENDPOINTS}add/", {"tenant": str(bob.pk), "url": "https://hooks.example.com/x",
                                                "event_types": EventType.values})
    assert "Select a valid choice" in response.content.decode()
    assert client.get(f"{ENDPOINTS}{theirs.pk}/change/").status_code == 302  # "not found": back to the list
    assert "hooks.example.com/bob" not in client.get(ENDPOINTS).content.decode()


def test_re_enable_and_rotate_actions(alice, bob):
    mine, first = webhook_endpoint_create(tenant=alice, url="https://hooks.example.com/a")
    theirs, _ = webhook_endpoint_create(tenant=bob, url="https://hooks.example.com/b")
    for e, t in ((mine, alice), (theirs, bob)):
        webhook_endpoint_update(tenant=t, endpoint_id=e.pk, enabled=False)
    client = _staff(alice)
    client.post(ENDPOINTS, {"action": "enable_endpoints", "_selected_action": [mine.pk, theirs.pk]})
    assert WebhookEndpoint.objects.for_tenant(alice).get().is_active
    assert not WebhookEndpoint.objects.for_tenant(bob).get().is_active  # out of scope: untouched

    response = client.post(ENDPOINTS, {"action": "rotate_secrets", "_selected_action": [mine.pk]}, follow=True)
    rotated = re.search(r"(whsec_[A-Za-z0-9+/=]+)", _messages(response)).group(1)
    assert rotated != first and unseal(WebhookEndpoint.objects.for_tenant(alice).get().secret_sealed) == rotated


def test_the_delivery_log_is_read_only_and_scoped(alice, bob, alice_user):
    from memory.actions import memory_create
    from tenants.services import end_user_create

    webhook_endpoint_create(tenant=alice, url="https://hooks.example.com/a")
    webhook_endpoint_create(tenant=bob, url="https://hooks.example.com/b")
    memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
    memory_create(tenant=bob, user=end_user_create(tenant=bob, external_id="b1"), kind="fact", text="Bo is here.")
    mine = WebhookDelivery.objects.for_tenant(alice).get()
    theirs = WebhookDelivery.objects.for_tenant(bob).get()
    client = _staff(alice)
    listing = client.get(DELIVERIES).content.decode()
    assert "hooks.example.com/a" in listing and "hooks.example.com/b" not in listing
    page = client.get(f"{DELIVERIES}{mine.pk}/change/")
    assert page.status_code == 200 and str(mine.event_id) in page.content.decode()
    assert 'name="_save"' not in page.content.decode()  # viewable, not editable
    client.post(f"{DELIVERIES}{mine.pk}/change/", {"state": "delivered"})
    assert WebhookDelivery.objects.for_tenant(alice).get().state == "pending"
    assert client.get(f"{DELIVERIES}{mine.pk}/delete/").status_code == 403
    assert client.get(f"{DELIVERIES}add/").status_code == 403
    assert client.get(f"{DELIVERIES}{theirs.pk}/change/").status_code == 302
