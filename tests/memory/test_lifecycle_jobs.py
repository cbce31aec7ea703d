"""Each lifecycle job on crafted data: what it changes, what it leaves alone, and that a second run is a no-op."""
from __future__ import annotations

from datetime import timedelta

import pytest

from context.compaction import buffers_compact
from infra import clock
from infra.vector_store import MemoryPoint, Scope, get_vector_store
from memory.lifecycle.consolidate import memories_consolidate
from memory.lifecycle.decay import effective_importance, memories_decay
from memory.lifecycle.expire import memories_expire
from memory.lifecycle.forget import memories_forget
from memory.lifecycle.merge import memories_merge
from memory.lifecycle.reconcile import vectors_reconcile
from memory.lifecycle.runs import job_run
from memory.models import JobRun, MemoryEvent, MemoryRecord
from tests.memory.lifecycle_support import memory_make, points_of, search_ids

pytestmark = pytest.mark.django_db(transaction=True)


def drain(job, fn, tenant, limit=500) -> list[dict]:
    """Run passes until the job says nothing remains (what the re-enqueued tasks would do)."""
    outs, cursor = [], None
    for _ in range(50):
        out = job_run(job=job, tenant=tenant, fn=fn, cursor=cursor, limit=limit)
        outs.append(out)
        if not out.get("more"):
            return outs
        cursor = out["cursor"]
    raise AssertionError("job never finished")


def _actions(record):
    return [e.action for e in MemoryEvent.objects.unscoped().filter(memory_uuid=record.pk).order_by("created_at", "id")]


# --- merge ---------------------------------------------------------------------------------------------------

def test_three_near_duplicates_become_one_active_and_two_superseded(alice, alice_user, bob):
    from tenants.services import end_user_create

    a = memory_make(alice, alice_user, "I prefer window seats on flights", kind="preference")
    b = memory_make(alice, alice_user, "I prefer a window seat on flights.", kind="preference",
                    reinforcement_count=2, access_count=3)
    c = memory_make(alice, alice_user, "On flights I prefer window seats", kind="preference")
    aisle = memory_make(alice, alice_user, "I prefer aisle seats on trains", kind="preference")
    other_kind = memory_make(alice, alice_user, "I prefer window seats on flights", kind="fact")
    other_user = end_user_create(tenant=alice, external_id="someone-else")
    same_text_other_user = memory_make(alice, other_user, "I prefer window seats on flights", kind="preference")
    bob_user = end_user_create(tenant=bob, external_id="b")
    bobs = memory_make(bob, bob_user, "I prefer window seats on flights", kind="preference")

    (out,) = drain("merge", memories_merge, alice)
    assert out["superseded"] == 2 and out["clusters"] == 1

    rows = {r.pk: r for r in MemoryRecord.objects.unscoped().all()}
    assert rows[b.pk].status == "active"  # the best supported one is kept
    assert (rows[a.pk].status, rows[c.pk].status) == ("superseded", "superseded")
    assert rows[a.pk].superseded_by_id == rows[c.pk].superseded_by_id == b.pk
    assert rows[b.pk].reinforcement_count == 2 + 2
    for untouched in (aisle, other_kind, same_text_other_user, bobs):
        assert rows[untouched.pk].status == "active"
    assert _actions(b) == ["created", "reinforced"]
    assert _actions(a) == ["created", "superseded"] and _actions(c) == ["created", "superseded"]
    # Qdrant follows: the superseded ones are no longer retrievable as active.
    payloads = points_of(alice, alice_user, [a.pk, b.pk, c.pk])
    assert {k: v["status"] for k, v in payloads.items()} == {str(a.pk): "superseded", str(b.pk): "active",
                                                             str(c.pk): "superseded"}
    assert JobRun.objects.unscoped().filter(job="merge", tenant=alice, status="done").count() == 1

    (again,) = drain("merge", memories_merge, alice)
    assert again["superseded"] == 0
    assert _actions(b) == ["created", "reinforced"]


def test_merge_never_folds_a_contradiction(alice, alice_user):
    nyc = memory_make(alice, alice_user, "My destination is New York", subject="destination", value="NYC")
    nyc2 = memory_make(alice, alice_user, "My destination is New York!", subject="destination", value="Newark")
    drain("merge", memories_merge, alice)
    statuses = MemoryRecord.objects.unscoped().filter(pk__in=[nyc.pk, nyc2.pk]).values_list("status", flat=True)
    assert set(statuses) == {"active"}


