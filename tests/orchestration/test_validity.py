"""Validity in time: a memory holds from when it was said until what superseded it was said; retrieval as_of a
time (REST search, the recall tool) returns the value that held then, with its provenance."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memory.actions import memory_remember
from memory.models import MemoryRecord, MemoryStatus
from orchestration.messages import messages_append, source_of
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db(transaction=True)

MARCH = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
JUNE = datetime(2024, 6, 1, 9, 0, tzinfo=timezone.utc)


@pytest.fixture
def moved(alice, alice_user, alice_session):
    """Ada lived in Lisbon (said in March), then moved to Porto (said in June): the second supersedes the first."""
    said = messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content="I live in Lisbon.", created_at=MARCH),
        NewMessage(role="user", content="I moved, I live in Porto now.", created_at=JUNE)])
    lisbon, outcome = memory_remember(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Lisbon.",
                                      subject="home city", value="Lisbon", source=source_of(said[0]))
    assert outcome == "created"
    porto, outcome = memory_remember(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.",
                                     subject="home city", value="Porto", source=source_of(said[1]))
    assert outcome == "superseded"
    return {"lisbon": lisbon, "porto": porto, "messages": said}


def _search(client, user, **params):
    from urllib.parse import urlencode

    return client.get(f"/api/v1/users/{user.pk}/memories/search?{urlencode({'q': 'where does Ada live', **params})}")


def test_supersede_closes_the_old_memorys_validity_when_the_new_value_was_said(moved):
    lisbon = MemoryRecord.objects.unscoped().get(pk=moved["lisbon"].pk)
    porto = MemoryRecord.objects.unscoped().get(pk=moved["porto"].pk)
    assert lisbon.status == MemoryStatus.SUPERSEDED
    assert (lisbon.valid_from, lisbon.valid_to) == (MARCH, JUNE)
    assert (porto.valid_from, porto.valid_to) == (JUNE, None)


def test_search_as_of_a_date_before_the_supersede_returns_the_old_value_with_provenance(alice_client, alice_user,
                                                                                         moved):
    now = _search(alice_client, alice_user).json()["results"]
    assert [r["text"] for r in now] == ["Ada lives in Porto."]

    r = _search(alice_client, alice_user, as_of="2024-04-15")
    assert r.status_code == 200, r.content
    [then] = r.json()["results"]
    assert then["text"] == "Ada lives in Lisbon."
    assert then["source_message_id"] == str(moved["messages"][0].pk)
    assert then["provenance"].startswith("you said on 1 March 2024")
    assert then["provenance"].endswith("superseded on 1 June 2024")
    assert then["valid_from"].startswith("2024-03-01") and then["valid_to"].startswith("2024-06-01")

    [later] = _search(alice_client, alice_user, as_of="2024-07-01T00:00:00Z").json()["results"]
    assert later["text"] == "Ada lives in Porto." and later["valid_to"] is None
    # Before anything was said, nothing held.
    assert _search(alice_client, alice_user, as_of="2024-01-01").json()["results"] == []


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-01", "2024-04-15T25:00"])
def test_a_malformed_as_of_is_a_400_with_a_reason(alice_client, alice_user, moved, bad):
    r = _search(alice_client, alice_user, as_of=bad)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_as_of"


def test_the_recall_tool_answers_as_of_a_date(alice, alice_user, alice_session, moved):
    from assistant.tools import ToolContext, tool_execute

    ctx = ToolContext(tenant=alice, user=alice_user, session=alice_session, user_message=None, goal="")
    status, then = tool_execute(ctx, "recall", {"query": "where does Ada live", "as_of": "2024-04-15"})
    assert status == "ok", then
    assert [m["text"] for m in then["memories"]] == ["Ada lives in Lisbon."]
    assert then["memories"][0]["valid_to"].startswith("2024-06-01")
    status, now = tool_execute(ctx, "recall", {"query": "where does Ada live"})
    assert [m["text"] for m in now["memories"]] == ["Ada lives in Porto."]
    status, bad = tool_execute(ctx, "recall", {"query": "where", "as_of": "last spring"})
    assert status == "error" and "as_of" in bad["error"]
