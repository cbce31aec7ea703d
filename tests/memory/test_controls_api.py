"""End-user memory API: happy paths, validation (4xx, never 500), ownership, and erase with zero residue."""
from __future__ import annotations

import uuid

import pytest

from infra.redis_client import Keys, get_redis
from memory.models import MemoryEvent, MemoryRecord, VectorOutbox
from tests.memory.lifecycle_support import memory_make, points_of

pytestmark = pytest.mark.django_db(transaction=True)


def base(user):
    return f"/api/v1/users/{user.pk}"


@pytest.fixture
def bob_user(bob):
    from tenants.services import end_user_create

    return end_user_create(tenant=bob, external_id="bob-user-1")


@pytest.fixture
def memories(alice, alice_user):
    return [
        memory_make(alice, alice_user, "I prefer aisle seats", kind="preference"),
        memory_make(alice, alice_user, "My booking reference is ABC123", kind="fact"),
        memory_make(alice, alice_user, "Flew to Lisbon in May", kind="event"),
        memory_make(alice, alice_user, "Old address", kind="fact", status="deleted"),
    ]


def test_list_filters_and_paginates(alice_client, alice_user, memories):
    r = alice_client.get(f"{base(alice_user)}/memories")
    assert r.status_code == 200
    ids = {m["id"] for m in r.json()["results"]}
    assert ids == {str(m.pk) for m in memories[:3]}  # deleted ones only when asked for
    r = alice_client.get(f"{base(alice_user)}/memories", {"kind": "preference,event"})
    assert {m["kind"] for m in r.json()["results"]} == {"preference", "event"}
    r = alice_client.get(f"{base(alice_user)}/memories", {"status": "deleted"})
    assert [m["id"] for m in r.json()["results"]] == [str(memories[3].pk)]

    seen, url = [], f"{base(alice_user)}/memories?limit=2"
    while url:
        page = alice_client.get(url).json()
        assert len(page["results"]) <= 2
        seen += [m["id"] for m in page["results"]]
        url = page["next"]
    assert sorted(seen) == sorted(str(m.pk) for m in memories[:3])
    first = alice_client.get(f"{base(alice_user)}/memories").json()["results"][0]
    assert first["provenance"]["source_type"] == "user_stated"


@pytest.mark.parametrize("query", [{"kind": "feeling"}, {"status": "gone"}, {"kind": ","}, {"limit": "x"},
                                   {"limit": "0"}, {"cursor": "garbage"}])
def test_list_rejects_bad_filters_with_400(alice_client, alice_user, memories, query):
    r = alice_client.get(f"{base(alice_user)}/memories", query)
    assert r.status_code == 400, r.content
    assert set(r.json()["error"]) == {"code", "message", "details"}


def test_get_one_with_provenance_and_history(alice, alice_client, alice_user, alice_session):
    from orchestration.messages import messages_append
    from sessions.services import NewMessage

    (msg,) = messages_append(tenant=alice, session_id=alice_session.pk,
                             items=[NewMessage(role="user", content="My cat is called Miso")], enqueue_extraction=False)
    m = memory_make(alice, alice_user, "My cat is called Miso", session=alice_session, source_message=msg)
    r = alice_client.get(f"{base(alice_user)}/memories/{m.pk}")
    assert r.status_code == 200
    body = r.json()
    assert body["source_message"]["content"] == "My cat is called Miso"
    assert body["provenance"]["session_id"] == str(alice_session.pk)
    assert [h["action"] for h in body["history"]] == ["created"]


def test_patch_text_re_embeds_and_is_in_history(alice, alice_client, alice_user, memories):
    m = memories[1]
    r = alice_client.patch(f"{base(alice_user)}/memories/{m.pk}", {"text": "My booking reference is XYZ789"},
                           format="json")
    assert r.status_code == 200, r.content
    assert r.json()["text"] == "My booking reference is XYZ789"
    assert r.json()["history"][-1]["actor_type"] == "end_user"
    assert r.json()["history"][-1]["actor_id"] == alice_user.external_id
    assert points_of(alice, alice_user, [m.pk])[str(m.pk)]["text"] == "My booking reference is XYZ789"


@pytest.mark.parametrize("body", [{}, {"text": ""}, {"text": "   "}, {"text": 5}, {"text": ["a"]},
                                  {"text": "x" * 40_000}])
def test_patch_rejects_invalid_text(alice_client, alice_user, memories, body):
    r = alice_client.patch(f"{base(alice_user)}/memories/{memories[0].pk}", body, format="json")
    assert r.status_code == 400, r.content


def test_patch_a_deleted_memory_is_409(alice_client, alice_user, memories):
    r = alice_client.patch(f"{base(alice_user)}/memories/{memories[3].pk}", {"text": "new"}, format="json")
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "invalid_transition"


