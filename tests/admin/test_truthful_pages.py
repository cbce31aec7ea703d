"""What a reviewer's pages say is what is so: a message keeps its indentation, an MCP remember's history says the
client's model wrote it, the outbox is named in English, titles end at a word, and the user filter has no stray
separator."""
from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from infra.labels import label_cut
from memory.actions import memory_remember
from memory.models import MemoryEvent, MemoryRecord, SourceType
from orchestration.messages import messages_append
from orchestration.sessions import session_open
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db

CODE = "def greet(name):\n    if name:\n        return f'hi {name}'\n    return 'hi'"


def _page(user, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, url
    return html.unescape(response.content.decode())


def test_a_messages_page_keeps_the_indentation_of_its_code(alice, dana, root):
    """The page rendered the text with <br>s, which drops each line's leading spaces."""
    session, _ = session_open(tenant=alice, user=dana)
    [message] = messages_append(tenant=alice, session_id=session.pk, enqueue_extraction=False,
                                items=[NewMessage(role="user", content=f"Why does this fail?\n{CODE}")])
    page = _page(root, f"/admin/chat_sessions/message/{message.pk}/change/")
    shown = re.search(r'<pre class="message-content"[^>]*>(.*?)</pre>', page, re.DOTALL)
    assert shown and CODE in shown.group(1)
    assert "white-space:pre-wrap" in shown.group(0)


def test_an_mcp_remember_is_written_by_the_clients_model_in_its_history(alice, dana, root):
    """The queue said the client's model wrote it; the memory's timeline said "Inferred from what the user said"."""
    record, _ = memory_remember(tenant=alice, user=dana, kind="preference", text="Dana prefers aisle seats.",
                                source_type=SourceType.INFERRED, confidence=0.6, actor_type=MemoryEvent.Actor.SYSTEM,
                                actor_id="mcp")
    page = _page(root, f"/admin/memory/memoryrecord/{record.pk}/change/")
    timeline = page[page.index("What happened to it"):]
    assert "Written by the client's model through MCP remember" in timeline
    assert "Inferred from what the user said" not in timeline


def test_the_vector_outbox_is_named_in_english(root):
    page = _page(root, "/admin/")
    assert "Vector outboxs" not in page and "Vector outbox" in page


@pytest.mark.parametrize("text, limit, expected", [
    ("Dana is planning a long weekend in Porto with a day trip to the Douro", 50,
     "Dana is planning a long weekend in Porto with a…"),
    ("Short enough.", 50, "Short enough."),
    ("Supercalifragilisticexpialidocious words", 10, "Supercali…"),
])
def test_a_label_ends_at_a_word_with_an_ellipsis(text, limit, expected):
    assert label_cut(text, limit) == expected and len(label_cut(text, limit)) <= limit


def test_a_memorys_title_ends_at_a_word(alice, dana, root):
    """Titles were cut mid-word: "fact: Dana is planning a long weekend in Porto with a day trip to th"."""
    record, _ = memory_remember(tenant=alice, user=dana, kind="fact", actor_type=MemoryEvent.Actor.SYSTEM,
                                text="Dana is planning a long weekend in Porto with a day trip to the Douro valley.")
    assert str(record) == "fact: Dana is planning a long weekend in Porto with a day trip to…"
    page = _page(root, f"/admin/memory/memoryrecord/{record.pk}/change/")
    assert "<h2>fact: Dana is planning a long weekend in Porto with a day trip to…</h2>" in page


def test_the_user_filter_names_the_user_with_no_stray_separator(alice, dana, root):
    """ "Showing only Craig (craig) ·" with "all users ✕" wrapped to the next line read as a stray dot."""
    page = _page(root, f"/admin/memory/memoryrecord/?user__id__exact={dana.pk}")
    active = re.search(r'<p class="user-filter-active"[^>]*>(.*?)</p>', page, re.DOTALL).group(1)
    assert re.sub(r"<[^>]+>", "", active).strip() == f"Showing only {dana}"
    assert "·" not in active
    assert re.search(r'<p class="user-filter-clear"[^>]*><a href="[^"]+">✕ show all users</a></p>', page)
    assert MemoryRecord.objects.for_tenant(alice).count() == 0


def test_a_rejected_memory_and_a_deleted_one_read_apart_in_every_list(alice, dana, root):
    """Both set the status to deleted: the memory list, the memory's page, the session's transcript and the
    message's page said "deleted" for each, and only the history told them apart."""
    from memory.actions import memory_create, memory_delete, memory_reject
    from memory.actions.records import SourceMessage

    alice.review_inferred = True
    alice.save(update_fields=["review_inferred"])
    session, _ = session_open(tenant=alice, user=dana)
    [message] = messages_append(tenant=alice, session_id=session.pk, enqueue_extraction=False,
                                items=[NewMessage(role="user", content="I might like window seats, or aisle.")])
    source = SourceMessage(id=str(message.pk), session_id=session.pk, created_at=message.created_at)
    rejected = memory_create(tenant=alice, user=dana, kind="preference", text="Dana probably likes window seats.",
                             source_type="inferred", confidence=0.5, source=source)
    deleted = memory_create(tenant=alice, user=dana, kind="preference", text="Dana probably likes aisle seats.",
                            source_type="inferred", confidence=0.5, source=source)
    memory_reject(tenant=alice, memory=rejected, actor_type="staff", actor_id="root")
    memory_delete(tenant=alice, memory=deleted, actor_type="staff", actor_id="root")

    listed = _page(root, "/admin/memory/memoryrecord/?layer=all")
    assert re.search(r"window seats.*?status-rejected\">Rejected<", listed, re.DOTALL)
    assert re.search(r"aisle seats.*?status-deleted\">Deleted<", listed, re.DOTALL)
    assert 'status-rejected">Rejected<' in _page(root, f"/admin/memory/memoryrecord/{rejected.pk}/change/")
    assert 'status-deleted">Deleted<' in _page(root, f"/admin/memory/memoryrecord/{deleted.pk}/change/")
    for url in (f"/admin/chat_sessions/session/{session.pk}/change/",
                f"/admin/chat_sessions/message/{message.pk}/change/"):
        page = _page(root, url)
        assert re.search(r"window seats.*?status-rejected\">rejected<", page, re.DOTALL), url
        assert re.search(r"aisle seats.*?status-deleted\">deleted<", page, re.DOTALL), url
