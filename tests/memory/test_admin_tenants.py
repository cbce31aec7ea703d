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
    shown = ([str(m) for m in get_messages(r.wsgi_request)]
             or re.findall(r"The API key for frontend is: \S+", r.content.decode()))
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


def test_deleting_a_tenant_in_the_admin_starts_an_erasure_task_that_erases_it_everywhere(alice, alice_user, bob,
                                                                                        monkeypatch):
    from infra.redis_client import Keys, get_redis
    from orchestration.tasks import tenant_erase_task
    from tenants.models import TenantErasure
    from tenants.services import end_user_create

    memory_make(alice, alice_user, "Alice's tenant memory")
    bob_user = end_user_create(tenant=bob, external_id="b")
    bobs = memory_make(bob, bob_user, "Bob's memory")
    get_redis().set(Keys.lock(alice.pk, "something"), "1", ex=60)
    queued = []
    monkeypatch.setattr(tenant_erase_task, "delay", lambda *args: queued.append(args))
    root = login(User.objects.create_superuser(username="root", password="pw"))
    r = root.post(f"/admin/tenants/tenant/{alice.pk}/delete/", {"post": "yes"})
    assert r.status_code == 302
    # The request only starts the erasure: the tenant is deactivated (its key stops working) and a task is queued.
    erasure = TenantErasure.objects.get(tenant_id_value=alice.pk)
    assert (erasure.state, erasure.slug, erasure.users_total, erasure.users_done) == ("queued", alice.slug, 1, 0)
    assert erasure.requested_by == "root" and queued == [(str(erasure.pk),)]
    assert Tenant.objects.get(pk=alice.pk).is_active is False
    assert MemoryRecord.objects.unscoped().filter(tenant_id=alice.pk).exists()
    assert _bearer(alice.plain_key).get("/api/v1/users").status_code in (401, 403)

    assert tenant_erase_task.apply(args=queued[0]).get() == "done"
    assert not Tenant.objects.filter(pk=alice.pk).exists()
    assert not MemoryRecord.objects.unscoped().filter(tenant_id=alice.pk).exists()
    assert points_of(alice) == {}
    assert list(get_redis().scan_iter(match=Keys.tenant_pattern(alice.pk))) == []
    assert set(points_of(bob)) == {str(bobs.pk)}
    # The record of it outlives the tenant, and the admin shows its progress.
    erasure.refresh_from_db()
    assert (erasure.state, erasure.users_done, erasure.users_total) == ("done", 1, 1)
    assert erasure.started_at and erasure.finished_at
    page = root.get("/admin/tenants/tenanterasure/").content.decode()
    assert alice.slug in page and "1 / 1" in page and "Done" in page


def test_tenant_erasure_is_bounded_per_run_and_a_rerun_resumes(alice, settings, monkeypatch):
    from orchestration.erasure import tenant_erase, tenant_erasure_start
    from orchestration.tasks import tenant_erase_task
    from tenants.services import end_user_create

    settings.TENANT_ERASE_USERS_PER_RUN = 2
    users = [end_user_create(tenant=alice, external_id=f"u{i}") for i in range(5)]
    for user in users:
        memory_make(alice, user, f"memory of {user.external_id}")
    queued = []
    monkeypatch.setattr(tenant_erase_task, "delay", lambda *args: queued.append(args))
    erasure = tenant_erasure_start(tenant=alice)
    assert tenant_erasure_start(tenant=alice).pk == erasure.pk  # asking twice starts one erasure
    assert len(queued) == 1 and erasure.users_total == 5
    progress = []
    while True:
        state = tenant_erase_task.apply(args=queued.pop()).get()
        erasure.refresh_from_db()
        progress.append((state, erasure.users_done, EndUser.objects.unscoped().filter(tenant_id=alice.pk).count()))
        if state == "done":
            break
        assert len(queued) == 1  # not done: the task queued its next run
    assert progress == [("running", 2, 3), ("running", 4, 1), ("done", 5, 0)]
    assert not queued and not Tenant.objects.filter(pk=alice.pk).exists()
    # A redelivered run of a finished erasure changes nothing.
    assert tenant_erase(erasure_id=erasure.pk).users_done == 5
    assert tenant_erase_task.apply(args=[str(erasure.pk)]).get() == "done" and not queued


def test_deleting_an_end_user_in_the_admin_erases_them(alice, alice_user):
    m = memory_make(alice, alice_user, "to be erased with the user")
    client = login(staff_for(alice))
    confirm = client.get(f"/admin/tenants/enduser/{alice_user.pk}/delete/")
    assert confirm.status_code == 200 and "1 memories and 0 sessions, erased" in confirm.content.decode()
    r = client.post(f"/admin/tenants/enduser/{alice_user.pk}/delete/", {"post": "yes",
                                                                         "confirm": alice_user.external_id})
    assert r.status_code == 302
    assert not EndUser.objects.unscoped().filter(pk=alice_user.pk).exists()
    assert points_of(alice, ids=[m.pk]) == {}
