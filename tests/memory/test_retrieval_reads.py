"""The retrieval's two hot reads: one SQL statement each on PostgreSQL, the ORM elsewhere. Same rows, same keys,
and the same scoping: another tenant's or another user's ids, deleted and expired memories never come back."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import JSONField, Value

from infra import clock
from memory.actions import memory_create
from memory.models import MemoryRecord, MemoryStatus
from memory.retrieval.reads import memory_rows, memory_rows_orm
from sessions.models import Message
from sessions.turn_reads import turns_around, turns_around_orm

from .memory_support import record_turns

pytestmark = pytest.mark.django_db(transaction=True)
DATES = [{"phrase": "yesterday", "date": "2023-05-07", "granularity": "day"}]


@pytest.fixture
def stored(alice, bob, alice_user):
    from tenants.services import end_user_create

    alice.memory_ttl_days = {"event": None, "goal": None}
    alice.save()
    other = end_user_create(tenant=alice, external_id="alice-user-2", display_name="Zed")
    outsider = end_user_create(tenant=bob, external_id="alice-user-1", display_name="Ada")
    session, messages = record_turns(alice, alice_user, [("user", "I prefer aisle seats on long flights."),
                                                         ("assistant", "Noted: aisle seats."),
                                                         ("user", "My sister Ana lives in Porto since 2019.")])
    _, theirs = record_turns(bob, outsider, [("user", "I prefer window seats."), ("assistant", "Noted.")])
    gone = memory_create(tenant=alice, user=alice_user, kind="fact", text="I used to live in Leeds.")
    MemoryRecord.objects.unscoped().filter(pk=gone.pk).update(status=MemoryStatus.DELETED)
    stale = memory_create(tenant=alice, user=alice_user, kind="fact", text="My passport expires soon.")
    MemoryRecord.objects.unscoped().filter(pk=stale.pk).update(expires_at=clock.now() - timedelta(days=1))
    dated = memory_create(tenant=alice, user=alice_user, kind="event", text="I landed in Porto yesterday.")
    odd = memory_create(tenant=alice, user=alice_user, kind="fact", text="My seat is 14C.")
    records = MemoryRecord.objects.unscoped()
    records.filter(pk=odd.pk).update(source_message_ids=Value(None, JSONField()))  # JSON null, no list
    records.filter(pk=dated.pk).update(metadata={"dates": DATES, "extractor_note": "kept out of reads"})
    return {"other": memory_create(tenant=alice, user=other, kind="fact", text="Zed likes jazz."),
            "dated": str(dated.pk),
            "outsider_ids": [str(pk) for pk in records.filter(tenant=bob).values_list("pk", flat=True)],
            "gone": str(gone.pk), "stale": str(stale.pk), "messages": messages, "theirs": theirs, "session": session}


def test_memory_rows_match_the_orm_and_keep_their_scope(alice, alice_user, stored):
    assert connection.vendor == "postgresql"  # the suite runs on PostgreSQL, so the SQL path is the one compared
    mine = [str(pk) for pk in MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user,
                                                          status=MemoryStatus.ACTIVE).values_list("pk", flat=True)]
    asked = mine + [str(stored["other"].pk), stored["gone"], stored["stale"], *stored["outsider_ids"]]
    now = clock.now()
    native = memory_rows(tenant=alice, user_ids=[str(alice_user.pk)], memory_ids=asked, now=now)
    orm = {str(r["id"]): r for r in memory_rows_orm(tenant=alice, user_ids=[str(alice_user.pk)], memory_ids=asked,
                                                     now=now)}
    assert set(native) == set(orm) == set(mine) - {stored["stale"]}
    assert native == orm  # every key and value: ids as strings, times exact to the microsecond, JSON parsed
    for memory_id, row in native.items():
        record = MemoryRecord.objects.unscoped().get(pk=memory_id)
        assert (row["id"], row["created_at"]) == (str(record.pk), record.created_at)
    assert any(r["source_message_id"] for r in native.values())
    assert native[stored["dated"]]["dates"] == DATES  # of the metadata, only the dates are read
    assert any(r["source_message_ids"] for r in native.values())
    assert [r["source_message_ids"] for r in native.values()].count(None) == 1  # the JSON null reads as no list
    assert memory_rows(tenant=alice, user_ids=[str(alice_user.pk)], memory_ids=[], now=now) == {}


def test_memory_rows_of_another_tenant_never_come_back_even_for_its_own_users(alice, stored):
    bob_user_ids = [str(u) for u in MemoryRecord.objects.unscoped().filter(pk__in=stored["outsider_ids"])
                    .values_list("user_id", flat=True)]
    assert not memory_rows(tenant=alice, user_ids=bob_user_ids, memory_ids=stored["outsider_ids"], now=clock.now())


def test_turns_around_match_the_orm_and_stay_in_the_tenant(alice, bob, stored):
    first, second, third = stored["messages"]
    theirs = stored["theirs"]
    asked = [str(first.pk), str(second.pk), str(theirs[0].pk)]

    def key(m):
        return m["around"], m["seq"]

    native = sorted(turns_around(tenant=alice, message_ids=asked), key=key)
    orm = sorted(turns_around_orm(tenant=alice, message_ids=asked), key=key)
    assert native == orm
    # The second turn is next to the first (it follows it); the first and third are next to the second. Bob's
    # message is asked for but is not Alice's tenant's: nothing around it comes back.
    assert {(m["around"], m["pk"]) for m in native} == {(str(first.pk), str(second.pk)),
                                                      (str(second.pk), str(first.pk)),
                                                      (str(second.pk), str(third.pk))}
    # Each says whether it was said before the message it is next to.
    assert {(m["around"], m["pk"]): m["before"] for m in native} == {(str(first.pk), str(second.pk)): False,
                                                                   (str(second.pk), str(first.pk)): True,
                                                                   (str(second.pk), str(third.pk)): False}
    assert len(native) == 3
    assert {m["session__user_id"] for m in native} == {str(Message.objects.unscoped().get(pk=first.pk).session.user_id)}
    assert [m["pk"] for m in turns_around(tenant=bob, message_ids=asked)] == [str(theirs[1].pk)]
    assert turns_around(tenant=alice, message_ids=[]) == []


def test_each_row_carries_its_sessions_number_per_user_oldest_first_as_the_orm_counts(alice, bob, alice_user, stored):
    from datetime import timedelta

    from .memory_support import MAY_8

    # Opened in this order, dated out of it: numbers follow the sessions' dates, counted per user.
    later, _ = record_turns(alice, alice_user, [("user", "I booked the Porto hotel for the 14th of May.")],
                            start=MAY_8 + timedelta(days=3))
    earlier, _ = record_turns(alice, alice_user, [("user", "My manager Dana approved the Lisbon trip.")],
                              start=MAY_8 - timedelta(days=3))
    zed = stored["other"].user
    zeds, _ = record_turns(alice, zed, [("user", "I play the saxophone in a jazz band on Fridays.")])
    users = [str(alice_user.pk), str(zed.pk)]
    asked = [str(pk) for pk in MemoryRecord.objects.unscoped().filter(tenant=alice).values_list("pk", flat=True)]
    now = clock.now()
    native = memory_rows(tenant=alice, user_ids=users, memory_ids=asked, now=now)
    orm = {r["id"]: r for r in memory_rows_orm(tenant=alice, user_ids=users, memory_ids=asked, now=now)}
    assert native == orm
    expected = {str(earlier.pk): 1, str(stored["session"].pk): 2, str(later.pk): 3, str(zeds.pk): 1}
    numbered = {r["session_id"]: r["session_number"] for r in native.values() if r["session_id"]}
    assert numbered == expected  # every session has at least one memory here, so all four are checked
    assert {r["session_number"] for r in native.values() if not r["session_id"]} == {None}
    # Bob's tenant asked with Alice's users and ids: nothing, numbers included.
    assert memory_rows(tenant=bob, user_ids=users, memory_ids=asked, now=now) == {}


def test_the_shortlist_reads_enough_candidates_to_fill_the_budget_twice_by_their_sizes():
    from memory.retrieval.ranking import SHORTLIST_MIN, UNSIZED_TOKENS, Candidate, candidates_shortlist

    sized = [Candidate(str(i), {"tokens": 25}) for i in range(500)]
    # 160 candidates hold 4,000 tokens
    assert len(candidates_shortlist(sized, k=1000, token_budget=2000)) == 2 * 2000 // 25
    assert len(candidates_shortlist(sized, k=1000, token_budget=100)) == SHORTLIST_MIN  # never fewer than the floor
    assert len(candidates_shortlist(sized, k=20, token_budget=2000)) == 80  # nor more than k asks for (4 per slot)
    assert len(candidates_shortlist(sized, k=20, token_budget=None)) == 80
    unsized = [Candidate(str(i), {}) for i in range(500)]
    assert len(candidates_shortlist(unsized, k=1000, token_budget=1000)) == 2 * 1000 // UNSIZED_TOKENS
    assert len(candidates_shortlist(sized[:10], k=1000, token_budget=2000)) == 10


def test_a_long_candidate_counts_in_the_shortlist_as_much_as_it_is_shown():
    """A pasted log of 2,000 tokens is shown as its best lines under a budget: counted at its full length it would end
    the shortlist's tiers after a handful of candidates, and a larger budget would read no further down."""
    from memory.retrieval.ranking import SHORTLIST_MIN, Candidate, candidates_shortlist

    long = [Candidate(str(i), {"tokens": 2000}) for i in range(500)]
    assert len(candidates_shortlist(long, k=1000, token_budget=2000)) < SHORTLIST_MIN + 5  # counted whole: the floor
    assert len(candidates_shortlist(long, k=1000, token_budget=2000, shown_max=50)) == 2 * 2000 // 50
    short = [Candidate(str(i), {"tokens": 25}) for i in range(500)]
    assert candidates_shortlist(short, k=1000, token_budget=2000, shown_max=50) == \
        candidates_shortlist(short, k=1000, token_budget=2000)  # shorter than the cap: counted as they are