def test_delete_one_and_delete_all(alice, alice_client, alice_user, memories):
    r = alice_client.delete(f"{base(alice_user)}/memories/{memories[0].pk}")
    assert r.status_code == 204
    assert MemoryRecord.objects.unscoped().get(pk=memories[0].pk).status == "deleted"
    assert str(memories[0].pk) not in points_of(alice, alice_user)
    r = alice_client.delete(f"{base(alice_user)}/memories")
    assert r.status_code == 200 and r.json() == {"deleted": 2}
    assert points_of(alice, alice_user) == {}
    assert alice_client.get(f"{base(alice_user)}/memories").json()["results"] == []


def test_export_is_json_with_memories_sessions_and_bridges(alice_client, alice_user, alice_session, memories):
    r = alice_client.get(f"{base(alice_user)}/memories/export")
    assert r.status_code == 200
    assert "attachment" in r["Content-Disposition"]
    body = r.json()
    assert {m["id"] for m in body["memories"]} == {str(m.pk) for m in memories}
    assert [s["id"] for s in body["sessions"]] == [str(alice_session.pk)]
    assert body["bridges"] == []
    assert body["user"]["external_id"] == alice_user.external_id


def test_erase_leaves_zero_residue_in_each_store(alice, alice_client, alice_user, alice_session, bob, bob_user):
    from context.buffer import buffer_get
    from orchestration.messages import messages_append
    from sessions.services import NewMessage

    messages_append(tenant=alice, session_id=alice_session.pk,
                    items=[NewMessage(role="user", content="I need a hotel in Porto")], enqueue_extraction=False)
    buffer_get(tenant_id=str(alice.pk), user_id=str(alice_user.pk), session_id=str(alice_session.pk))
    mine = [memory_make(alice, alice_user, t) for t in ("I need a hotel in Porto", "My budget is 120 euros")]
    theirs = memory_make(bob, bob_user, "Bob's own memory")
    r = get_redis()
    r.set(Keys.anchor_fold_lock(alice.pk, alice_user.pk, alice_session.pk), "1", ex=60)
    assert r.exists(Keys.session_buffer(alice.pk, alice_user.pk, alice_session.pk))
    assert len(points_of(alice, alice_user)) == 2

    resp = alice_client.post(f"{base(alice_user)}/erase")
    assert resp.status_code == 200, resp.content
    assert resp.json()["memories"] == 2 and resp.json()["sessions"] == 1

    # Database: no row of the user, their sessions, messages, memories, history or pending vector writes.
    from sessions.models import Message, Session
    from tenants.models import EndUser

    assert not EndUser.objects.unscoped().filter(pk=alice_user.pk).exists()
    assert not Session.objects.unscoped().filter(user_id=alice_user.pk).exists()
    assert not Message.objects.unscoped().filter(session_id=alice_session.pk).exists()
    assert not MemoryRecord.objects.unscoped().filter(user_id=alice_user.pk).exists()
    assert not MemoryEvent.objects.unscoped().filter(memory_uuid__in=[m.pk for m in mine]).exists()
    assert not MemoryEvent.objects.unscoped().filter(user_id=alice_user.pk).exists()
    assert not VectorOutbox.objects.unscoped().filter(memory_uuid__in=[m.pk for m in mine]).exists()
    # Qdrant: no point in the user's scope, nor any of their memory ids in the tenant's.
    assert points_of(alice, alice_user) == {}
    assert points_of(alice, ids=[m.pk for m in mine]) == {}
    # Redis: nothing under the user's prefix, and no tenant key naming the user or their sessions.
    assert list(r.scan_iter(match=Keys.user_pattern(alice.pk, alice_user.pk))) == []
    leftovers = [k for k in r.scan_iter(match=Keys.tenant_pattern(alice.pk))
                 if str(alice_user.pk).encode() in k or str(alice_session.pk).encode() in k]
    assert leftovers == []
    # The outsider is untouched.
    assert set(points_of(bob, bob_user)) == {str(theirs.pk)}
    assert MemoryRecord.objects.unscoped().filter(pk=theirs.pk).exists()


