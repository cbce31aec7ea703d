"""Every way to delete a memory takes its words out of what was derived from them, as the single delete does
(test_forgetting_api.py): the review queue's row button, a bulk delete by filter (REST and manage.py), deleting all
of a user's memories, and what a composed context's receipt and the assistant's stored tool calls repeat of them.
Measured where a client and a reviewer look: the REST API and the admin pages."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from memory.models import MemoryRecord
from tests.orchestration.test_forgetting_api import NURSE, TWO_THINGS, Caller, _eager, _everything_shown, _staff

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["_eager"]  # the module's autouse fixture: tasks run inline, as a worker would run them

QUEUE = "/admin/memory/memoryreview/"
FORGOTTEN = "[forgotten]"


def _nurse(user: Caller) -> list[dict]:
    found = [m for m in user.memories() if "nurse" in m["text"]]
    assert found
    return found


def test_a_delete_from_the_review_queue_takes_the_words_out(alice):
    ada = Caller(alice)
    sid = ada.session()
    ada.send(sid, NURSE)
    held = _nurse(ada)
    # Held for review as a tenant that reviews inferred memories would hold them.
    MemoryRecord.objects.for_tenant(alice).filter(pk__in=[m["id"] for m in held]).update(status="pending_review")
    staff = _staff(alice)
    for m in held:
        r = staff.post(f"{QUEUE}{m['id']}/review/", {"do": "delete"}, HTTP_REFERER=f"http://testserver{QUEUE}")
        assert r.status_code == 302, r.content
        assert ada.memory(m["id"])["status"] == "deleted"
    ada.send(sid, "What should I cook tonight?")
    ada.close(sid)
    assert ada.messages(sid)[0] == FORGOTTEN
    assert "nurse" not in _everything_shown(ada, [sid], "where do I work")


def test_a_bulk_delete_by_session_takes_the_words_out_and_leaves_other_sessions(alice):
    ada = Caller(alice)
    gone, kept = ada.tell(NURSE, TWO_THINGS), ada.tell("My sister Ruth lives in Lisbon.")
    r = ada.http.post(f"/api/v1/users/{ada.id}/memories/bulk-delete", {"session_id": gone}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["deleted"] >= 2 and not r.json()["more"]
    assert ada.messages(gone)[0] == FORGOTTEN
    shown = _everything_shown(ada, [gone, kept], "where do I work")
    for word in ("nurse", "St Mary", "green", "sushi"):
        assert word not in shown
    assert ada.messages(kept)[0] == "My sister Ruth lives in Lisbon."
    assert any("Lisbon" in m["text"] for m in ada.memories())


def test_a_bulk_delete_rewrites_each_store_once_however_many_memories_it_deletes(alice, monkeypatch):
    from orchestration import forgetting

    ada = Caller(alice)
    sessions = [ada.tell(NURSE, TWO_THINGS), ada.tell("My sister Ruth lives in Lisbon.", "I play the cello.")]
    calls = []
    for name in ("message_rows_rewrite", "context_text_rewrite", "receipts_text_rewrite"):
        real = getattr(forgetting, name)
        monkeypatch.setattr(forgetting, name, lambda *a, _real=real, _name=name, **kw: calls.append(_name) or
                            _real(*a, **kw))
    r = ada.http.post(f"/api/v1/users/{ada.id}/memories/bulk-delete", {"created_from": "2000-01-01T00:00:00Z"},
                      format="json")
    assert r.status_code == 200 and r.json()["deleted"] >= 4, r.content
    assert sorted(calls) == ["context_text_rewrite", "message_rows_rewrite", "receipts_text_rewrite"]
    assert [ada.messages(s)[0] for s in sessions] == [FORGOTTEN, FORGOTTEN]


def test_the_bulk_delete_command_takes_the_words_out(alice):
    ada = Caller(alice)
    sid = ada.tell(NURSE, "What should I cook tonight?")
    user = MemoryRecord.objects.for_tenant(alice).filter(user_id=ada.id).first().user
    out = io.StringIO()
    call_command("memories_bulk_delete", tenant=alice.slug, user=user.external_id, session=sid, stdout=out)
    assert out.getvalue().startswith("deleted ")
    assert ada.messages(sid)[0] == FORGOTTEN
    assert "nurse" not in _everything_shown(ada, [sid], "where do I work")


def test_deleting_all_memories_takes_every_word_out(alice, bob):
    ada, outsider = Caller(alice), Caller(bob, "Ada")
    first, second = ada.tell(NURSE), ada.tell(TWO_THINGS)
    theirs = outsider.tell(NURSE)
    r = ada.http.delete(f"/api/v1/users/{ada.id}/memories")
    assert r.status_code == 200 and r.json()["deleted"] >= 2, r.content
    assert ada.memories() == []
    shown = _everything_shown(ada, [first, second], "where do I work")
    for word in ("nurse", "St Mary", "green", "sushi"):
        assert word not in shown
    assert outsider.messages(theirs)[0] == NURSE  # another tenant's user of the same name keeps their words


def _receipts(user: Caller, session: str) -> list[dict]:
    r = user.http.get(f"/api/v1/sessions/{session}/receipts")
    assert r.status_code == 200, r.content
    return r.json()["results"]


def test_a_receipt_keeps_what_was_shown_and_its_score_but_not_the_deleted_words(alice):
    ada = Caller(alice)
    ada.tell(NURSE)
    later = ada.session()
    asked = "Do I still work as a nurse at St Mary's hospital?"
    r = ada.http.get(f"/api/v1/sessions/{later}/context", {"input": asked})
    assert r.status_code == 200, r.content
    [before] = _receipts(ada, later)
    assert "nurse" in before["query"]
    quoted = [i for i in before["included"] + before["left_out"] if "nurse" in i["text"]]
    assert quoted
    for m in _nurse(ada):
        ada.delete(m["id"])
    [after] = _receipts(ada, later)
    assert "nurse" not in json.dumps(after)
    assert FORGOTTEN in after["query"]
    items = {i["memory_id"]: i for i in after["included"] + after["left_out"]}
    for item in quoted:  # what was shown, ranked and scored how, stays; its words go
        kept = items[item["memory_id"]]
        assert kept["text"] == FORGOTTEN
        assert (kept["rank"], kept["score"], kept["section"], kept["tokens"]) == (
            item["rank"], item["score"], item["section"], item["tokens"])
    page = _staff(alice).get(f"/admin/orchestration/contextreceipt/{after['id']}/change/")
    assert page.status_code == 200
    assert "nurse" not in page.content.decode()


def test_the_assistants_tool_calls_and_their_results_lose_the_deleted_words(alice):
    ada = Caller(alice)
    sid = ada.session()
    args = json.dumps({"text": "Ada works as a nurse at St Mary's hospital.", "kind": "fact"})
    items = [{"role": "user", "content": NURSE},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"id": "c1", "type": "function", "function": {"name": "remember", "arguments": args}}]},
             {"role": "tool", "tool_call_id": "c1",
              "content": json.dumps({"stored": "Ada works as a nurse at St Mary's hospital."})},
             {"role": "assistant", "content": "I will remember that."}]
    r = ada.http.post(f"/api/v1/sessions/{sid}/messages", {"messages": items}, format="json")
    assert r.status_code == 201, r.content
    for m in _nurse(ada):
        ada.delete(m["id"])
    r = ada.http.get(f"/api/v1/sessions/{sid}/messages")
    stored = r.json()["results"]
    assert "nurse" not in json.dumps(stored)
    call = stored[1]["tool_calls"][0]
    assert call["id"] == "c1" and call["function"]["name"] == "remember"
    assert json.loads(call["function"]["arguments"]) == {"text": FORGOTTEN, "kind": "fact"}
    assert json.loads(stored[2]["content"]) == {"stored": FORGOTTEN}