def test_merge_leaves_two_sessions_note_lines_apart(alice, alice_user):
    """Alike lines of two sessions' notes are two sessions' notes: folded, one line would stand for both sessions'
    turns in retrieval."""
    monday = memory_make(alice, alice_user, "Topics: invoices, caching, redis, expiry.", kind="note")
    tuesday = memory_make(alice, alice_user, "Topics: invoices, caching, redis, expiry.", kind="note")
    drain("merge", memories_merge, alice)
    statuses = MemoryRecord.objects.unscoped().filter(pk__in=[monday.pk, tuesday.pk]).values_list("status", flat=True)
    assert list(statuses) == ["active", "active"]


def test_merge_is_bounded_and_resumes_from_its_cursor(alice, make_tenant):
    from tenants.services import end_user_create

    users = [end_user_create(tenant=alice, external_id=f"u{i}") for i in range(3)]
    for u in users:
        memory_make(alice, u, "My favourite food is ramen")
        memory_make(alice, u, "My favourite food is ramen.")
    outs = drain("merge", memories_merge, alice, limit=2)
    assert len(outs) == 3 and [o["more"] for o in outs] == [True, True, False]
    assert sum(o["superseded"] for o in outs) == 3
    assert MemoryRecord.objects.unscoped().filter(status="active").count() == 3


def test_a_merge_pass_visits_only_users_changed_since_the_last_complete_pass(alice, monkeypatch):
    from memory.lifecycle import runs
    from tenants.services import end_user_create

    monkeypatch.setattr(runs, "PASS_OVERLAP", timedelta(0))

    quiet, busy = (end_user_create(tenant=alice, external_id=n) for n in ("quiet", "busy"))
    for u in (quiet, busy):
        memory_make(alice, u, "I collect vinyl records")
        memory_make(alice, u, "I live by the sea")
    (first,) = drain("merge", memories_merge, alice)
    assert first["compared"] == 4 and first["changed_since"] is None
    (idle,) = drain("merge", memories_merge, alice)
    assert idle["compared"] == 0 and idle["changed_since"] is not None
    memory_make(alice, busy, "I collect vinyl records.")
    (after,) = drain("merge", memories_merge, alice)
    assert after["compared"] == 3 and after["superseded"] == 1


# --- expire --------------------------------------------------------------------------------------------------

def test_an_expired_memory_is_no_longer_retrieved(alice, alice_user):
    past = clock.now() - timedelta(minutes=5)
    gone = memory_make(alice, alice_user, "My gate at the airport is B12", expires_at=past)
    stays = memory_make(alice, alice_user, "My seat on the plane is 14C",
                        expires_at=clock.now() + timedelta(days=1))
    # Before the job the point is still active: only the time filter hides it.
    assert str(gone.pk) in search_ids(alice, alice_user, "airport gate B12")

    (out,) = drain("expire", memories_expire, alice)
    assert out["expired"] == 1
    gone.refresh_from_db()
    assert gone.status == "expired"
    assert str(gone.pk) not in search_ids(alice, alice_user, "airport gate B12")
    assert str(stays.pk) in search_ids(alice, alice_user, "seat on the plane 14C",
                                       not_expired_at=clock.now().timestamp())
    assert _actions(gone) == ["created", "expired"]
    (again,) = drain("expire", memories_expire, alice)
    assert again["expired"] == 0 and _actions(gone) == ["created", "expired"]


def test_after_the_expire_job_retrieval_no_longer_returns_the_memory(alice, alice_user):
    from memory.retrieval import memory_retrieve

    start = clock.now()
    m = memory_make(alice, alice_user, "My rental car pickup code is at desk 7",
                    expires_at=start + timedelta(hours=1))

    def retrieved():
        hits = memory_retrieve(tenant=alice, user=alice_user, query="rental car pickup desk", k=5)
        return str(m.pk) in [h.memory_id for h in hits]

    try:
        assert retrieved()
        clock.set_now(start + timedelta(hours=2))
        (out,) = drain("expire", memories_expire, alice)
        assert out["expired"] == 1 and not retrieved()
        # Back before the expiry time: still gone, because the record (and its point) now say expired.
        clock.set_now(start)
        assert not retrieved()
    finally:
        clock.set_now(None)