def test_a_points_payload_carries_its_text_size(alice, alice_user):
    from infra.tokens import count_tokens
    from memory.points import point_payload

    memory = memory_create(tenant=alice, user=alice_user, kind="fact", text="My sister Ana lives in Porto.")
    assert point_payload(memory)["tokens"] == count_tokens(memory.text)


def test_a_session_notes_topics_line_is_not_read_for_retrieval_but_its_other_lines_are(alice, alice_user):
    """A topics line names words a session used and cites the turns that use them; it holds none of what they say,
    so retrieval never reads it as evidence (both read paths), while a quoted line of the same note is read."""
    topics = memory_create(tenant=alice, user=alice_user, kind="note", text="Topics: invoices, caching, deploys.")
    quoted = memory_create(tenant=alice, user=alice_user, kind="note", text="Priya: Production runs python 3.11.")
    fact = memory_create(tenant=alice, user=alice_user, kind="fact", text="Topics: my thesis is on tides.")
    records = MemoryRecord.objects.unscoped()
    records.filter(pk=topics.pk).update(metadata={"note": "topic", "method": "extractive"})
    records.filter(pk=quoted.pk).update(metadata={"note": "fact", "method": "extractive"})
    asked = [str(topics.pk), str(quoted.pk), str(fact.pk)]
    now = clock.now()
    native = memory_rows(tenant=alice, user_ids=[str(alice_user.pk)], memory_ids=asked, now=now)
    orm = memory_rows_orm(tenant=alice, user_ids=[str(alice_user.pk)], memory_ids=asked, now=now)
    # Only the note's own label rules it out: a fact whose words start the same way is read.
    assert set(native) == {r["id"] for r in orm} == {str(quoted.pk), str(fact.pk)}
