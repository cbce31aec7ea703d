"""Admin for tenants, API keys and end users: keys shown once and revocable, staff kept to their tenants."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from rest_framework.test import APIClient

from memory.models import MemoryRecord
from tenants.models import EndUser, Tenant, TenantApiKey
from tests.memory.lifecycle_support import memory_make, points_of
from tests.memory.test_admin_review import login, staff_for

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = "/admin/tenants/tenantapikey/"


def _bearer(key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_creating_a_key_shows_it_once_and_it_works(alice):
    client = login(staff_for(alice))
    r = client.post(f"{KEYS}add/", {"tenant": str(alice.pk), "name": "frontend"}, follow=True)
    assert r.status_code == 200
    shown = [str(m) for m in get_messages(r.wsgi_request)] or re.findall(r"The API key for frontend is: \S+", r.content.decode())
    text = " ".join(shown)
    key = re.search(r"is: (\S+?)\.? Please", text).group(1)
    row = TenantApiKey.objects.unscoped().get(name="frontend")
    assert row.tenant == alice and key.startswith(row.prefix + ".")
    assert key not in client.get(f"{KEYS}{row.pk}/change/").content.decode()  # never shown again
    assert _bearer(key).get("/api/v1/users").status_code == 200


def test_staff_cannot_create_a_key_for_another_tenant(alice, bob):
    client = login(staff_for(alice))
    r = client.post(f"{KEYS}add/", {"tenant": str(bob.pk), "name": "sneaky"})
    assert r.status_code == 200 and "Select a valid choice" in r.content.decode()
    assert not TenantApiKey.objects.unscoped().filter(name="sneaky").exists()


def test_revoke_action_revokes_and_is_refused_across_tenants(alice, bob):
    alice_key = TenantApiKey.objects.unscoped().get(tenant=alice)
    bob_key = TenantApiKey.objects.unscoped().get(tenant=bob)
    bob_staff = login(staff_for(bob, username="bobstaff"))
    bob_staff.post(KEYS, {"action": "revoke_keys", "_selected_action": [alice_key.pk]})
    assert _bearer(alice.plain_key).get("/api/v1/users").status_code == 200

    alice_staff = login(staff_for(alice, username="alicestaff"))
    r = alice_staff.post(KEYS, {"action": "revoke_keys", "_selected_action": [alice_key.pk, bob_key.pk]}, follow=True)
    assert "Revoked 1 API key" in r.content.decode()
    assert _bearer(alice.plain_key).get("/api/v1/users").status_code == 401
    assert _bearer(bob.plain_key).get("/api/v1/users").status_code == 200


def test_staff_see_only_their_tenants_and_cannot_grant_themselves_more(alice, bob):
    client = login(staff_for(alice))
    listing = client.get("/admin/tenants/tenant/").content.decode()
    assert alice.slug in listing and bob.slug not in listing
    page = client.get(f"/admin/tenants/tenant/{alice.pk}/change/").content.decode()
    assert 'name="staff_users"' not in page
    assert client.get("/admin/tenants/tenant/add/").status_code == 403
    assert client.get(f"/admin/tenants/tenant/{bob.pk}/change/").status_code in (302, 404)


def test_deleting_a_tenant_in_the_admin_erases_it_everywhere(alice, alice_user, bob):
    from infra.redis_client import Keys, get_redis

    from tenants.services import end_user_create

    memory_make(alice, alice_user, "Alice's tenant memory")
    bob_user = end_user_create(tenant=bob, external_id="b")
    bobs = memory_make(bob, bob_user, "Bob's memory")
    get_redis().set(Keys.lock(alice.pk, "something"), "1", ex=60)
    root = login(User.objects.create_superuser(username="root", password="pw"))
    r = root.post(f"/admin/tenants/tenant/{alice.pk}/delete/", {"post": "yes"})
    assert r.status_code == 302
    assert not Tenant.objects.filter(pk=alice.pk).exists()
    assert not MemoryRecord.objects.unscoped().filter(tenant_id=alice.pk).exists()
    assert points_of(alice) == {}
    assert list(get_redis().scan_iter(match=Keys.tenant_pattern(alice.pk))) == []
    assert set(points_of(bob)) == {str(bobs.pk)}


def test_deleting_an_end_user_in_the_admin_erases_them(alice, alice_user):
    m = memory_make(alice, alice_user, "to be erased with the user")
    client = login(staff_for(alice))
    confirm = client.get(f"/admin/tenants/enduser/{alice_user.pk}/delete/")
    assert confirm.status_code == 200 and "1 memories and 0 sessions, erased" in confirm.content.decode()
    r = client.post(f"/admin/tenants/enduser/{alice_user.pk}/delete/", {"post": "yes"})
    assert r.status_code == 302
    assert not EndUser.objects.unscoped().filter(pk=alice_user.pk).exists()
    assert points_of(alice, ids=[m.pk]) == {}
