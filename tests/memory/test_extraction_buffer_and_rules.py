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
    # "to", "that" and "it so much" name nothing the line can say without the turn around it.
    assert prefs == {"Ada loves live music."}, prefs


def test_a_typed_line_says_what_it_means_without_its_turn(alice, alice_user):
    """A statement whose object points outside its sentence (a pronoun for what was said before, the person spoken
    to, a reaction) stays an event; a typed line is written only where it reads on its own."""
    record_turns(alice, alice_user, [
        ("user", "I love the thought of you painting again. I don't want my kids to go through that."),
        ("user", "I like that it needs my mechanical skills. I want my kids to learn that too."),
        ("user", "I love your new haircut. I prefer trains that leave before nine. I want to learn how to sail."),
        # A third person's pronoun inside the object, a finite verb where the object starts, a phrase cut short.
        ("user", "I love the calm and focus it gives me. I love is the best word for it. I want to get people "
                 "involved by sharing ideas and taking a"),
        ("user", "I enjoy long walks with my sister Mia.")])
    typed = set(MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user, kind__in=["preference", "goal"])
                .values_list("text", flat=True))
    assert typed == {"Ada prefers trains that leave before nine.", "Ada wants to learn how to sail.",
                     "Ada enjoys long walks with Ada's sister Mia."}, typed


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
