"""The LoCoMo benchmark's import goes through the service and keeps the dataset's dates and dia_ids."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from memory.models import MemoryRecord
from sessions.models import Message, Session

pytestmark = pytest.mark.django_db(transaction=True)


def _bench():
    path = Path(__file__).resolve().parents[2] / "bench" / "locomo.py"
    spec = importlib.util.spec_from_file_location("bench_locomo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SAMPLE = {
    "sample_id": "mini-1",
    "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! Good to see you!"},
            {"speaker": "Melanie", "dia_id": "D1:2",
             "text": "Hi! I ran a charity race for mental health last Saturday."},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "I went to a LGBTQ support group yesterday.",
             "blip_caption": "a photo of a rainbow flag"},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "I painted a lake sunrise last year."},
            {"speaker": "Caroline", "dia_id": "D2:2", "text": "I am researching adoption agencies."},
        ],
    },
    "qa": [],
}


def test_import_keeps_dataset_dates_dia_ids_and_provenance(alice, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    alice.memory_ttl_days = {"event": None, "goal": None}
    alice.save()
    bench = _bench()
    users = bench.import_sample(SAMPLE, alice)
    assert set(users) == {"Caroline", "Melanie"}
    for name, user in users.items():
        sessions = list(Session.objects.unscoped().filter(tenant=alice, user=user).order_by("opened_at"))
        assert [s.opened_at.date().isoformat() for s in sessions] == ["2023-05-08", "2023-06-27"]
        assert all(s.state == "closed" for s in sessions)
        messages = Message.objects.unscoped().filter(session__in=sessions)
        assert sorted(messages.values_list("external_id", flat=True)) == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
        own = {m.external_id for m in messages.filter(role="user")}
        assert own == {t["dia_id"] for n in (1, 2) for t in SAMPLE["conversation"][f"session_{n}"]
                       if t["speaker"] == name}
    dia_of = {str(mid): ext
              for mid, ext in Message.objects.unscoped().filter(tenant=alice).values_list("pk", "external_id")}
    events = MemoryRecord.objects.unscoped().filter(tenant=alice, kind="event")
    # "Hey Mel! Good to see you!" is chatter; each other turn is its speaker's event and, in the other speaker's
    # session, what their assistant heard said.
    assert events.filter(source_type="user_stated").count() == 4
    assert events.filter(source_type="assistant").count() == 4
    for record in MemoryRecord.objects.unscoped().filter(tenant=alice):
        message = Message.objects.unscoped().get(pk=record.source_message_id)
        if record.kind == "note":  # a session note's line cites turns of its session, whoever said them
            assert message.session_id == record.session_id
        else:
            assert message.role == ("user" if record.source_type != "assistant" else "assistant")
        assert message.session.user_id == record.user_id
        assert record.created_at == message.created_at
    events = events.filter(source_type="user_stated")
    support = events.get(text__contains="support group")
    assert support.created_at.date().isoformat() == "2023-05-08"
    assert "[shares an image: a photo of a rainbow flag]" in support.text
    assert dia_of[str(support.source_message_id)] == "D1:3"

    from memory.retrieval import memory_retrieve_for_users
    from sessions.turn_reads import turns_around

    found = memory_retrieve_for_users(tenant=alice, users=list(users.values()), query="When did Caroline go to the "
                                      "LGBTQ support group?", k=3, token_budget=400, record_access=False,
                                      neighbours=turns_around)
    # The turn itself (shown with the turn before it), or its session note's line quoting it, read in its place.
    assert found[0].memory_id == str(support.pk) or found[0].kind == "note"
    assert dia_of[found[0].source_message_id] == "D1:3"
    assert found[0].provenance.endswith(' on 8 May 2023 (session 1); "yesterday" = 7 May 2023')
    assert "D1:3" in bench.memory_dia_ids(found[0], dia_of)
    assert set().union(*(bench.memory_dia_ids(m, dia_of) for m in found)) >= {"D1:3", "D1:2"}


def test_session_dates_parse_like_the_dataset():
    bench = _bench()
    assert bench.parse_session_date("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"
    assert bench.parse_session_date("10:37 am on 27 June, 2023").hour == 10