# --- decay ---------------------------------------------------------------------------------------------------

def test_decay_falls_with_idle_time_rises_with_use_and_is_idempotent(alice, alice_user, settings):
    settings.MEMORY_DECAY_HALF_LIFE_DAYS = {"default": 10}
    now = clock.now()
    idle = memory_make(alice, alice_user, "An idle fact", importance=0.8, learned_at=now - timedelta(days=20))
    used = memory_make(alice, alice_user, "A used fact", importance=0.8, learned_at=now - timedelta(days=20),
                       access_count=5)
    fresh = memory_make(alice, alice_user, "A fresh fact", importance=0.8, last_accessed_at=now)
    drain("decay", memories_decay, alice)
    rows = {r.pk: r for r in MemoryRecord.objects.unscoped().all()}
    assert rows[idle.pk].importance == pytest.approx(0.2, abs=0.01)  # two half-lives
    assert rows[idle.pk].importance < rows[used.pk].importance < rows[fresh.pk].importance + 0.5
    assert rows[fresh.pk].importance >= 0.79
    assert points_of(alice, alice_user, [idle.pk])[str(idle.pk)]["importance"] == pytest.approx(0.2, abs=0.01)

    (again,) = drain("decay", memories_decay, alice)
    assert again["changed"] == 0
    assert MemoryRecord.objects.unscoped().get(pk=idle.pk).importance == rows[idle.pk].importance


def test_decay_keeps_a_new_base_when_importance_was_changed_elsewhere(alice, alice_user, settings):
    settings.MEMORY_DECAY_HALF_LIFE_DAYS = {"default": 10}
    m = memory_make(alice, alice_user, "A fact", importance=0.8, learned_at=clock.now() - timedelta(days=10))
    drain("decay", memories_decay, alice)
    assert MemoryRecord.objects.unscoped().get(pk=m.pk).importance == pytest.approx(0.4, abs=0.01)
    MemoryRecord.objects.unscoped().filter(pk=m.pk).update(importance=1.0, last_accessed_at=clock.now())  # reinforced
    drain("decay", memories_decay, alice)
    assert MemoryRecord.objects.unscoped().get(pk=m.pk).importance == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("counted_from, expected", [("learned", 0.8), ("said", 0.2)])
def test_decay_counts_from_when_learned_unless_the_tenant_counts_from_when_said(alice, alice_user, settings,
                                                                                counted_from, expected):
    settings.MEMORY_DECAY_HALF_LIFE_DAYS = {"default": 10}
    alice.memory_lifetime_from = counted_from
    alice.save()
    m = memory_make(alice, alice_user, "Said 20 days ago, learned now", importance=0.8,
                    created_at=clock.now() - timedelta(days=20))
    drain("decay", memories_decay, alice)
    assert MemoryRecord.objects.unscoped().get(pk=m.pk).importance == pytest.approx(expected, abs=0.01)


def test_effective_importance_shape(settings):
    settings.MEMORY_DECAY_HALF_LIFE_DAYS = {"event": 5, "default": 100}
    now = clock.now()
    kw = dict(base=0.6, last_used=now - timedelta(days=5), now=now)
    assert effective_importance(uses=0, kind="event", **kw) == pytest.approx(0.3, abs=1e-3)
    assert effective_importance(uses=0, kind="fact", **kw) > 0.55
    assert effective_importance(uses=10, kind="event", **kw) > effective_importance(uses=1, kind="event", **kw)
    assert effective_importance(uses=10_000, kind="fact", base=1.0, last_used=now, now=now) == 1.0


# --- forget --------------------------------------------------------------------------------------------------

