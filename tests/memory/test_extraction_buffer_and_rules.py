"""Extraction feeds the open session's buffer at once, and an implicit-subject dislike is still a preference."""
import pytest

from context.buffer import buffer_get
from memory.models import MemoryRecord

from .memory_support import record_turns

pytestmark = pytest.mark.django_db(transaction=True)


def test_elided_never_clause_becomes_a_preference(alice, alice_user):
    record_turns(alice, alice_user, [("user", "I prefer aisle seats, and never United.")])
    prefs = set(MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user, kind="preference")
                .values_list("text", flat=True))
    assert prefs == {"Ada prefers aisle seats.", "Ada avoids United."}


def test_lowercase_after_never_is_not_a_preference(alice, alice_user):
    record_turns(alice, alice_user, [("user", "I tried the app, and never mind the rest.")])
    assert not MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user, text__contains="avoids").exists()


def test_a_liking_of_nothing_nameable_is_not_a_preference(alice, alice_user):
    record_turns(alice, alice_user, [("user", "Oh I would love to. I love that! I really love it so much."),
                                     ("user", "I love live music and I love it when my kids dance.")])
    prefs = set(MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user, kind="preference")
                .values_list("text", flat=True))
    # "it so much" still names something (how much), so it stays a liking; "to" and "that" alone do not.
    assert prefs == {"Ada loves it so much.", "Ada loves live music."}, prefs


def test_extracted_facts_join_the_open_session_buffer(alice, alice_user):
    session, _ = record_turns(alice, alice_user,
                              [("user", "My seat preference is aisle and my loyalty number is AB12345.")])
    buf = buffer_get(tenant_id=alice.pk, user_id=alice_user.pk, session_id=session.pk)
    facts = {f["text"] for f in buf.facts}
    stored = set(MemoryRecord.objects.unscoped().filter(tenant=alice, session=session).exclude(kind="event")
                 .values_list("text", flat=True))
    assert stored and stored <= facts


def test_elided_habit_clause_is_split_from_the_preference(alice, alice_user):
    record_turns(alice, alice_user, [("user", "I prefer aisle seats and never fly United.")])
    prefs = set(MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user, kind="preference")
                .values_list("text", flat=True))
    assert prefs == {"Ada prefers aisle seats.", "Ada never flies United."}


def test_never_with_a_past_form_reports_what_happened_not_a_habit(alice, alice_user):
    # After "never" or "always" a habit has the verb's base form ("never fly United"); a past form reports what did or
    # did not happen, in the words the user used: no habit slot, and no verb conjugated twice ("trieds").
    record_turns(alice, alice_user, [("user", "I've gone camping a few times but never tried mountain climbing."),
                                     ("user", "I always went to the lake as a kid.")])
    stored = dict(MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user).exclude(kind="event")
                  .values_list("text", "subject"))
    assert not any("trieds" in text or "wents" in text for text in stored), stored
    assert not any(subject.startswith("habit:") for subject in stored.values()), stored
    assert stored.get("Ada never tried mountain climbing.") == "", stored
