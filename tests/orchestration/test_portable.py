"""The portable memory format: export → erase → import gives the same search results, with history, validity and
provenance (message external ids, session dates) kept; importing twice writes once; another tenant can import it;
a newer format version or a malformed line is a 400 that writes nothing; a secret in a file is never stored."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from infra.vector_store import get_vector_store
from memory.actions import memory_create, memory_remember
from memory.models import MemoryEvent, MemoryRecord
from orchestration.messages import messages_append, source_of
from orchestration.sessions import session_open
from sessions.models import Message
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db(transaction=True)

QUERIES = ["where does Ada live", "what does Ada eat", "Ada's job", "climbing"]


def at(month: int, day: int = 1) -> datetime:
    return datetime(2024, month, day, 9, 0, tzinfo=timezone.utc)


@pytest.fixture
def history(alice, alice_user):
    """Two dated sessions with external message ids; memories citing them, one superseded, one plain."""
    first, _ = session_open(tenant=alice, user=alice_user, title="spring")
    said = messages_append(tenant=alice, session_id=first.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content="I live in Lisbon.", external_id="D1:1", created_at=at(3)),
        NewMessage(role="user", content="I am vegetarian.", external_id="D1:2", created_at=at(3, 2)),
        NewMessage(role="user", content="I work as a nurse.", external_id="D1:3", created_at=at(3, 3))])
    second, _ = session_open(tenant=alice, user=alice_user, title="summer")
    later = messages_append(tenant=alice, session_id=second.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content="I moved to Porto.", external_id="D2:1", created_at=at(6)),
        NewMessage(role="user", content="I went climbing at Arrabida.", external_id="D2:2", created_at=at(6, 2))])
    memory_remember(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Lisbon.", subject="home city",
                    value="Lisbon", source=source_of(said[0]))
    memory_remember(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.", subject="home city",
                    value="Porto", source=source_of(later[0]))
    for message, text, kind in [(said[1], "Ada is vegetarian.", "preference"), (said[2], "Ada works as a nurse.",
                                                                                  "fact"),
                                (later[1], "Ada went climbing at Arrabida.", "event")]:
        memory_create(tenant=alice, user=alice_user, kind=kind, text=text, source=source_of(message),
                      session_id=message.session_id)
    memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada's sister is called Rita.")
    return {"sessions": [first, second]}


def search(client, user_id, query, **params):
    from urllib.parse import urlencode

    r = client.get(f"/api/v1/users/{user_id}/memories/search?{urlencode({'q': query, 'k': 10, **params})}")
    assert r.status_code == 200, r.content
    return r.json()["results"]


def results(client, user_id) -> dict:
    """What each query finds, best first, each with its source message's external id, its session's title and its
    provenance line; and the scores apart. Scores standardise over each search's candidates, so they move in the
    third place between two searches; near-equal scores are listed by text (ties fall to point ids, which an
    import changes)."""
    out = {}
    for q in QUERIES:
        rows = []
        for r in search(client, user_id, q):
            msg = Message.objects.unscoped().filter(pk=r["source_message_id"]).select_related("session").first()
            rows.append((-round(r["score"], 1), r["text"], r["kind"], msg.external_id if msg else None,
                         msg.session.title if msg else None, r["provenance"], r["score"]))
        rows.sort(key=lambda row: row[:2])
        out[q] = {"found": [row[1:6] for row in rows], "scores": [row[6] for row in rows]}
    return out


def same_results(after: dict, before: dict, tolerance: float = 0.05) -> bool:
    return all(after[q]["found"] == before[q]["found"]
               and after[q]["scores"] == pytest.approx(before[q]["scores"], abs=tolerance) for q in QUERIES)


def export(client, user_id) -> bytes:
    r = client.get(f"/api/v1/users/{user_id}/memories/export.jsonl")
    assert r.status_code == 200, r.content
    assert r["Content-Type"].startswith("application/x-ndjson")
    return r.content


def import_(client, body: bytes, **params):
    from urllib.parse import urlencode

    return client.post(f"/api/v1/memories/import?{urlencode(params)}", data=body,
                       content_type="application/x-ndjson")


def test_export_erase_import_gives_the_same_search_results_with_history_validity_and_provenance(
        alice, alice_user, alice_client, history):
    before = results(alice_client, alice_user.pk)
    assert all(v["found"] for v in before.values())
    then_before = search(alice_client, alice_user.pk, "where does Ada live", as_of="2024-04-01")
    events_before = MemoryEvent.objects.for_tenant(alice).filter(user=alice_user).count()
    body = export(alice_client, alice_user.pk)
    header = json.loads(body.splitlines()[0])
    assert (header["format"], header["version"], header["user"]["external_id"]) == ("continuum.memories", 1,
                                                                                      "alice-user-1")
    assert header["embedder"] == "word-hash"

    assert alice_client.post(f"/api/v1/users/{alice_user.pk}/erase").json()["complete"] is True
    # Keyword scores weigh words by the shard's statistics, which count deleted points until the hourly vacuum
    # drops them: run it, as the erased user's points would be gone by then anyway.
    get_vector_store().vacuum()
    r = import_(alice_client, body)
    assert r.status_code == 200, r.content
    report = r.json()
    assert (report["memories_created"], report["memories_skipped"], report["refused"]) == (6, 0, [])
    assert report["sessions_created"] == 2 and report["messages_created"] == 5
    new_user = report["user_id"]
    assert new_user != str(alice_user.pk)

    assert same_results(results(alice_client, new_user), before)
    then_after = search(alice_client, new_user, "where does Ada live", as_of="2024-04-01")
    assert [(r["text"], r["valid_from"], r["valid_to"]) for r in then_after] == \
        [(r["text"], r["valid_from"], r["valid_to"]) for r in then_before]
    assert then_after[0]["text"] == "Ada lives in Lisbon."
    # History kept (each memory's own events, plus one noting the import).
    assert MemoryEvent.objects.for_tenant(alice).filter(user_id=new_user).count() == events_before + 6
    lisbon = MemoryRecord.objects.for_tenant(alice).get(user_id=new_user, text="Ada lives in Lisbon.")
    assert lisbon.superseded_by.text == "Ada lives in Porto."
    assert list(lisbon.events.values_list("action", flat=True))[:2] == ["created", "superseded"]


def test_importing_twice_writes_once(alice, alice_user, alice_client, history):
    body = export(alice_client, alice_user.pk)
    first = import_(alice_client, body, external_id="copy").json()
    again = import_(alice_client, body, external_id="copy").json()
    assert first["memories_created"] == 6
    assert (again["memories_created"], again["memories_skipped"]) == (0, 6)
    assert (again["sessions_created"], again["messages_created"]) == (0, 0)
    assert MemoryRecord.objects.for_tenant(alice).filter(user_id=first["user_id"]).count() == 6


def test_another_tenant_imports_it_and_finds_the_same(alice, alice_user, alice_client, bob, bob_client, history):
    before = results(alice_client, alice_user.pk)
    r = import_(bob_client, export(alice_client, alice_user.pk))
    assert r.status_code == 200, r.content
    # Keyword terms are counted per tenant, but the count of points BM25's IDF divides by is the shard's, which the
    # import doubles here (6 points to 12): keyword scores move a little, and the ranking does not.
    assert same_results(results(bob_client, r.json()["user_id"]), before, tolerance=0.1)
    assert MemoryRecord.objects.for_tenant(alice).filter(user=alice_user).count() == 6  # Alice's untouched


def test_a_newer_format_version_is_refused_whole(alice, alice_user, alice_client, bob_client, history):
    lines = export(alice_client, alice_user.pk).splitlines()
    header = json.loads(lines[0])
    header["version"] = 2
    r = import_(bob_client, b"\n".join([json.dumps(header).encode(), *lines[1:]]))
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "unsupported_format_version"
    assert "version 2" in r.json()["error"]["message"]
    assert not MemoryRecord.objects.unscoped().exclude(tenant=alice).exists()


@pytest.mark.parametrize("broken", [b"not json", b'{"type": "memory", "ref": "x"}', b'{"type": "alien"}'])
def test_a_malformed_line_is_a_400_naming_it_and_writes_nothing(alice, alice_user, alice_client, bob, bob_client,
                                                              history, broken):
    lines = export(alice_client, alice_user.pk).splitlines()
    r = import_(bob_client, b"\n".join([*lines, broken]))
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_export"
    assert f"Line {len(lines) + 1}" in r.json()["error"]["message"]
    assert not MemoryRecord.objects.for_tenant(bob).exists()


def test_not_an_export_is_a_400(bob_client):
    for body in (b"", b'{"type": "header", "format": "something.else", "version": 1}'):
        r = import_(bob_client, body)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_export"


def test_a_secret_in_a_file_is_never_stored(alice, alice_user, alice_client, bob, bob_client, history):
    lines = export(alice_client, alice_user.pk).splitlines()
    planted = json.loads(lines[-1])
    planted.update(ref="planted", text="sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", history=[])
    r = import_(bob_client, b"\n".join([*lines, json.dumps(planted).encode()]))
    assert r.status_code == 200
    assert [x["line"] for x in r.json()["refused"]] == [len(lines) + 1]
    assert not MemoryRecord.objects.for_tenant(bob).filter(text__contains="sk-live").exists()


def test_another_tenant_cannot_export_a_users_memories(alice_user, bob_client):
    assert bob_client.get(f"/api/v1/users/{alice_user.pk}/memories/export.jsonl").status_code == 404


@pytest.mark.parametrize("broken", [b"\xff\xfe not utf-8", b'{"type": "memory", "ref": "x", "kind": "fact", '
                                    b'"text": "t", "status": "active", "source_type": "user_stated", '
                                    b'"created_at": "2024-01-01T00:00:00Z", "confidence": "high"}',
                                    b'{"type": "message", "ref": "m", "session_ref": "s", "role": "narrator", '
                                    b'"content": "x", "created_at": "2024-01-01T00:00:00Z"}',
                                    b'{"type": "session", "ref": "s", "opened_at": 20240101}'])
def test_wrong_types_and_encodings_are_a_400_not_a_500(alice, alice_user, alice_client, bob, bob_client, history,
                                                       broken):
    lines = export(alice_client, alice_user.pk).splitlines()
    r = import_(bob_client, b"\n".join([*lines, broken]))
    assert r.status_code == 400, r.content
    assert r.json()["error"]["code"] == "invalid_export"
    assert not MemoryRecord.objects.for_tenant(bob).exists()
