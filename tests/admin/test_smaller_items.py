"""The session page reads as a conversation (a heading in words, the transcript first), sessions opened at one
instant keep one order, erasing a user says it cannot be undone and asks for their id typed, and history shows the
time of each change."""
from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.test import Client

from memory.actions import memory_create
from sessions.models import Session
from tenants.models import EndUser
from tests.admin.admin_world import admin_world

pytestmark = pytest.mark.django_db

USERS = "/admin/tenants/enduser/"
SESSIONS = "/admin/chat_sessions/session/"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_session_page_is_headed_in_words_and_opens_with_its_transcript(alice, dana, root):
    world = admin_world(alice, dana)
    session = world["earlier"]
    page = html.unescape(_client(root).get(f"{SESSIONS}{session.pk}/change/").content.decode())
    heading = re.search(r"<h2>(.*?)</h2>", page).group(1)
    assert heading == f"Flights to Boston — {dana}, {session.opened_at:%d %b %Y %H:%M}"
    assert str(session.pk) not in heading
    transcript = page.index('class="transcript"')
    assert page.index("I avoid United and my destination is Boston.") > transcript
    assert transcript < page.index("Last activity at") and transcript < page.index("Close reason")
    assert "4 messages" in page[:transcript]


def test_sessions_opened_at_one_instant_are_listed_in_one_order(alice, dana, root):
    from orchestration.sessions import session_open

    sessions = []
    for _ in range(4):
        session, _ = session_open(tenant=alice, user=dana)
        sessions.append(session)
    instant = sessions[0].opened_at
    for i, s in enumerate(sessions):  # as an import without timestamps leaves them: one opening, later activity
        Session.objects.for_tenant(alice).filter(pk=s.pk).update(opened_at=instant,
                                                                last_activity_at=instant + timedelta(minutes=i))
    expected = [str(s.pk) for s in reversed(sessions)]
    client = _client(root)
    for url in (f"{USERS}{dana.pk}/change/", f"{SESSIONS}?user__id__exact={dana.pk}"):
        page = client.get(url).content.decode()
        found = [m for m in re.findall(rf"{SESSIONS}([0-9a-f-]{{36}})/change/", page)]
        listed = list(dict.fromkeys(found))
        assert listed == expected, url


def test_erasing_a_user_says_it_cannot_be_undone_and_asks_for_their_id(alice, dana, root):
    memory_create(tenant=alice, user=dana, kind="fact", text="Dana lives in Ghent.")
    client = _client(root)
    url = f"{USERS}{dana.pk}/delete/"
    page = client.get(url).content.decode()
    assert "cannot be undone" in page and 'name="confirm"' in page and dana.external_id in page
    for typed in ("", "dana"):
        r = client.post(url, {"post": "yes", "confirm": typed})
        assert r.status_code == 400 and "Not erased" in r.content.decode()
        assert EndUser.objects.for_tenant(alice).filter(pk=dana.pk).exists()
    r = client.post(url, {"post": "yes", "confirm": f" {dana.external_id} "})
    assert r.status_code == 302
    assert not EndUser.objects.for_tenant(alice).filter(pk=dana.pk).exists()


def test_erasing_selected_users_asks_how_many(alice, dana, root):
    from tenants.services import end_user_create

    olga = end_user_create(tenant=alice, external_id="olga")
    client = _client(root)
    chosen = {"action": "delete_selected", "_selected_action": [str(dana.pk), str(olga.pk)], "index": 0}
    page = client.post(USERS, chosen).content.decode()
    assert "Erasing 2 users cannot be undone" in page
    r = client.post(USERS, {**chosen, "post": "yes", "confirm": "1"})
    assert r.status_code == 400 and "Not erased" in r.content.decode()
    assert EndUser.objects.for_tenant(alice).count() == 2
    r = client.post(USERS, {**chosen, "post": "yes", "confirm": "2"})
    assert r.status_code == 302 and not EndUser.objects.for_tenant(alice).exists()


def test_history_shows_the_time_of_each_change(alice, dana, root):
    memory = memory_create(tenant=alice, user=dana, kind="fact", text="Dana lives in Ghent.")
    page = _client(root).get(f"/admin/memory/memoryevent/?user__id__exact={dana.pk}").content.decode()
    assert f">{memory.created_at:%Y-%m-%d %H:%M}<" in page