def test_a_forgotten_memory_is_gone_from_database_and_qdrant_with_a_tombstone(alice, alice_user, settings):
    settings.MEMORY_FORGET_GRACE_DAYS = 7
    old = clock.now() - timedelta(days=8)
    expired = memory_make(alice, alice_user, "Secret door code was 4411", status="expired", status_changed_at=old)
    deleted = memory_make(alice, alice_user, "Old phone number 555", status="active")
    from memory.actions import memory_delete

    memory_delete(tenant=alice, memory=deleted, actor_type="end_user")
    MemoryRecord.objects.unscoped().filter(pk=deleted.pk).update(status_changed_at=old)
    recent = memory_make(alice, alice_user, "Recently expired", status="expired",
                         status_changed_at=clock.now() - timedelta(days=1))
    decayed = memory_make(alice, alice_user, "Long decayed", metadata={"decay": {"below_since": old.timestamp()}})
    decaying = memory_make(alice, alice_user, "Just decayed",
                           metadata={"decay": {"below_since": clock.now().timestamp()}})
    assert set(points_of(alice, alice_user)) >= {str(expired.pk), str(decayed.pk)}

    (out,) = drain("forget", memories_forget, alice)
    assert out["forgotten"] == 3

    gone = [expired.pk, deleted.pk, decayed.pk]
    assert not MemoryRecord.objects.unscoped().filter(pk__in=gone).exists()
    assert points_of(alice, alice_user, gone) == {}
    assert set(MemoryRecord.objects.unscoped().values_list("pk", flat=True)) == {recent.pk, decaying.pk}
    tombstones = MemoryEvent.objects.unscoped().filter(action="forgotten")
    assert {t.memory_uuid for t in tombstones} == set(gone)
    assert all(t.memory_id is None and t.actor_type == "system" and t.note for t in tombstones)
    # The forgotten text survives nowhere in the history.
    for event in MemoryEvent.objects.unscoped().filter(memory_uuid__in=gone):
        assert "4411" not in str(event.before) + str(event.after)
        assert "555" not in str(event.before) + str(event.after)

    (again,) = drain("forget", memories_forget, alice)
    assert again["forgotten"] == 0 and tombstones.count() == 3


def test_forget_applies_the_tenants_retention(alice, alice_user):
    alice.retention_days = 30
    alice.save()
    stale = memory_make(alice, alice_user, "Unused for long", learned_at=clock.now() - timedelta(days=40))
    used = memory_make(alice, alice_user, "Used lately", learned_at=clock.now() - timedelta(days=40),
                       last_accessed_at=clock.now() - timedelta(days=2))
    drain("forget", memories_forget, alice)
    assert list(MemoryRecord.objects.unscoped().values_list("pk", flat=True)) == [used.pk]
    assert points_of(alice, alice_user, [stale.pk]) == {}


# --- consolidate ---------------------------------------------------------------------------------------------

def test_repeated_preference_events_become_one_fact_without_an_llm(alice, alice_user, alice_session):
    from orchestration.messages import messages_append
    from sessions.services import NewMessage

    msgs = messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content=t) for t in ("I prefer aisle seats.", "i prefer aisle seats",
                                                     "I prefer aisle  seats!", "I went to Paris", "I went to Paris")])
    events = [memory_make(alice, alice_user, m.content, kind="event", source_message=m, session=alice_session,
                          created_at=clock.now() - timedelta(days=5 - i)) for i, m in enumerate(msgs)]

    (out,) = drain("consolidate", memories_consolidate, alice)
    assert out["facts"] == 1 and out["events_superseded"] == 3 and out["method"] == "rules"

    fact = MemoryRecord.objects.unscoped().get(kind="preference")
    assert fact.status == "active" and fact.source_type == "user_stated"
    assert fact.text == "I prefer aisle  seats!"
    assert sorted(fact.source_message_ids) == sorted(str(m.pk) for m in msgs[:3])
    for e in events[:3]:
        e.refresh_from_db()
        assert (e.status, e.superseded_by_id) == ("superseded", fact.pk)
    assert {e.status for e in MemoryRecord.objects.unscoped().filter(pk__in=[e.pk for e in events[3:]])} == {"active"}
    assert points_of(alice, alice_user, [fact.pk])[str(fact.pk)]["kind"] == "preference"
    assert _actions(fact) == ["created"]

    (again,) = drain("consolidate", memories_consolidate, alice)
    assert again["facts"] == 0 and MemoryRecord.objects.unscoped().filter(kind="preference").count() == 1


