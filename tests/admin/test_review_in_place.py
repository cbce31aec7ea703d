"""Review in place: each held memory is approved, rejected, edited or deleted on its own row of the queue, and the
memory's page opens with its buttons and its text; the repeated-memories page lists only texts stored twice
(passages included)."""
from __future__ import annotations

import html

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from memory.actions import memory_create
from memory.models import MemoryEvent, MemoryRecord

pytestmark = pytest.mark.django_db

QUEUE = "/admin/memory/memoryreview/"
MEMORIES = "/admin/memory/memoryrecord/"


def _staff(tenant, *, username="reviewer", change=True) -> Client:
    user = User.objects.create_user(username=username, password="pw", is_staff=True)
    perms = Permission.objects.filter(content_type__app_label__in=["memory", "tenants", "chat_sessions"])
    user.user_permissions.set(perms if change else perms.filter(codename__startswith="view_"))
    tenant.staff_users.add(user)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def held(alice, dana):
    alice.review_inferred = True
    alice.save(update_fields=["review_inferred"])
    return [memory_create(tenant=alice, user=dana, kind="preference", text=f"Dana probably likes city {i}.",
                          source_type="inferred", confidence=0.5) for i in range(3)]


def _row(client, memory, do, **extra):
    return client.post(f"{QUEUE}{memory.pk}/review/", {"do": do, **extra},
                       HTTP_REFERER=f"http://testserver{QUEUE}?user__id__exact={memory.user_id}&p=0")


def test_each_row_of_the_queue_carries_its_buttons_and_edit_box(alice, dana, held):
    page = _staff(alice).get(QUEUE).content.decode()
    for m in held:
        assert f'formaction="{QUEUE}{m.pk}/review/"' in page
        assert f'name="text-{m.pk}"' in page
    assert page.count('name="do" value="approve"') == 3 and page.count('value="edit_approve"') == 3


@pytest.mark.parametrize("do, status, action", [("approve", "active", "approved"), ("reject", "deleted", "rejected"),
                                                ("delete", "deleted", "deleted")])
def test_a_rows_button_acts_as_the_staff_user_and_returns_to_the_queue_where_it_was(alice, dana, held, do, status,
                                                                                    action):
    r = _row(_staff(alice), held[1], do)
    assert r.status_code == 302 and r["Location"] == f"{QUEUE}?user__id__exact={dana.pk}&p=0"
    held[1].refresh_from_db()
    assert held[1].status == status
    event = MemoryEvent.objects.for_tenant(alice).filter(memory_uuid=held[1].pk).order_by("id").last()
    assert (event.action, event.actor_type, event.actor_id) == (action, "staff", "reviewer")
    held[0].refresh_from_db()
    assert held[0].status == "pending_review"


def test_a_row_edited_and_approved_in_place(alice, dana, held):
    client = _staff(alice)
    r = _row(client, held[0], "edit", **{f"text-{held[0].pk}": "Dana likes city 0."})
    assert r.status_code == 302
    held[0].refresh_from_db()
    assert (held[0].text, held[0].status) == ("Dana likes city 0.", "pending_review")
    _row(client, held[0], "edit_approve", **{f"text-{held[0].pk}": "Dana loves city 0."})
    held[0].refresh_from_db()
    assert (held[0].text, held[0].status) == ("Dana loves city 0.", "active")
    actions = list(MemoryEvent.objects.for_tenant(alice).filter(memory_uuid=held[0].pk).order_by("id")
                   .values_list("action", flat=True))
    assert actions[-3:] == ["updated", "updated", "approved"]


def test_a_bad_row_edit_is_a_message_and_a_bad_button_a_400(alice, dana, held):
    client = _staff(alice)
    r = _row(client, held[0], "edit_approve", **{f"text-{held[0].pk}": "   "})
    assert r.status_code == 302
    messages = [str(m) for m in r.wsgi_request._messages]
    assert any(m.startswith("Not saved:") for m in messages), messages
    held[0].refresh_from_db()
    assert (held[0].text, held[0].status) == ("Dana probably likes city 0.", "pending_review")
    assert _row(client, held[0], "explode").status_code == 400
    assert client.get(f"{QUEUE}{held[0].pk}/review/").status_code == 405


def test_a_row_no_longer_held_is_reported_not_acted_on(alice, dana, held):
    client = _staff(alice)
    _row(client, held[0], "approve")
    r = _row(client, held[0], "reject")
    assert r.status_code == 302
    assert any("no longer awaits review" in str(m) for m in r.wsgi_request._messages)
    held[0].refresh_from_db()
    assert held[0].status == "active"


def test_rows_of_another_tenant_are_not_found_and_read_only_staff_are_refused(alice, bob, dana, held):
    assert _row(_staff(bob, username="bobstaff"), held[0], "approve").status_code == 404
    assert _row(_staff(alice, username="reader", change=False), held[0], "approve").status_code == 403
    held[0].refresh_from_db()
    assert held[0].status == "pending_review"


def test_the_queue_has_six_columns_and_shows_where_a_memory_without_a_message_came_from(alice, dana, held):
    from memory.actions import memory_remember

    memory_remember(tenant=alice, user=dana, kind="fact", text="Dana's seat is 14C.", source_type="inferred",
                    confidence=0.6, actor_id="mcp")
    page = html.unescape(_staff(alice).get(QUEUE).content.decode())
    head = page[page.index("<thead>"):page.index("</thead>")]
    assert head.count('<th scope="col"') == 6  # the checkbox, memory, would replace, source, user and date, review
    assert "written by the client's model through MCP remember" in page
    assert "preference · inferred · confidence 0.50" in page


def test_the_memory_page_opens_with_its_buttons_and_its_text_and_folds_the_lifecycle(alice, dana, held):
    page = _staff(alice).get(f"{MEMORIES}{held[0].pk}/change/").content.decode()
    assert page.index('name="_approve"') < page.index('name="text"') < page.index("Provenance")
    assert page.index("Provenance") < page.index("Lifecycle")
    lifecycle = page[page.index("Lifecycle") - 400:page.index("Lifecycle")]
    assert "<details" in lifecycle or "collapse" in lifecycle


def test_repeats_include_passages_and_leave_out_pairs_that_only_mean_alike(alice, dana):
    def make(text, kind="event", **kw):
        return memory_create(tenant=alice, user=dana, kind=kind, text=text, **kw)

    same = [make("Assistant: ```html <!") for _ in range(3)]
    near = [make("Dana: I need the report by Friday, please."), make("Dana: I need the report by Friday please!")]
    make("Sam needs help with the implementation details.", kind="goal")
    make("Sam needs to plan tasks.", kind="goal")
    make("Sam wants to make sure Sam is doing this correctly.", kind="goal")
    page = html.unescape(_staff(alice).get(f"{QUEUE}duplicates/{dana.pk}/").content.decode())
    rows = page.split("<tr>")[2:]
    # three pairs of the three identical passages, and the two near-identical ones
    assert len(rows) == 4, [r[:300] for r in rows]
    assert sum("Assistant: ```html <!" in r for r in rows) == 3
    assert any(near[0].text in r and near[1].text in r for r in rows)
    assert "plan tasks" not in page and "implementation details" not in page
    assert all(m.status == "active" for m in MemoryRecord.objects.for_tenant(alice).filter(pk__in=[s.pk for s in same]))
