"""A user's page and the memory list lead with the distilled memory (profile, instructions, preferences, facts,
decisions, open goals, each with its source); the transcript's passages and the session notes sit on their own tabs,
counted; rows per user message are shown, so a flood of extraction is seen."""
from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from memory.actions import memory_create
from memory.sources import SourceMessage

pytestmark = pytest.mark.django_db

USERS = "/admin/tenants/enduser/"
MEMORIES = "/admin/memory/memoryrecord/"


def _source(m):
    return SourceMessage(id=str(m.pk), session_id=m.session_id, created_at=m.created_at)


@pytest.fixture
def layered(alice, dana):
    """Two user messages, one assistant reply; what a reviewer distils from them and what is kept for search."""
    from orchestration.messages import messages_append
    from orchestration.sessions import session_open
    from sessions.services import NewMessage

    session, _ = session_open(tenant=alice, user=dana, title="Trip")
    msgs = messages_append(tenant=alice, session_id=session.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content="I avoid United. Always answer in French in every reply."),
        NewMessage(role="assistant", content="```html <!doctype html>```"),
        NewMessage(role="user", content="I need a flight to Boston.")])
    user_said, assistant_said, later = msgs

    def make(kind, text, message, **kw):
        return memory_create(tenant=alice, user=dana, kind=kind, text=text, source=_source(message), **kw)

    rows = {
        "preference": make("preference", "Dana avoids United.", user_said, subject="likes: united", value="negative"),
        "instruction": make("procedure", "Dana asked the assistant: Always answer in French in every reply.",
                            user_said),
        "fact": make("fact", "Dana's destination is Boston.", later, subject="destination", value="Boston"),
        "goal": make("goal", "Dana needs a flight to Boston.", later),
        "decision": make("note", "Decided: fly JetBlue to Boston.", later, metadata={"note": "decision"}),
        "note": make("note", "Topics: flights, Boston.", later, metadata={"note": "topic"}),
        "passages": [make("event", "Dana: I avoid United.", user_said),
                     make("event", "Dana: I need a flight to Boston.", later)]
        + [make("event", f"Assistant: ```html <!doctype html>``` part {i}", assistant_said, source_type="assistant")
           for i in range(5)],
    }
    return {"session": session, "messages": msgs, **rows}


def _get(root, url) -> str:
    client = Client()
    client.force_login(root)
    r = client.get(url)
    assert r.status_code == 200, (url, r.status_code)
    return html.unescape(r.content.decode())


def test_the_user_page_leads_with_the_distilled_memory_each_with_its_source(alice, dana, layered, root):
    page = _get(root, f"{USERS}{dana.pk}/change/")
    order = ["Standing profile", "Instructions, preferences and facts by subject", "Decisions (1)",
             "Open goals (1)", "Recent sessions"]
    assert [page.index(h) for h in order] == sorted(page.index(h) for h in order)
    groups = page[page.index(order[1]):page.index(order[2])]
    assert groups.index("Instructions") < groups.index("Preferences") < groups.index("Facts")
    assert "avoids: United" in groups and "“I avoid United. Always answer in French" in groups
    assert "Decided: fly JetBlue to Boston." in page[page.index(order[2]):page.index(order[3])]
    goals = page[page.index(order[3]):page.index(order[4])]
    assert "Dana needs a flight to Boston." in goals and "“I need a flight to Boston.”" in goals
    assert "part 3" not in page and "Topics: flights" not in page  # passages and notes wait on their tabs
    tabs = re.findall(r'<nav class="tabs">(.*?)</nav>', page, re.S)[0]
    assert "Distilled memory (5)" in tabs and "Transcript passages (7)" in tabs and "Session notes (1)" in tabs


def test_rows_per_user_message_are_counted_and_a_flood_is_flagged(alice, dana, layered, root):
    page = _get(root, f"{USERS}{dana.pk}/change/")
    assert "2 user messages → 13 active rows (6.5 per user message: extraction floods)" in page
    assert "7 transcript passages (2 the user's words, 5 the assistant's), 1 session note line" in page
    assert "<details open>" in page  # the counts are unfolded when extraction floods
    top = page[page.index("<caption>the messages most rows came from</caption>"):]
    assert re.findall(r"<td>(\d+)", top.split("</table>")[0]) == ["5", "5", "3"]  # the most rows first
    assert "(5 passages)</span></td>" in top and "#2 assistant</a>" in top


def test_passages_and_notes_have_their_own_tabs(alice, dana, layered, root):
    passages = _get(root, f"{USERS}{dana.pk}/change/?tab=passages")
    assert "Transcript passages (7: 2 the user's words, 5 the assistant's)" in passages
    assert "Assistant: ```html <!doctype html>``` part 4" in passages and "the assistant" in passages
    assert "Standing profile" not in passages
    assert f"{MEMORIES}?user__id__exact={dana.pk}&layer=passages" in passages
    notes = _get(root, f"{USERS}{dana.pk}/change/?tab=notes")
    assert "Topics: flights, Boston." in notes and "Decided: fly JetBlue" not in notes
    assert "Standing profile" in _get(root, f"{USERS}{dana.pk}/change/?tab=%3Cscript%3E")


def test_the_memory_list_leads_with_the_distilled_layer_and_counts_the_others(alice, dana, layered, root):
    listing = _get(root, f"{MEMORIES}?user__id__exact={dana.pk}")
    assert "Dana avoids United." in listing and "Decided: fly JetBlue" in listing
    assert "part 1" not in listing and "Topics: flights" not in listing
    assert "distilled memory (5)" in listing and "transcript passages (7)" in listing
    assert "session notes (1)" in listing and "all (13 active)" in listing
    passages = _get(root, f"{MEMORIES}?user__id__exact={dana.pk}&layer=passages")
    assert "part 1" in passages and "Dana avoids United." not in passages
    # A count's link lists what it counted, whatever the layer.
    events = _get(root, f"{MEMORIES}?user__id__exact={dana.pk}&status__exact=active&kind__exact=event")
    assert "part 1" in events
    assert "part 1" in _get(root, f"{MEMORIES}?user__id__exact={dana.pk}&layer=all")


def test_the_transcript_counts_the_rows_drawn_from_each_message(alice, dana, layered, root):
    page = _get(root, f"/admin/chat_sessions/session/{layered['session'].pk}/change/")
    assert re.findall(r'class="rows-drawn">(\d+) rows?<', page) == ["3", "5", "5"]