def test_consolidation_with_an_llm_uses_structured_output(alice, alice_user, settings):
    import json

    import httpx
    import respx

    settings.LLM_BASE_URL = "http://llm.test/v1"
    settings.LLM_MODEL = "test-model"
    settings.MEMORY_CONSOLIDATE_SIMILARITY = 0.3
    texts = ["I went running in the park this morning", "Went for a run in the park again today",
             "Another morning run in the park before work"]
    events = [memory_make(alice, alice_user, t, kind="event", created_at=clock.now() - timedelta(days=3 - i))
              for i, t in enumerate(texts)]
    answer = {"facts": [{"text": "The user runs in the park most mornings.", "kind": "fact",
                         "event_numbers": [1, 2, 3], "confidence": 0.8}]}
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post("http://llm.test/v1/chat/completions").mock(return_value=httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(answer)}}]}))
        (out,) = drain("consolidate", memories_consolidate, alice)
    sent = json.loads(route.calls[0].request.content)
    assert sent["response_format"]["type"] == "json_schema"
    assert out["method"] == "llm" and out["facts"] == 1
    fact = MemoryRecord.objects.unscoped().get(extractor="consolidate")
    assert (fact.text, fact.source_type, fact.status) == ("The user runs in the park most mornings.", "inferred",
                                                          "active")
    statuses = MemoryRecord.objects.unscoped().filter(pk__in=[e.pk for e in events]).values_list("status", flat=True)
    assert set(statuses) == {"superseded"}


def test_an_llm_fact_held_for_review_leaves_the_events_and_is_not_proposed_again(alice, alice_user, settings):
    import json

    import httpx
    import respx

    alice.review_inferred = True
    alice.save()
    settings.LLM_BASE_URL = "http://llm.test/v1"
    settings.LLM_MODEL = "test-model"
    settings.MEMORY_CONSOLIDATE_SIMILARITY = 0.3
    events = [memory_make(alice, alice_user, t, kind="event") for t in (
        "Booked a vegetarian meal on the flight", "Asked for vegetarian food at the hotel")]
    answer = {"facts": [{"text": "The user eats vegetarian food.", "kind": "preference", "event_numbers": [1, 2],
                         "confidence": 0.7}]}
    with respx.mock() as mock:
        route = mock.post("http://llm.test/v1/chat/completions").mock(return_value=httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(answer)}}]}))
        (out,) = drain("consolidate", memories_consolidate, alice)
        (again,) = drain("consolidate", memories_consolidate, alice)
    assert out["facts"] == 1 and out["held_for_review"] == 1 and out["events_superseded"] == 0
    assert route.call_count == 1 and again["facts"] == 0
    fact = MemoryRecord.objects.unscoped().get(extractor="consolidate")
    assert (fact.status, fact.source_type) == ("pending_review", "inferred")
    statuses = MemoryRecord.objects.unscoped().filter(pk__in=[e.pk for e in events]).values_list("status", flat=True)
    assert set(statuses) == {"active"}


# --- compact buffers -----------------------------------------------------------------------------------------

