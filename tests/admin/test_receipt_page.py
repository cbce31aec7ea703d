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
