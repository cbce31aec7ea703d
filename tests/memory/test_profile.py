"""The standing profile: current values only, stated before inferred, never the assistant's words, bounded."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memory.actions import memory_create, memory_supersede
from memory.models import MemoryEvent
from memory.profile import profile_render, profile_select

pytestmark = pytest.mark.django_db
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


def _make(tenant, user, kind, text, *, source_type="user_stated", subject="", minutes=0, confidence=0.8):
    return memory_create(tenant=tenant, user=user, kind=kind, text=text, source_type=source_type, subject=subject,
                         confidence=confidence, created_at=T0 + timedelta(minutes=minutes))


def test_profile_holds_instructions_preferences_and_facts_but_no_events(alice, alice_user):
    _make(alice, alice_user, "procedure", "Ada wants answers in metric units.")
    _make(alice, alice_user, "preference", "Ada prefers aisle seats.", minutes=1)
    _make(alice, alice_user, "fact", "Ada lives in Lisbon.", subject="home city", minutes=2)
    _make(alice, alice_user, "event", "Ada: I went to the dentist today.", minutes=3)
    texts = [e.text for e in profile_select(tenant=alice, user=alice_user)]
    assert texts == ["Ada wants answers in metric units.", "Ada prefers aisle seats.", "Ada lives in Lisbon."]


def test_profile_keeps_the_current_value_of_a_subject(alice, alice_user):
    old = _make(alice, alice_user, "fact", "Ada lives in Lisbon.", subject="home city")
    new = _make(alice, alice_user, "fact", "Ada lives in Porto.", subject="home city", minutes=5)
    memory_supersede(old=old, new=new, actor_type=MemoryEvent.Actor.SYSTEM)
    assert [e.text for e in profile_select(tenant=alice, user=alice_user)] == ["Ada lives in Porto."]


def test_profile_never_holds_the_assistants_words_and_ranks_stated_before_inferred(alice, alice_user):
    _make(alice, alice_user, "preference", "Ada may like quiet rooms.", source_type="inferred", confidence=0.9)
    _make(alice, alice_user, "preference", "Ada prefers window tables.", minutes=1, confidence=0.6)
    _make(alice, alice_user, "event", "I booked the flight.", source_type="assistant", minutes=2)
    texts = [e.text for e in profile_select(tenant=alice, user=alice_user)]
    assert texts == ["Ada prefers window tables.", "Ada may like quiet rooms."]


def test_profile_is_scoped_to_its_tenant_and_user(alice, alice_user, bob):
    from tenants.services import end_user_create

    other = end_user_create(tenant=alice, external_id="someone-else")
    _make(alice, other, "preference", "Someone else prefers tea.")
    bob_user = end_user_create(tenant=bob, external_id="alice-user-1")
    _make(bob, bob_user, "preference", "Bob's user prefers coffee.")
    assert profile_select(tenant=alice, user=alice_user) == []


def test_profile_render_keeps_whole_lines_within_its_limit(alice, alice_user):
    for i in range(12):
        _make(alice, alice_user, "preference", f"Ada prefers option number {i} for the project layout.", minutes=i)
    entries = profile_select(tenant=alice, user=alice_user)
    text, tokens, kept = profile_render(entries, limit_tokens=60)
    from infra.tokens import count_tokens

    assert 0 < len(kept) < len(entries)
    assert tokens == count_tokens(text) <= 60
    assert all(e.text in text for e in kept)
    assert profile_render(entries, limit_tokens=3) == ("", 0, [])


def test_a_liking_that_needs_its_conversation_to_be_understood_stays_out_of_the_profile(alice, alice_user):
    _make(alice, alice_user, "preference", "Ada loves it.", subject="likes: it")
    _make(alice, alice_user, "preference", "Ada loves how you put it.", subject="likes: how you put it", minutes=1)
    _make(alice, alice_user, "preference", "Ada loves live music.", subject="likes: live music", minutes=2)
    assert [e.text for e in profile_select(tenant=alice, user=alice_user)] == ["Ada loves live music."]


def test_only_what_stands_enters_the_profile(alice, alice_user):
    """Extracted from conversation, a choice and an instruction stand at once; a liking or a fact said once does not
    until the user says it again (it stays a memory that retrieval shows when a turn is about it)."""
    def extracted(kind, text, minutes, *, extractor="rules", reinforced=0):
        m = memory_create(tenant=alice, user=alice_user, kind=kind, text=text, extractor=extractor,
                          created_at=T0 + timedelta(minutes=minutes))
        if reinforced:
            type(m).objects.unscoped().filter(pk=m.pk).update(reinforcement_count=reinforced)
        return m

    extracted("procedure", "Ada asked the assistant: Always answer in metric units.", 0)
    extracted("preference", "Ada prefers aisle seats.", 1)
    extracted("preference", "Ada avoids United.", 2, extractor="llm")
    extracted("preference", "Ada loves all the yellow leaves.", 3)
    extracted("fact", "Ada's dream is to sail around Iceland.", 4, extractor="llm")
    extracted("fact", "Ada's hosting budget is $75 a month.", 5, reinforced=1)
    extracted("preference", "Ada loves live music.", 6, reinforced=2)
    texts = {e.text for e in profile_select(tenant=alice, user=alice_user)}
    assert texts == {"Ada asked the assistant: Always answer in metric units.", "Ada prefers aisle seats.",
                     "Ada avoids United.", "Ada's hosting budget is $75 a month.", "Ada loves live music."}


def test_the_profiles_statement_reads_what_the_orm_reads_within_its_scope(alice, alice_user, bob):
    """On PostgreSQL the profile is read by a statement of its own: the same rows, keys and values as the ORM path,
    newest first, and nothing of another user, another tenant, another kind or status, or the assistant's words."""
    from django.db import connection

    from memory.models import MemoryRecord, MemoryStatus
    from memory.profile import profile_rows, profile_rows_orm
    from tenants.services import end_user_create

    assert connection.vendor == "postgresql"  # the suite runs on PostgreSQL, so the statement is the path compared
    mine = [_make(alice, alice_user, "preference", "Ada prefers aisle seats.", minutes=1),
            _make(alice, alice_user, "fact", "Ada lives in Porto.", subject="home city", minutes=2, confidence=0.55),
            _make(alice, alice_user, "procedure", "Always answer in metric units.", source_type="inferred")]
    gone = _make(alice, alice_user, "preference", "Ada prefers tea.", minutes=3)
    MemoryRecord.objects.unscoped().filter(pk=gone.pk).update(status=MemoryStatus.DELETED)
    _make(alice, alice_user, "event", "Ada flew to Porto.", minutes=4)
    _make(alice, alice_user, "event", "I found three flights.", source_type="assistant", minutes=5)
    _make(alice, end_user_create(tenant=alice, external_id="zed"), "preference", "Zed prefers jazz.")
    _make(bob, end_user_create(tenant=bob, external_id="alice-user-1"), "preference", "Bob's user prefers coffee.")
    native = profile_rows(tenant=alice, user=alice_user)
    assert native == profile_rows_orm(tenant=alice, user=alice_user)
    assert [r.memory_id for r in native] == [str(m.pk) for m in (mine[1], mine[0], mine[2])]  # newest first
    assert (native[0].created_at, native[0].confidence, native[0].subject) == (mine[1].created_at, 0.55, "home city")