def test_idle_session_buffers_are_compacted(alice, alice_user, settings):
    from context.buffer import buffer_get
    from infra.redis_client import Keys, get_redis
    from orchestration.messages import messages_append
    from orchestration.sessions import session_open
    from sessions.models import Session
    from sessions.services import NewMessage

    idle, _ = session_open(tenant=alice, user=alice_user)
    messages_append(tenant=alice, session_id=idle.pk, enqueue_extraction=False, items=[
        NewMessage(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " + "words " * 40)
        for i in range(10)])
    buffer_get(tenant_id=str(alice.pk), user_id=str(alice_user.pk), session_id=str(idle.pk))
    key = Keys.session_buffer(alice.pk, alice_user.pk, idle.pk)
    size_before = get_redis().strlen(key)
    Session.objects.unscoped().filter(pk=idle.pk).update(last_activity_at=clock.now() - timedelta(hours=1))

    (out,) = drain("compact_buffers", buffers_compact, alice)
    assert out["idle_sessions"] == 1 and out["with_buffer"] == 1 and out["compacted"] == 1
    assert get_redis().strlen(key) < size_before
    assert out["bytes_saved"] == size_before - get_redis().strlen(key)


# --- reconcile -----------------------------------------------------------------------------------------------

def test_reconcile_repairs_missing_points_orphans_and_drift(alice, alice_user):
    from infra.embedder import get_embedder
    from infra.vector_store import point_id_for  # noqa: F401  (ids are deterministic)

    store = get_vector_store()
    scope = Scope(tenant_id=str(alice.pk), user_id=str(alice_user.pk))
    missing = memory_make(alice, alice_user, "I keep my passport in the blue drawer")
    drift = memory_make(alice, alice_user, "My dentist is Dr. Lee")
    stale_text = memory_make(alice, alice_user, "My locker number is 12")
    deleted = memory_make(alice, alice_user, "Deleted but still in Qdrant")
    fine = memory_make(alice, alice_user, "Nothing wrong with me")
    store.delete(scope, [str(missing.pk)])
    store.set_payload(scope, str(drift.pk), {"status": "superseded", "importance": 0.01})
    MemoryRecord.objects.unscoped().filter(pk=stale_text.pk).update(text="My locker number is 47")
    MemoryRecord.objects.unscoped().filter(pk=deleted.pk).update(status="deleted")
    orphan_id = "00000000-0000-4000-8000-000000000001"
    store.upsert([MemoryPoint(memory_id=orphan_id, dense=get_embedder().embed(["orphan"])[0], text="orphan",
                              payload={"tenant_id": str(alice.pk), "user_id": str(alice_user.pk),
                                       "memory_id": orphan_id, "status": "active", "kind": "fact"})])

    outs = drain("reconcile", vectors_reconcile, alice)
    stats = {}
    for o in outs:
        for k, v in o.items():
            if isinstance(v, int) and not isinstance(v, bool) and k != "run_id":
                stats[k] = stats.get(k, 0) + v
    assert stats["points_reupserted"] == 2  # missing + stale text
    assert stats["payloads_fixed"] == 1
    assert stats["deleted_rows_points_removed"] + stats["orphans_deleted"] == 2

    points = points_of(alice, alice_user)
    assert set(points) == {str(missing.pk), str(drift.pk), str(stale_text.pk), str(fine.pk)}
    assert points[str(drift.pk)]["status"] == "active"
    assert points[str(drift.pk)]["importance"] == pytest.approx(0.5)
    assert points[str(stale_text.pk)]["text"] == "My locker number is 47"
    assert search_ids(alice, alice_user, "locker number 47")[0] == str(stale_text.pk)

    second = drain("reconcile", vectors_reconcile, alice)
    assert sum(o.get("points_reupserted", 0) + o.get("payloads_fixed", 0) + o.get("orphans_deleted", 0)
               for o in second) == 0


def test_memory_reindex_rebuilds_every_point(alice, alice_user, bob):
    from django.core.management import call_command

    from tenants.services import end_user_create

    mine = [memory_make(alice, alice_user, f"fact {i} about trains") for i in range(5)]
    gone = memory_make(alice, alice_user, "deleted one", status="deleted")
    bob_user = end_user_create(tenant=bob, external_id="b")
    bobs = memory_make(bob, bob_user, "bob fact")
    store = get_vector_store()
    store.delete_scope(Scope(tenant_id=str(alice.pk)))
    store.delete_scope(Scope(tenant_id=str(bob.pk)))
    assert points_of(alice) == {} and points_of(bob) == {}

    call_command("memory_reindex", "--no-progress", "--batch-size", "2")
    assert set(points_of(alice)) == {str(m.pk) for m in mine}
    assert set(points_of(bob)) == {str(bobs.pk)}
    assert str(gone.pk) not in points_of(alice)

    MemoryRecord.objects.unscoped().filter(pk=mine[0].pk).delete()
    call_command("memory_reindex", "--no-progress", "--tenant", alice.slug)
    assert set(points_of(alice)) == {str(m.pk) for m in mine[1:]}


def test_reconcile_rewrites_a_point_whose_keyword_terms_are_in_another_layout(alice, alice_user):
    """A point written before keyword terms were kept per tenant carries another layout mark (or none): its sparse
    vector holds terms no search asks for any more, so the reconcile job rewrites it whole, once."""
    from infra.vector_store.base import LAYOUT_KEY
    from infra.vector_store.sparse import SPARSE_LAYOUT

    store = get_vector_store()
    scope = Scope(tenant_id=str(alice.pk), user_id=str(alice_user.pk))
    old = memory_make(alice, alice_user, "My locker number is 12")
    current = memory_make(alice, alice_user, "My dentist is Dr. Lee")
    store.set_payload(scope, str(old.pk), {LAYOUT_KEY: "plain-terms"})

    outs = drain("reconcile", vectors_reconcile, alice)
    assert sum(o.get("points_reupserted", 0) for o in outs) == 1
    points = points_of(alice, alice_user)
    assert points[str(old.pk)][LAYOUT_KEY] == points[str(current.pk)][LAYOUT_KEY] == SPARSE_LAYOUT
    assert sum(o.get("points_reupserted", 0) for o in drain("reconcile", vectors_reconcile, alice)) == 0
