"""memory.actions: each change checks its transition, writes history with the actor and reaches Qdrant."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from infra import clock
from infra.errors import Conflict, NotFound, ValidationFailed
from memory import actions as controls
from memory.models import MemoryEvent, MemoryRecord
from orchestration.export import memory_export
from tests.memory.lifecycle_support import memory_make, points_of, search_ids

pytestmark = pytest.mark.django_db(transaction=True)


def _events(record, action=None):
    qs = MemoryEvent.objects.unscoped().filter(memory_uuid=record.pk)
    return list(qs.filter(action=action) if action else qs)


def test_update_text_re_embeds_and_records_the_actor(alice, alice_user):
    m = memory_make(alice, alice_user, "My favourite colour is green")
    assert points_of(alice, alice_user, [m.pk])[str(m.pk)]["text"] == "My favourite colour is green"

    controls.memory_update_text(tenant=alice, memory_id=m.pk, text="My favourite colour is dark blue",
                                actor_type="end_user", actor_id="u-1")

    m.refresh_from_db()
    assert m.text == "My favourite colour is dark blue"
    assert m.content_hash == controls.content_hash_for("my favourite colour is dark blue")
    assert points_of(alice, alice_user, [m.pk])[str(m.pk)]["text"] == "My favourite colour is dark blue"
    assert search_ids(alice, alice_user, "dark blue colour")[0] == str(m.pk)
    (event,) = _events(m, "updated")
    assert (event.actor_type, event.actor_id) == ("end_user", "u-1")
    assert event.before["text"] == "My favourite colour is green"
    assert event.after["text"] == "My favourite colour is dark blue"


def test_an_edited_date_is_read_again_against_when_it_was_said(alice, alice_user):
    """The resolved dates shown beside a memory's words follow an edit: "April 15" edited to "April 30" shows
    30 April of the year it was said, not the old day."""
    said = clock.now().replace(year=2025, month=3, day=3)
    m = memory_make(alice, alice_user, "Craig's deadline is April 15.", created_at=said,
                    metadata={"dates": [{"phrase": "april 15", "date": "2025-04-15", "granularity": "day"}]})
    controls.memory_update_text(tenant=alice, memory=m, text="Craig's deadline is April 30.", actor_type="staff")
    m.refresh_from_db()
    assert [d["date"] for d in m.metadata["dates"]] == ["2025-04-30"], m.metadata
    controls.memory_update_text(tenant=alice, memory=m, text="Craig's deadline moved, no date yet.",
                                actor_type="staff")
    m.refresh_from_db()
    assert "dates" not in m.metadata, m.metadata


def test_update_text_unchanged_writes_nothing_and_blank_is_refused(alice, alice_user):
    m = memory_make(alice, alice_user, "I live in Lyon")
    controls.memory_update_text(tenant=alice, memory=m, text="  I live in Lyon ", actor_type="staff")
    assert _events(m, "updated") == []
    with pytest.raises(ValidationFailed):
        controls.memory_update_text(tenant=alice, memory=m, text="   ", actor_type="staff")


def test_delete_removes_the_point_and_restore_brings_it_back(alice, alice_user):
    m = memory_make(alice, alice_user, "I am allergic to peanuts")
    controls.memory_delete(tenant=alice, memory_id=str(m.pk), actor_type="staff", actor_id="rev")
    m.refresh_from_db()
    assert m.status == "deleted"
    assert points_of(alice, alice_user, [m.pk]) == {}
    controls.memory_delete(tenant=alice, memory_id=str(m.pk), actor_type="staff", actor_id="rev")  # no-op
    assert len(_events(m, "deleted")) == 1

    controls.memory_restore(tenant=alice, memory=m, actor_type="staff", actor_id="rev")
    m.refresh_from_db()
    assert m.status == "active"
    assert points_of(alice, alice_user, [m.pk])[str(m.pk)]["status"] == "active"
    assert [e.action for e in _events(m)] == ["created", "deleted", "restored"]


def test_approve_and_reject_only_pending(alice, alice_user):
    pending = memory_make(alice, alice_user, "The user seems to like jazz", source_type="inferred",
                          status="pending_review")
    other = memory_make(alice, alice_user, "The user may be vegetarian", source_type="inferred",
                        status="pending_review")
    controls.memory_approve(tenant=alice, memory=pending, actor_type="staff", actor_id="rev")
    controls.memory_reject(tenant=alice, memory=other, actor_type="staff", actor_id="rev")
    pending.refresh_from_db()
    other.refresh_from_db()
    assert (pending.status, other.status) == ("active", "deleted")
    assert set(points_of(alice, alice_user, [pending.pk, other.pk])) == {str(pending.pk)}
    with pytest.raises(Conflict) as exc:
        controls.memory_approve(tenant=alice, memory=pending, actor_type="staff")
    assert exc.value.code == "invalid_transition"
    # A rejected memory restored goes back to review, not straight into retrieval.
    controls.memory_restore(tenant=alice, memory=other, actor_type="staff")
    other.refresh_from_db()
    assert other.status == "pending_review"


def test_expire_takes_it_out_of_retrieval_and_restore_clears_the_past_expiry(alice, alice_user):
    m = memory_make(alice, alice_user, "My hotel in Rome is the Hotel Artemide")
    assert str(m.pk) in search_ids(alice, alice_user, "hotel in Rome")
    controls.memory_expire(tenant=alice, memory=m, actor_type="staff", actor_id="rev")
    m.refresh_from_db()
    assert m.status == "expired" and m.expires_at <= clock.now()
    assert str(m.pk) not in search_ids(alice, alice_user, "hotel in Rome")
    controls.memory_restore(tenant=alice, memory=m, actor_type="staff")
    m.refresh_from_db()
    assert m.status == "active" and m.expires_at is None
    assert str(m.pk) in search_ids(alice, alice_user, "hotel in Rome", not_expired_at=clock.now().timestamp())


def test_controls_never_reach_another_tenants_or_users_memory(alice, bob, alice_user):
    from tenants.services import end_user_create

    m = memory_make(alice, alice_user, "My passport number is on file")
    other_user = end_user_create(tenant=alice, external_id="someone-else")
    for fn in (controls.memory_delete, controls.memory_expire, controls.memory_approve, controls.memory_restore):
        with pytest.raises(NotFound):
            fn(tenant=bob, memory_id=m.pk, actor_type="staff")
        with pytest.raises(NotFound):
            fn(tenant=alice, user=other_user, memory_id=m.pk, actor_type="end_user")
    with pytest.raises(NotFound):
        controls.memory_update_text(tenant=bob, memory_id=m.pk, text="x", actor_type="staff")
    m.refresh_from_db()
    assert m.status == "active" and _events(m) == _events(m, "created")


def test_delete_all_deletes_only_that_users_memories(alice, alice_user):
    from tenants.services import end_user_create

    mine = [memory_make(alice, alice_user, f"fact number {i}") for i in range(3)]
    other_user = end_user_create(tenant=alice, external_id="other")
    theirs = memory_make(alice, other_user, "their fact")
    deleted = controls.memory_delete_all(tenant=alice, user=alice_user, actor_type="end_user", batch_size=2)
    assert sorted(r.pk for r in deleted) == sorted(m.pk for m in mine)
    assert controls.memory_delete_all(tenant=alice, user=alice_user, actor_type="end_user") == []
    statuses = MemoryRecord.objects.unscoped().filter(pk__in=[m.pk for m in mine]).values_list("status", flat=True)
    assert set(statuses) == {"deleted"}
    assert points_of(alice, alice_user) == {}
    assert set(points_of(alice, other_user)) == {str(theirs.pk)}


def test_export_holds_memories_with_provenance_sessions_and_bridges(alice, alice_user, alice_session):
    from orchestration.messages import messages_append
    from orchestration.sessions import session_close
    from sessions.services import NewMessage

    (msg,) = messages_append(tenant=alice, session_id=alice_session.pk, items=[
        NewMessage(role="user", content="I always fly with KLM")], enqueue_extraction=False)
    m = memory_make(alice, alice_user, "The user always flies with KLM", kind="preference", session=alice_session,
                    source_message=msg, source_message_ids=[str(msg.pk)])
    controls.memory_update_text(tenant=alice, memory=m, text="I always fly with KLM", actor_type="end_user")
    session_close(tenant=alice, session_id=alice_session.pk)
    from orchestration.sessions import session_finish as _session_finish

    _session_finish(tenant_id=alice_session.tenant_id, session_id=alice_session.pk)

    data = memory_export(tenant=alice, user=alice_user)
    json.dumps(data)  # JSON-ready
    # A session's note lines (none for one short turn) are memories of the user too, exported like the rest.
    (exported,) = [m for m in data["memories"] if m["kind"] != "note"]
    notes = [m for m in data["memories"] if m["kind"] == "note"]
    assert all(n["provenance"]["session_id"] == str(alice_session.pk) for n in notes)
    assert exported["text"] == "I always fly with KLM"
    assert exported["provenance"]["source_message"]["content"] == "I always fly with KLM"
    assert exported["provenance"]["session_id"] == str(alice_session.pk)
    assert [h["action"] for h in exported["history"]] == ["created", "updated"]
    (session,) = data["sessions"]
    assert session["messages"][0]["content"] == "I always fly with KLM"
    assert [b["session_id"] for b in data["bridges"]] == [str(alice_session.pk)]


def test_restore_of_an_active_memory_is_refused(alice, alice_user):
    m = memory_make(alice, alice_user, "I like tea", expires_at=clock.now() + timedelta(days=3))
    with pytest.raises(Conflict):
        controls.memory_restore(tenant=alice, memory=m, actor_type="staff")


def test_an_edit_never_stores_a_secret(alice, alice_user):
    m = memory_make(alice, alice_user, "My wifi is at home")
    controls.memory_update_text(tenant=alice, memory=m, actor_type="end_user",
                                text="The hotel wifi password is Tr0ub4dor&3 in room 12")
    m.refresh_from_db()
    assert "Tr0ub4dor" not in m.text and "[redacted]" in m.text
    assert "Tr0ub4dor" not in str(list(MemoryEvent.objects.unscoped().values_list("after", flat=True)))
    assert "Tr0ub4dor" not in points_of(alice, alice_user, [m.pk])[str(m.pk)]["text"]
    with pytest.raises(ValidationFailed) as exc:
        controls.memory_update_text(tenant=alice, memory=m, actor_type="end_user", text="sk-proj-abcdefghijklmnop1234")
    assert exc.value.code == "secret_refused"
    with pytest.raises(ValidationFailed):
        controls.memory_update_text(tenant=alice, memory=m, actor_type="end_user", text="x" * 4001)


def test_approving_a_held_memory_supersedes_what_it_replaces(alice, alice_user):
    old = memory_make(alice, alice_user, "My home airport is JFK", subject="home airport", value="JFK")
    other = memory_make(alice, alice_user, "My seat preference is aisle", subject="seat", value="aisle")
    event = memory_make(alice, alice_user, "Asked for a vegetarian meal", kind="event")
    held = memory_make(alice, alice_user, "My home airport is Newark", subject="home airport", value="EWR",
                       source_type="inferred", status="pending_review",
                       metadata={"consolidated_from": [str(event.pk)]})
    controls.memory_approve(tenant=alice, memory=held, actor_type="staff", actor_id="rev")
    rows = {r.pk: r for r in MemoryRecord.objects.unscoped().all()}
    assert rows[held.pk].status == "active"
    assert (rows[old.pk].status, rows[old.pk].superseded_by_id) == ("superseded", held.pk)
    assert (rows[event.pk].status, rows[event.pk].superseded_by_id) == ("superseded", held.pk)
    assert rows[other.pk].status == "active"
    assert points_of(alice, alice_user, [old.pk])[str(old.pk)]["status"] == "superseded"
    assert _events(old, "superseded")[0].actor_id == "rev"
