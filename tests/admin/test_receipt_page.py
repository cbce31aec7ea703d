"""A receipt reads as a page: its sections' tokens in a table, each item given to the model linked to its memory and
source message with its score rounded, and what was left out and why."""
from __future__ import annotations

import html
import re
import uuid

import pytest
from django.test import Client

from infra import clock
from orchestration.receipts import receipt_write
from tests.admin.admin_world import admin_world

pytestmark = pytest.mark.django_db

RECEIPTS = "/admin/orchestration/contextreceipt/"


def _page(root, receipt) -> str:
    client = Client()
    client.force_login(root)
    r = client.get(f"{RECEIPTS}{receipt.pk}/change/")
    assert r.status_code == 200
    return html.unescape(r.content.decode())


def _section(page, heading) -> str:
    start = page.index(heading)
    return page[start:page.index("</table>", start)]


def test_a_receipt_reads_as_sections_what_was_given_and_what_was_left_out(alice, dana, root):
    w = admin_world(alice, dana)
    page = _page(root, w["receipt"])
    sections = _section(page, "Sections — 120 tokens of a 800-token budget")
    rows = re.findall(r"<tr><td>(.*?)</td><td class=\"num\">(\d+)</td><td class=\"num\">(\d+)%</td></tr>", sections)
    assert rows == [("system prompt and tools", "40", "33"), ("standing profile", "20", "17"),
                    ("retrieved memories", "30", "25"), ("recent turns", "30", "25")]
    given = _section(page, "Given to the model (2 memories, 15 tokens)")
    assert given.index("standing profile") < given.index("retrieved memories")  # as the context holds them
    boston, message = w["boston"], w["messages"][0]
    assert f'href="/admin/memory/memoryrecord/{boston.pk}/change/">{boston.text}</a>' in given
    assert f'href="/admin/chat_sessions/message/{message.pk}/change/"' in given and "#1 user" in given
    assert ">0.81<" in given and "relevance 0.61 · recency 0.20" in given
    assert "in the profile by kind, not scored" in given
    left = _section(page, "Left out (1, 9 tokens) and why")
    assert w["jfk"].text in left and "Did not fit retrieval's token budget" in left and "(now superseded)" in left
    assert "0.8123456789" not in page and "0.61234567" not in page and f'["{message.pk}"]' not in page
    assert f"Context for {dana} in “Hotel”" in page


def test_a_forgotten_memory_and_an_erased_message_are_named_as_such(alice, dana, root):
    w = admin_world(alice, dana)
    receipt = receipt_write(payload={
        "id": str(uuid.uuid4()), "tenant_id": str(alice.pk), "user_id": str(dana.pk),
        "session_id": str(w["later"].pk), "surface": "mcp", "created_at": clock.now().isoformat(), "query": "q",
        "budget": 0, "total_tokens": 0, "breakdown": {}, "memory_status": "ok", "items": [
            {"memory_id": str(uuid.uuid4()), "included": True, "reason": "", "section": "memories", "rank": 1,
             "kind": "fact", "text": "Dana's passport number was forgotten.", "score": 0.5, "score_parts": {},
             "tokens": 7, "source_message_ids": [str(uuid.uuid4())]}]})
    page = _page(root, receipt)
    given = _section(page, "Given to the model")
    assert "Dana's passport number was forgotten. <span class=\"gone\">(memory forgotten since)</span>" in given
    assert "1 erased" in given
    assert "Nothing ranked in was left out." in page


def _receipt(alice, dana, session, *, breakdown, items, total=120):
    return receipt_write(payload={
        "id": str(uuid.uuid4()), "tenant_id": str(alice.pk), "user_id": str(dana.pk), "session_id": str(session.pk),
        "surface": "openai", "created_at": clock.now().isoformat(), "query": "q", "budget": 800,
        "total_tokens": total, "breakdown": breakdown, "memory_status": "ok", "items": items})


def test_an_untitled_session_is_named_by_when_it_was_opened_not_as_a_session(alice, dana, root):
    """The heading read "Context for Dana in “a session”"."""
    from orchestration.sessions import session_open

    session, _ = session_open(tenant=alice, user=dana)
    page = _page(root, _receipt(alice, dana, session, breakdown={"system": 40}, items=[], total=40))
    assert "“a session”" not in page
    assert f"Context for {dana} in the session opened {session.opened_at:%d %b %Y %H:%M}" in page


def test_a_score_part_retrieval_did_not_reach_reads_no_match_not_none(alice, dana, root):
    """A memory found by meaning only showed "keyword None"."""
    w = admin_world(alice, dana)
    page = _page(root, _receipt(alice, dana, w["later"], breakdown={"memories": 30}, items=[
        {"memory_id": str(w["boston"].pk), "included": True, "reason": "", "section": "memories", "rank": 1,
         "kind": "fact", "text": w["boston"].text, "score": 0.7, "score_parts": {"dense": 0.7, "keyword": None},
         "tokens": 9, "source_message_ids": []}]))
    given = _section(page, "Given to the model")
    assert "keyword None" not in given and "None" not in given
    assert "keyword no match" in given


def test_the_bridge_section_shows_the_bridges_text_and_its_session(alice, dana, root):
    """The bridge held a third of the context's tokens and the page did not say what it said."""
    w = admin_world(alice, dana)
    page = _page(root, _receipt(alice, dana, w["later"], breakdown={"system": 40, "bridge": 40, "recent": 40},
                                items=[]))
    sections = _section(page, "Sections — 120 tokens")
    assert sections.index("bridge from the last session") < sections.index("Planned a flight to Boston.")
    assert f'/admin/chat_sessions/session/{w["earlier"].pk}/change/">“Flights to Boston”</a>' in sections


def test_a_source_message_names_its_session(alice, dana, root):
    """Sources read "#1 user" without saying which session the message is in."""
    w = admin_world(alice, dana)
    given = _section(_page(root, w["receipt"]), "Given to the model")
    earlier = w["earlier"]
    assert re.search(r"#1 user</a> in <a href=\"/admin/chat_sessions/session/" + str(earlier.pk)
                     + r"/change/\">“Flights to Boston”</a>", given)


def test_the_sections_add_up_to_the_total_with_the_framing_in_a_row_of_its_own(alice, dana, root):
    w = admin_world(alice, dana)
    page = _page(root, _receipt(alice, dana, w["later"], breakdown={"system": 43, "recent": 50}, items=[], total=100))
    sections = _section(page, "Sections — 100 tokens")
    assert re.search(r"<td>message framing and reply priming</td><td class=\"num\">7</td>", sections)