def test_erasing_a_user_deletes_their_keys_by_name_and_no_one_elses(alice, alice_user, alice_session, monkeypatch):
    import redis as redis_lib

    from orchestration.erasure import user_erase
    from orchestration.messages import messages_append
    from orchestration.sessions import session_open
    from sessions.services import NewMessage
    from tenants.services import end_user_create

    other = end_user_create(tenant=alice, external_id="other")
    other_session, _ = session_open(tenant=alice, user=other)
    r = get_redis()

    def keys_of(user, session):
        message = messages_append(tenant=alice, session_id=session.pk, enqueue_extraction=False,
                                  items=[NewMessage(role="user", content="I live in Porto.")])[0]
        return [Keys.session_buffer(alice.pk, user.pk, session.pk),
                Keys.anchor_fold_lock(alice.pk, user.pk, session.pk),
                Keys.anchor_queued_flag(alice.pk, user.pk, session.pk), Keys.memory_writes_lock(alice.pk, user.pk),
                Keys.extract_lock(alice.pk, user.pk, message.pk)]

    mine, theirs = keys_of(alice_user, alice_session), keys_of(other, other_session)
    tenant_key = Keys.lock(alice.pk, "job:merge")
    for key in [*mine, *theirs, tenant_key]:
        r.set(key, "1", ex=60)
    assert all(k.startswith(Keys.user_pattern(alice.pk, alice_user.pk)[:-1]) for k in mine)  # each names the user

    def no_scan(*args, **kwargs):
        raise AssertionError("erasing one user walked the keyspace")

    monkeypatch.setattr(redis_lib.Redis, "scan_iter", no_scan)
    monkeypatch.setattr(redis_lib.Redis, "scan", no_scan)
    report = user_erase(tenant=alice, user=alice_user)
    monkeypatch.undo()  # the per-test key cleanup scans its own prefix
    assert report.redis_keys == len(mine)
    assert [k for k in mine if r.exists(k)] == []
    assert all(r.exists(k) for k in [*theirs, tenant_key])


def test_erase_is_idempotent(alice, alice_user, alice_client):
    from orchestration.erasure import user_erase

    memory_make(alice, alice_user, "something to erase")
    first = user_erase(tenant=alice, user=alice_user)
    again = user_erase(tenant=alice, user_id=alice_user.pk)
    assert first.memories == 1
    assert (again.memories, again.sessions, again.events, again.redis_keys) == (0, 0, 0, 0)
    assert alice_client.post(f"{base(alice_user)}/erase").status_code == 404


def _alice_urls(user, memory):
    u = base(user)
    return [("get", f"{u}/memories", None), ("delete", f"{u}/memories", None),
            ("get", f"{u}/memories/{memory.pk}", None), ("patch", f"{u}/memories/{memory.pk}", {"text": "hacked"}),
            ("delete", f"{u}/memories/{memory.pk}", None), ("get", f"{u}/memories/export", None),
            ("post", f"{u}/erase", None)]


def test_every_endpoint_is_404_for_another_tenant(alice, alice_user, bob_client, memories):
    for method, url, body in _alice_urls(alice_user, memories[0]):
        r = getattr(bob_client, method)(url, body, format="json")
        assert r.status_code == 404, (method, url, r.status_code)
        assert r.json()["error"]["code"] == "not_found"
    m = MemoryRecord.objects.unscoped().get(pk=memories[0].pk)
    assert (m.status, m.text) == ("active", "I prefer aisle seats")
    assert MemoryRecord.objects.unscoped().filter(user=alice_user).exclude(status="deleted").count() == 3
    assert len(points_of(alice, alice_user)) == 3


def test_a_memory_of_another_user_in_the_same_tenant_is_404(alice, alice_client, memories):
    from tenants.services import end_user_create

    other = end_user_create(tenant=alice, external_id="other")
    m = memories[0]
    for method, url, body in _alice_urls(other, m)[2:5]:
        r = getattr(alice_client, method)(url, body, format="json")
        assert r.status_code == 404, (method, url)
    r = alice_client.get(f"{base(other)}/memories")
    assert r.status_code == 200 and r.json()["results"] == []
    assert MemoryRecord.objects.unscoped().get(pk=m.pk).status == "active"


def test_bobs_lists_never_include_alices_memories(bob_client, bob_user, memories):
    r = bob_client.get(f"{base(bob_user)}/memories", {"status": "active,deleted,pending_review"})
    assert r.status_code == 200 and r.json()["results"] == []
    assert bob_client.get(f"{base(bob_user)}/memories/export").json()["memories"] == []


@pytest.mark.parametrize("user_id", ["not-a-uuid", str(uuid.uuid4())])
def test_unknown_ids_are_404(alice_client, alice_user, user_id):
    assert alice_client.get(f"/api/v1/users/{user_id}/memories").status_code == 404
    assert alice_client.get(f"{base(alice_user)}/memories/{user_id}").status_code == 404
    assert alice_client.post(f"/api/v1/users/{user_id}/erase").status_code == 404


def test_requires_an_api_key(alice_user):
    from rest_framework.test import APIClient

    assert APIClient().get(f"{base(alice_user)}/memories").status_code == 401
    assert APIClient().post(f"{base(alice_user)}/erase").status_code == 401
