"""Admin: pages render, memory actions go through memory.actions (history with the staff actor, Qdrant
updated), and everything is refused for non-staff and for staff of another tenant."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from memory.models import MemoryEvent, MemoryRecord
from tests.memory.lifecycle_support import memory_make, points_of

pytestmark = pytest.mark.django_db(transaction=True)

MEMORY_ADMIN = "/admin/memory/memoryrecord/"


def staff_for(*tenants, username="staff") -> User:
    user = User.objects.create_user(username=username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label__in=[
        "tenants", "chat_sessions", "context", "orchestration", "memory"]))
    for t in tenants:
        t.staff_users.add(user)
    return user


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def bob_user(bob):
    from tenants.services import end_user_create

    return end_user_create(tenant=bob, external_id="bob-user-1")


@pytest.fixture
def data(alice, alice_user, alice_session, bob, bob_user):
    from context.models import SessionLink, SummaryAnchor
    from orchestration.messages import messages_append
    from orchestration.sessions import session_close, session_open
    from orchestration.sessions import session_finish as _session_finish
    from sessions.services import NewMessage

    msgs = messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content="I am vegetarian and I live in Ghent"),
        NewMessage(role="assistant", content="Noted, vegetarian options in Ghent.")])
    SummaryAnchor.objects.unscoped().create(tenant=alice, session=alice_session, first_seq=1, last_seq=2,
                                 text="turns 1-1: user is vegetarian, lives in Ghent")
    session_close(tenant=alice, session_id=alice_session.pk)
    _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk)
    later, _ = session_open(tenant=alice, user=alice_user)
    SessionLink.objects.unscoped().get_or_create(tenant=alice, from_session=later, to_session=alice_session,
                                                 kind="same_user")
    return {
        "active": memory_make(alice, alice_user, "The user is vegetarian", kind="preference",
                              session=alice_session, source_message=msgs[0], confidence=0.9),
        "pending": memory_make(alice, alice_user, "The user probably likes Belgian food", source_type="inferred",
                               status="pending_review", confidence=0.4),
        "bob": memory_make(bob, bob_user, "Bob-only secret memory", kind="fact"),
        "session": alice_session, "message": msgs[0], "later": later,
    }


def _action(client, action, *records):
    return client.post(MEMORY_ADMIN, {"action": action, "_selected_action": [str(r.pk) for r in records],
                                      "index": 0}, follow=True)


def test_admin_pages_render_for_staff(alice, alice_user, data):
    client = login(staff_for(alice))
    pages = {
        "/admin/": "Memory records",
        MEMORY_ADMIN: "The user is vegetarian",
        f"{MEMORY_ADMIN}?kind__exact=preference": "The user is vegetarian",
        f"{MEMORY_ADMIN}?status__exact=pending_review": "Belgian food",
        f"{MEMORY_ADMIN}?source_type__exact=inferred": "Belgian food",
        f"{MEMORY_ADMIN}?confidence=high": "The user is vegetarian",
        f"{MEMORY_ADMIN}?expired=no": "The user is vegetarian",
        f"{MEMORY_ADMIN}?tenant={alice.pk}": "The user is vegetarian",
        f"{MEMORY_ADMIN}?q=vegetarian": "The user is vegetarian",
        f"{MEMORY_ADMIN}{data['active'].pk}/change/": "I am vegetarian",  # history inline + provenance
        "/admin/tenants/tenant/": alice.slug,
        f"/admin/tenants/tenant/{alice.pk}/change/": alice.name,
        "/admin/tenants/tenantapikey/": "test",
        "/admin/tenants/enduser/": alice_user.external_id,
        f"/admin/tenants/enduser/{alice_user.pk}/change/": "Standing profile",
        "/admin/chat_sessions/session/": str(data["session"].pk)[:8],
        f"/admin/chat_sessions/session/{data['session'].pk}/change/": "Noted, vegetarian options in Ghent.",
        f"/admin/chat_sessions/message/{data['message'].pk}/change/": "I am vegetarian and I live in Ghent",
        "/admin/memory/memoryevent/": "created",
        "/admin/memory/jobrun/": "job run",
    }
    for url, expected in pages.items():
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code)
        assert expected in r.content.decode(), url
    assert "Belgian food" not in client.get(f"{MEMORY_ADMIN}?confidence=high").content.decode()


def test_memory_page_shows_provenance_links_and_history(alice, data):
    client = login(staff_for(alice))
    page = client.get(f"{MEMORY_ADMIN}{data['active'].pk}/change/").content.decode()
    assert f"/admin/chat_sessions/message/{data['message'].pk}/change/" in page
    assert f"/admin/chat_sessions/session/{data['session'].pk}/change/#msg-{data['message'].pk}" in page
    assert re.search(r"history", page, re.I) and "created" in page


def test_session_page_shows_transcript_anchors_bridge_and_links(alice, data):
    client = login(staff_for(alice))
    page = client.get(f"/admin/chat_sessions/session/{data['session'].pk}/change/").content.decode()
    assert f'id="msg-{data["message"].pk}"' in page
    assert "turns 1-1: user is vegetarian" in page
    assert data["session"].bridge.text[:30] in page
    assert f"/admin/chat_sessions/session/{data['later'].pk}/change/" in page  # linked from the later session


def test_end_users_list_shows_memory_counts(alice, alice_user, data):
    client = login(staff_for(alice))
    page = client.get("/admin/tenants/enduser/").content.decode()
    row = page[page.index(alice_user.external_id):]
    mine = MemoryRecord.objects.unscoped().filter(user=alice_user)  # closing the session extracted its messages
    assert re.search(rf'field-active_memories"><a href="[^"]+">{mine.filter(status="active").count()}<', row)
    assert re.search(rf'field-all_memories"><a href="[^"]+">{mine.count()}<', row)


@pytest.mark.parametrize("action,record,expected_status,event", [
    ("approve", "pending", "active", "approved"),
    ("reject", "pending", "deleted", "rejected"),
    ("expire", "active", "expired", "expired"),
    ("delete_memories", "active", "deleted", "deleted"),
])
def test_actions_work_for_staff_and_write_history_and_qdrant(alice, alice_user, data, action, record,
                                                            expected_status, event):
    staff = staff_for(alice, username="reviewer")
    m = data[record]
    r = _action(login(staff), action, m)
    assert r.status_code == 200
    m.refresh_from_db()
    assert m.status == expected_status
    last = MemoryEvent.objects.unscoped().filter(memory_uuid=m.pk).latest("id")
    assert (last.action, last.actor_type, last.actor_id) == (event, "staff", "reviewer")
    point = points_of(alice, alice_user, [m.pk]).get(str(m.pk))
    if expected_status == "deleted":
        assert point is None
    else:
        assert point["status"] == expected_status


def test_restore_action_brings_back_a_deleted_memory(alice, alice_user, data):
    client = login(staff_for(alice, username="reviewer"))
    m = data["active"]
    _action(client, "delete_memories", m)
    assert str(m.pk) not in points_of(alice, alice_user)
    _action(client, "restore", m)
    m.refresh_from_db()
    assert m.status == "active"
    assert points_of(alice, alice_user, [m.pk])[str(m.pk)]["status"] == "active"
    assert MemoryEvent.objects.unscoped().filter(memory_uuid=m.pk, action="restored", actor_id="reviewer").exists()


def test_an_action_on_the_wrong_status_is_reported_not_applied(alice, data):
    client = login(staff_for(alice))
    r = _action(client, "approve", data["active"])
    assert "Not approved" in r.content.decode()
    assert not MemoryEvent.objects.unscoped().filter(memory_uuid=data["active"].pk, action="approved").exists()


class _FormFields(HTMLParser):
    """The fields a browser would submit from the change form."""

    def __init__(self):
        super().__init__()
        self.fields, self._textarea = {}, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("name") and a.get("type") not in ("submit", "checkbox"):
            self.fields[a["name"]] = a.get("value", "")
        if tag == "textarea" and a.get("name"):
            self._textarea = a["name"]
            self.fields[a["name"]] = ""

    def handle_data(self, d):
        if self._textarea:
            self.fields[self._textarea] += d

    def handle_endtag(self, tag):
        if tag == "textarea":
            self._textarea = None


def _change_form(client, url) -> dict:
    parser = _FormFields()
    parser.feed(client.get(url).content.decode())
    return {k: v.lstrip("\n") for k, v in parser.fields.items()}


def test_editing_text_in_the_admin_re_embeds_it(alice, alice_user, data):
    client = login(staff_for(alice, username="editor"))
    m = data["active"]
    url = f"{MEMORY_ADMIN}{m.pk}/change/"
    form = _change_form(client, url)
    assert form["text"] == "The user is vegetarian"
    form["text"] = "The user is vegan"
    r = client.post(url, form)
    assert r.status_code == 302, r.content.decode()[:3000]
    m.refresh_from_db()
    assert m.text == "The user is vegan"
    ev = MemoryEvent.objects.unscoped().filter(memory_uuid=m.pk, action="updated").get()
    assert (ev.actor_type, ev.actor_id, ev.before["text"]) == ("staff", "editor", "The user is vegetarian")
    assert points_of(alice, alice_user, [m.pk])[str(m.pk)]["text"] == "The user is vegan"


def test_an_admin_edit_that_is_only_a_secret_is_refused_on_the_form(alice, data):
    client = login(staff_for(alice, username="editor"))
    m = data["active"]
    url = f"{MEMORY_ADMIN}{m.pk}/change/"
    form = _change_form(client, url)
    form["text"] = "sk-proj-abcdefghijklmnop1234"
    r = client.post(url, form)
    assert r.status_code == 200 and "is a secret" in r.content.decode()
    m.refresh_from_db()
    assert m.text == "The user is vegetarian"
    assert not MemoryEvent.objects.unscoped().filter(memory_uuid=m.pk, action="updated").exists()


# --- refusals ------------------------------------------------------------------------------------------------

def test_non_staff_and_anonymous_are_refused(alice, data):
    plain = User.objects.create_user(username="plain", password="pw")
    alice.staff_users.add(plain)  # even listed on the tenant, a non-staff user gets nothing
    for client in (login(plain), Client()):
        for url in (MEMORY_ADMIN, f"{MEMORY_ADMIN}{data['active'].pk}/change/", "/admin/tenants/enduser/"):
            r = client.get(url)
            assert r.status_code == 302 and "/admin/login/" in r["Location"], url
        r = _action(client, "delete_memories", data["active"])
        assert "/admin/login/" in r.redirect_chain[-1][0]
    data["active"].refresh_from_db()
    assert data["active"].status == "active"
    assert not MemoryEvent.objects.unscoped().exclude(action="created").exists()


def test_staff_of_another_tenant_sees_nothing_of_alice(alice, bob, alice_user, data):
    client = login(staff_for(bob, username="bobstaff"))
    listing = client.get(MEMORY_ADMIN).content.decode()
    assert "Bob-only secret memory" in listing
    assert "vegetarian" not in listing and "Belgian" not in listing
    assert alice.slug not in listing  # not even in the tenant filter
    for url in (f"{MEMORY_ADMIN}{data['active'].pk}/change/", f"/admin/tenants/tenant/{alice.pk}/change/",
                f"/admin/tenants/enduser/{alice_user.pk}/change/",
                f"/admin/chat_sessions/session/{data['session'].pk}/change/",
                f"/admin/chat_sessions/message/{data['message'].pk}/change/",
                f"{MEMORY_ADMIN}{data['active'].pk}/history/"):
        r = client.get(url)
        assert r.status_code in (302, 404), url
        assert "vegetarian" not in r.content.decode()
    users = client.get("/admin/tenants/enduser/").content.decode()
    assert alice_user.external_id not in users


def test_actions_and_edits_from_staff_of_another_tenant_are_refused(alice, bob, alice_user, data):
    client = login(staff_for(bob, username="bobstaff"))
    for action in ("approve", "reject", "expire", "delete_memories"):
        _action(client, action, data["pending"], data["active"])
    r = client.post(f"{MEMORY_ADMIN}{data['active'].pk}/change/", {"text": "hijacked"})
    assert r.status_code in (302, 403, 404)
    for m in (data["pending"], data["active"]):
        before = m.status
        m.refresh_from_db()
        assert m.status == before and "hijacked" not in m.text
    assert not MemoryEvent.objects.unscoped().exclude(action="created").exists()
    assert {p["status"] for p in points_of(alice, alice_user).values()} == {"active", "pending_review"}


def test_superuser_sees_every_tenant(alice, bob, data):
    admin_user = User.objects.create_superuser(username="root", password="pw")
    listing = login(admin_user).get(MEMORY_ADMIN).content.decode()
    assert "Bob-only secret memory" in listing and "The user is vegetarian" in listing


def test_staff_without_a_tenant_sees_no_memory_admin(data):
    client = login(staff_for(username="lonely"))
    assert client.get(MEMORY_ADMIN).status_code == 403
    assert "Memory records" not in client.get("/admin/").content.decode()
