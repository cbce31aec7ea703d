"""Bulk delete by filter: the dry run counts what the delete then deletes, filters combine, each deletion leaves its
history event and vector delete, calls are bounded, and another tenant's ids answer 404."""
from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone

import pytest
from django.core.management import CommandError, call_command

from memory.actions import memories_bulk_delete
from memory.models import MemoryEvent, MemoryRecord, VectorOutbox
from memory.selectors import MemoryCriteria
from tests.memory.lifecycle_support import memory_make, points_of
from tests.sessions.conftest import WordHashEmbedder

pytestmark = pytest.mark.django_db(transaction=True)
JAN = datetime(2024, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def word_embedder():
    from infra.embedder import set_embedder

    set_embedder(WordHashEmbedder())
    yield
    set_embedder(None)


@pytest.fixture
def sessions(alice, alice_user):
    from orchestration.sessions import session_close, session_open

    first, _ = session_open(tenant=alice, user=alice_user, opened_at=JAN)
    session_close(tenant=alice, session_id=first.pk, finish=False)
    second, _ = session_open(tenant=alice, user=alice_user, opened_at=JAN + timedelta(days=30))
    return first, second


@pytest.fixture
def stored(alice, alice_user, sessions):
    """Ten memories across kinds, source types, two sessions and two months; one already deleted."""
    first, second = sessions
    rows = []
    for i in range(10):
        rows.append(memory_make(
            alice, alice_user, f"memory number {i} about topic {i}", kind=["event", "fact", "preference"][i % 3],
            source_type="inferred" if i % 2 else "user_stated", session=first if i < 6 else second,
            created_at=JAN + timedelta(days=5 * i), status="deleted" if i == 9 else "active"))
    return rows


def delete(tenant, user, **criteria):
    dry_run = criteria.pop("dry_run", False)
    limit = criteria.pop("limit", None)
    return memories_bulk_delete(tenant=tenant, user=user, criteria=MemoryCriteria(**criteria), actor_type="end_user",
                                actor_id=user.external_id, dry_run=dry_run, limit=limit)


def test_the_dry_run_counts_what_the_delete_then_deletes_and_changes_nothing(alice, alice_user, stored):
    events_before = MemoryEvent.objects.for_tenant(alice).count()
    dry = delete(alice, alice_user, kinds=("event",), dry_run=True)
    expected = {str(r.pk) for i, r in enumerate(stored) if i % 3 == 0 and i != 9}
    assert (dry.matched, dry.deleted, dry.dry_run) == (3, 0, True) and set(dry.sample_ids) == expected
    assert MemoryEvent.objects.for_tenant(alice).count() == events_before
    assert MemoryRecord.objects.for_tenant(alice).filter(status="deleted").count() == 1
    real = delete(alice, alice_user, kinds=("event",))
    assert (real.matched, real.deleted, real.more) == (dry.matched, dry.matched, False)
    assert set(MemoryRecord.objects.for_tenant(alice).filter(status="deleted").values_list("pk", flat=True)) == \
        {stored[9].pk, *(r.pk for r in stored if str(r.pk) in expected)}
    assert delete(alice, alice_user, kinds=("event",), dry_run=True).matched == 0


def test_filters_combine(alice, alice_user, stored, sessions):
    first, _ = sessions
    result = delete(alice, alice_user, kinds=("fact", "preference"), source_types=("inferred",),
                    session_id=str(first.pk), created_from=JAN + timedelta(days=5), created_to=JAN + timedelta(days=26))
    # i in 1..5 (days 5..25), first session (i < 6), fact or preference (i % 3 != 0), inferred (odd): 1 and 5.
    assert result.matched == result.deleted == 2
    assert {r.pk for r in MemoryRecord.objects.for_tenant(alice).filter(status="deleted")} == \
        {stored[1].pk, stored[5].pk, stored[9].pk}


def test_each_deletion_writes_its_history_event_and_its_vector_delete(alice, alice_user, stored):
    ids = {r.pk for i, r in enumerate(stored) if i % 2 == 0}
    assert set(points_of(alice, alice_user)) >= {str(i) for i in ids}
    result = delete(alice, alice_user, source_types=("user_stated",))
    assert result.deleted == len(ids) == 5
    events = MemoryEvent.objects.for_tenant(alice).filter(memory_uuid__in=ids, action="deleted")
    assert {e.memory_uuid for e in events} == ids
    assert all(e.before["status"] == "active" and e.after["status"] == "deleted" and e.note == "bulk delete"
               and e.actor_type == "end_user" for e in events)
    outbox = VectorOutbox.objects.for_tenant(alice.pk).filter(memory_uuid__in=ids, op="delete")
    assert {o.memory_uuid for o in outbox} == ids
    assert not set(points_of(alice, alice_user)) & {str(i) for i in ids}  # applied after commit


def test_a_call_is_bounded_and_the_rest_follows_on_the_next(alice, alice_user, stored, settings):
    settings.CONTINUUM_BULK_DELETE_MAX = 4
    dry = delete(alice, alice_user, created_from=JAN, dry_run=True)
    deleted, calls = 0, 0
    while True:
        result = delete(alice, alice_user, created_from=JAN, limit=100)  # capped at the setting
        calls += 1
        deleted += result.deleted
        assert result.deleted <= 4
        if not result.more:
            break
    assert (deleted, calls, dry.matched) == (9, 3, 9)


def test_another_users_memories_are_never_touched(alice, alice_user, stored):
    from tenants.services import end_user_create

    other = end_user_create(tenant=alice, external_id="other")
    theirs = memory_make(alice, other, "their memory", kind="event")
    delete(alice, alice_user, kinds=("event",))
    theirs.refresh_from_db()
    assert theirs.status == "active"


def url(user):
    return f"/api/v1/users/{user.pk}/memories/bulk-delete"


def test_the_api_dry_run_then_delete(alice_client, alice_user, stored):
    dry = alice_client.post(url(alice_user), {"kind": "event", "dry_run": True}, format="json")
    assert dry.status_code == 200, dry.content
    assert (dry.json()["matched"], dry.json()["deleted"], len(dry.json()["sample_ids"])) == (3, 0, 3)
    real = alice_client.post(url(alice_user), {"kind": ["event"], "created_to": "2030-01-01T00:00:00Z"},
                             format="json")
    assert (real.json()["matched"], real.json()["deleted"], real.json()["more"]) == (3, 3, False)
    listed = alice_client.get(f"/api/v1/users/{alice_user.pk}/memories?kind=event").json()["results"]
    assert listed == []


@pytest.mark.parametrize("body, code", [
    ({}, "filter_required"),
    ({"dry_run": True}, "filter_required"),
    ({"kind": "feeling"}, "invalid"),
    ({"source_type": ["user_stated", 3]}, "invalid"),
    ({"kind": "fact", "created_from": "2024-02-01T00:00:00Z", "created_to": "2024-01-01T00:00:00Z"}, "invalid_range"),
    ({"created_from": "last week"}, "invalid"),
    ({"kind": "fact", "limit": 0}, "invalid"),
])
def test_the_api_refuses_bad_filters_with_a_reason(alice_client, alice_user, stored, body, code):
    r = alice_client.post(url(alice_user), body, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["code"] == code
    assert MemoryRecord.objects.for_tenant(stored[0].tenant_id).filter(status="deleted").count() == 1


def test_another_tenants_user_or_session_is_not_found(alice_client, bob_client, alice_user, bob, stored, sessions):
    from orchestration.sessions import session_open
    from tenants.services import end_user_create

    assert bob_client.post(url(alice_user), {"kind": "event"}, format="json").status_code == 404
    bob_user = end_user_create(tenant=bob, external_id="bob-1")
    bob_session, _ = session_open(tenant=bob, user=bob_user)
    r = alice_client.post(url(alice_user), {"session_id": str(bob_session.pk), "dry_run": True}, format="json")
    assert r.status_code == 404
    other = end_user_create(tenant=stored[0].tenant, external_id="alice-2")
    r = alice_client.post(url(other), {"session_id": str(sessions[0].pk), "dry_run": True}, format="json")
    assert r.status_code == 404  # Alice's session, but not this user's
    assert MemoryRecord.objects.for_tenant(stored[0].tenant_id).filter(status="deleted").count() == 1


def test_the_command_counts_then_deletes(alice, alice_user, stored):
    out = io.StringIO()
    call_command("memories_bulk_delete", tenant=alice.slug, user=alice_user.external_id, kind=["fact"], dry_run=True,
                 stdout=out)
    assert out.getvalue().startswith("3 memories match")
    out = io.StringIO()
    call_command("memories_bulk_delete", tenant=alice.slug, user=alice_user.external_id, kind=["fact"], stdout=out)
    assert out.getvalue().strip() == "deleted 3 memories"
    with pytest.raises(CommandError, match="at least one filter"):
        call_command("memories_bulk_delete", tenant=alice.slug, user=alice_user.external_id)
