"""Session notes: at close a session gets note lines, stored as memories citing the turns they come from; written once
however often the close task runs; extractive without a model, grounded when a model writes them; erased with the
user; and read in place of the passages of the turns they cite."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import httpx
import pytest
import respx

from context.session_notes import extractive_note
from infra.support import support_share
from infra.vector_store import Scope, get_vector_store
from memory.actions import memory_delete, note_line_id
from memory.models import MemoryKind, MemoryRecord, MemoryStatus, SourceType
from memory.retrieval import memory_retrieve
from memory.sources import SourceMessage
from orchestration.erasure import user_erase
from orchestration.messages import messages_append
from orchestration.sessions import session_close, session_finish, session_open
from orchestration.tasks import session_finish_task
from sessions.models import Message
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db(transaction=True)

JUNE_2 = datetime(2025, 6, 2, 9, 0, tzinfo=timezone.utc)

# A working session in the product's shape: long turns, a detail with a number, the assistant's suggestion, a
# decision that takes it, and a question left for later.
TURNS = [
    ("user", "I am building Ledgerly, a small invoicing app for my clients. The invoices page now takes 3.4 seconds "
             "to load, which is far too slow for the accountants who use it every morning. I also wrote a few "
             "notes in a markdown file so I remember why the code looks the way it does."),
    ("assistant", "The slow part is almost certainly the invoices query. I would cache the invoices list in Redis "
                  "with a five-minute expiry and delete the cached key on every write. An index on customer_id "
                  "and due_on would help the query itself as well."),
    ("user", "Thanks, I read through both options twice and talked it over with my colleague. Let's go with the Redis "
             "cache and the five-minute expiry for the invoices list. The index can wait until the import is done, "
             "because the columns may still change."),
    ("assistant", "Good. Cache the rendered list, not the model objects, so a deploy cannot serve stale fields. "
                  "Keep the expiry in settings so you can change it without a release."),
    ("user", "That is enough for today, I have to pick up my daughter from school soon. One more thing for next "
             "time: should the overdue reminders run nightly or every hour? The accountants have not told me yet "
             "which one they prefer."),
]


def _record(tenant, user, turns=TURNS, start=JUNE_2):
    session, _ = session_open(tenant=tenant, user=user, opened_at=start)
    messages_append(tenant=tenant, session_id=session.pk, enqueue_extraction=False,
                    items=[NewMessage(role=role, content=text, created_at=start + timedelta(minutes=i),
                                      name="" if role == "user" else "Assistant")
                           for i, (role, text) in enumerate(turns)])
    return session


def _closed(tenant, user, **kwargs):
    session = _record(tenant, user, **kwargs)
    session_close(tenant=tenant, session_id=session.pk, finish=False)
    session_finish(tenant_id=tenant.pk, session_id=session.pk)
    return session


def _notes(tenant, session):
    return list(MemoryRecord.objects.for_tenant(tenant).filter(session=session, kind=MemoryKind.NOTE)
                .order_by("created_at", "id"))


def test_a_closed_session_gets_note_lines_citing_its_turns(alice, alice_user, extract_calls, bridge_calls):
    session = _closed(alice, alice_user)
    notes = _notes(alice, session)
    assert len(notes) >= 3
    turns = {str(m.pk): m for m in Message.objects.for_tenant(alice).filter(session=session)}
    for note in notes:
        assert note.user_id == alice_user.pk and note.tenant_id == alice.pk
        assert note.source_type == SourceType.SYSTEM and note.status == MemoryStatus.ACTIVE
        cited = note.source_message_ids
        assert 1 <= len(cited) <= 3 and set(cited) <= set(turns), note.text
        assert str(note.source_message_id) == cited[0]
        # Its time is the session's: when the first turn it cites was said.
        assert note.created_at == turns[cited[0]].created_at
        # Every line says what its turns say (the topics line names words they use).
        assert support_share(note.text, [turns[c].content for c in cited], ignore=("Ada", "Assistant")) >= 0.5, \
            note.text
    labels = {n.metadata["note"] for n in notes}
    assert {"topic", "open"} <= labels, [n.text for n in notes]
    assert next(n for n in notes if n.metadata["note"] == "open").text == (
        "Open (Ada): One more thing for next time: should the overdue reminders run nightly or every hour?")
    # Each line is a point in the store, scoped to the tenant and user like every memory.
    points = get_vector_store().scroll(Scope(tenant_id=str(alice.pk), user_id=str(alice_user.pk)), limit=1000)[0]
    assert {str(n.pk) for n in notes} <= {p.memory_id for p in points}


def test_a_decision_cites_the_suggestion_it_takes():
    suggestion = SourceMessage(id="m1", role="assistant", speaker="Assistant", content=(
        "Two things would fix the slow page. I would cache the invoices list in Redis with a five-minute expiry. "
        "An index on customer_id and due_on would also help, but it is more work while the columns still change."))
    decision = SourceMessage(id="m2", role="user", speaker="Ada", content=(
        "Thank you, that is clear and it helps a lot. I have been thinking about it all day. Let's go with the Redis "
        "cache and the five-minute expiry for the invoices list. I will have a go at it this evening."))
    lines = extractive_note([suggestion, decision], ignore=("Ada", "Assistant"))
    taken = next(line for line in lines if line.label == "decision")
    assert taken.text == ("Decided (Ada): Let's go with the Redis cache and the five-minute expiry for the invoices "
                          "list.")
    # It takes what the turn before suggested, so it cites that turn as well.
    assert [s.id for s in taken.sources] == ["m2", "m1"]


def test_a_sentence_that_is_most_of_its_turn_is_not_quoted_again():
    short = SourceMessage(id="m1", role="user", speaker="Ada", content="We adopted a grey cat called Pixel yesterday.")
    long = SourceMessage(id="m2", role="assistant", speaker="Assistant", content=(
        "Congratulations on Pixel! Grey cats of that age usually settle in within two weeks. Keep the litter tray "
        "away from the food bowls, and book the first vet visit within a month of adoption."))
    lines = extractive_note([short, long], ignore=("Ada", "Assistant"))
    quoted = [line for line in lines if line.label != "topic"]
    assert quoted and all([s.id for s in line.sources][0] == "m2" for line in quoted), [x.text for x in lines]


def test_finishing_twice_writes_one_note(alice, alice_user, extract_calls, bridge_calls):
    session = _record(alice, alice_user)
    session_close(tenant=alice, session_id=session.pk, finish=False)
    session_finish_task.apply(args=[str(alice.pk), str(session.pk)]).get()
    first = [(n.pk, n.text) for n in _notes(alice, session)]
    session_finish_task.apply(args=[str(alice.pk), str(session.pk)]).get()
    assert first and [(n.pk, n.text) for n in _notes(alice, session)] == first
    # The lines' ids derive from the session, so a rerun racing the first lands on the same rows.
    assert {pk for pk, _ in first} == {note_line_id(session.pk, i) for i in range(len(first))}


def test_a_deleted_or_forgotten_note_does_not_come_back(alice, alice_user, extract_calls, bridge_calls):
    from django.db import transaction

    from infra import clock
    from memory.actions import memories_forget_records

    session = _closed(alice, alice_user)
    notes = _notes(alice, session)
    memory_delete(tenant=alice, memory_id=notes[1].pk, actor_type="end_user")
    with transaction.atomic():  # the forget job hard-deletes what was deleted, keeping only a tombstone
        memories_forget_records(tenant=alice, records=list(MemoryRecord.objects.for_tenant(alice)
                                                          .select_for_update().filter(pk=notes[0].pk)),
                                reasons={}, now=clock.now())
    session_finish(tenant_id=alice.pk, session_id=session.pk)
    after = _notes(alice, session)
    assert [n.pk for n in after] == [n.pk for n in notes[1:]]
    assert after[0].status == MemoryStatus.DELETED


def test_without_a_model_the_note_is_extractive(alice, alice_user, extract_calls, bridge_calls, settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL = "", ""
    session = _closed(alice, alice_user)
    notes = _notes(alice, session)
    assert notes and {n.metadata["method"] for n in notes} == {"extractive"}
    assert {n.extractor for n in notes} == {"session_note:extractive"}
    quoted = [n for n in notes if n.metadata["note"] != "topic"]
    turns = Message.objects.for_tenant(alice).filter(session=session)
    # Extractive: every line but the topics quotes a sentence of a turn it cites, word for word.
    for note in quoted:
        sentence = note.text.split(": ", 1)[1]
        assert any(sentence in t.content for t in turns if str(t.pk) in note.source_message_ids), note.text


def test_notes_can_be_turned_off(alice, alice_user, extract_calls, bridge_calls, settings):
    settings.CONTINUUM_SESSION_NOTES = False
    session = _closed(alice, alice_user)
    assert not _notes(alice, session)


def test_a_note_quotes_only_the_roles_the_tenant_remembers(alice, alice_user, extract_calls, bridge_calls):
    alice.remember_assistant_turns = False
    alice.save()
    session = _closed(alice, alice_user)
    notes = _notes(alice, session)
    users = {str(m.pk) for m in Message.objects.for_tenant(alice).filter(session=session, role="user")}
    assert notes and all(set(n.source_message_ids) <= users for n in notes)
    assert not any("Assistant:" in n.text for n in notes)


def _model_answers(answer: dict):
    return respx.post("http://llm.test/v1/chat/completions").mock(return_value=httpx.Response(200, json={
        "id": "x", "object": "chat.completion", "created": 0, "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": json.dumps(answer)}}]}))


def _bridge_and_note(answer: dict):
    """The model answers the bridge call with a bridge and the note call with `answer`."""
    bridge = {"summary": "Ada asked about the slow invoices page and chose a Redis cache.", "goal": "", "found": "",
              "decided": "", "open": ""}

    def reply(request):
        sent = json.loads(request.content)
        name = sent["response_format"]["json_schema"]["name"]
        body = answer if name == "session_note" else bridge
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(body)}}]})

    return respx.post("http://llm.test/v1/chat/completions").mock(side_effect=reply)


@respx.mock
def test_with_a_model_unsupported_lines_are_dropped(alice, alice_user, extract_calls, bridge_calls, settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://llm.test/v1", "test-model"
    route = _bridge_and_note({"lines": [
        {"kind": "fact", "text": "The invoices page takes 3.4 seconds to load.", "turns": [1]},
        {"kind": "decision", "text": "Cache the invoices list in Redis with a five-minute expiry.", "turns": [3, 2]},
        # Not said anywhere in the session: a small model's filler.
        {"kind": "fact", "text": "Ada migrated the billing database to MongoDB on Friday.", "turns": [4]},
        # Said, but not in the turn it cites.
        {"kind": "open", "text": "Overdue reminders: nightly or hourly?", "turns": [1]},
        {"kind": "topic", "text": "Overdue reminders schedule", "turns": [99]},
    ]})
    session = _closed(alice, alice_user)
    notes = _notes(alice, session)
    assert [n.text for n in notes] == ["The invoices page takes 3.4 seconds to load.",
                                       "Decided: Cache the invoices list in Redis with a five-minute expiry."]
    assert {n.metadata["method"] for n in notes} == {"abstractive"}
    seqs = {str(m.pk): m.seq for m in Message.objects.for_tenant(alice).filter(session=session)}
    assert [seqs[c] for c in notes[1].source_message_ids] == [3, 2]
    assert any(json.loads(c.request.content)["response_format"]["json_schema"]["name"] == "session_note"
               for c in route.calls)


@respx.mock
def test_with_a_model_whose_lines_all_fail_the_note_is_extractive(alice, alice_user, extract_calls, bridge_calls,
                                                                    settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://llm.test/v1", "test-model"
    _bridge_and_note({"lines": [{"kind": "fact", "text": "Ada moved to Lisbon in March.", "turns": [1]}]})
    session = _closed(alice, alice_user)
    notes = _notes(alice, session)
    assert notes and {n.metadata["method"] for n in notes} == {"extractive"}


def test_erasing_the_user_erases_their_notes(alice, alice_user, extract_calls, bridge_calls):
    session = _closed(alice, alice_user)
    ids = [str(n.pk) for n in _notes(alice, session)]
    assert ids
    report = user_erase(tenant=alice, user=alice_user)
    assert report.complete
    assert not MemoryRecord.objects.unscoped().filter(pk__in=ids).exists()
    points = get_vector_store().scroll(Scope(tenant_id=str(alice.pk), user_id=str(alice_user.pk)), limit=1000)[0]
    assert not {p.memory_id for p in points} & set(ids)


def test_a_note_line_is_read_in_place_of_the_passages_of_its_turns(alice, alice_user, extract_calls, bridge_calls,
                                                                     settings):
    """Where retrieval is configured to return notes as lines (MEMORY_RETRIEVE_NOTES, and MEMORY_LINES_AS_TURNS off),
    a line stands for the turns it cites."""
    from orchestration.messages import message_extract

    settings.MEMORY_RETRIEVE_NOTES = True
    settings.MEMORY_LINES_AS_TURNS = False
    alice.memory_ttl_days = {"event": None, "goal": None, "note": None}
    alice.save()
    session = _closed(alice, alice_user)
    for m in Message.objects.for_tenant(alice).filter(session=session):
        message_extract(tenant_id=alice.pk, message_id=m.pk)
    line = next(n for n in _notes(alice, session) if n.metadata["note"] != "topic")
    query = line.text.split(": ", 1)[1]
    got = memory_retrieve(tenant=alice, user=alice_user, query=query, k=20, token_budget=2000, record_access=False)
    assert str(line.pk) in {m.memory_id for m in got}
    # The line stands for the turns it cites: their own memories do not spend the budget again.
    cited = set(line.source_message_ids)
    again = [m for m in got if m.kind != MemoryKind.NOTE and m.source_message_id in cited]
    assert not again, [(m.kind, m.text[:60]) for m in again]
    # Without the note those turns' own memories are what comes back.
    MemoryRecord.objects.for_tenant(alice).filter(kind=MemoryKind.NOTE).update(status=MemoryStatus.DELETED)
    got = memory_retrieve(tenant=alice, user=alice_user, query=query, k=20, token_budget=2000, record_access=False)
    assert {m.source_message_id for m in got} >= cited


def test_another_tenants_search_never_returns_a_note(alice, bob, alice_user, extract_calls, bridge_calls, settings):
    from tenants.services import end_user_create

    settings.MEMORY_RETRIEVE_NOTES = True  # notes searched at all, so the scope is what keeps Alice's out
    _closed(alice, alice_user)
    outsider = end_user_create(tenant=bob, external_id="alice-user-1", display_name="Ada")
    _closed(bob, outsider, turns=[("user", "Our garden shed needs a new roof before the autumn rain arrives.")])
    got = memory_retrieve(tenant=bob, user=outsider, query="Redis cache invoices list five-minute expiry", k=50)
    assert all(m.user_id == str(outsider.pk) for m in got)
    alice_notes = {str(pk) for pk in MemoryRecord.objects.for_tenant(alice).filter(kind=MemoryKind.NOTE)
                   .values_list("pk", flat=True)}
    assert alice_notes and not {m.memory_id for m in got} & alice_notes


def test_a_corrected_value_is_the_line_a_long_message_gives():
    """A later question about a value needs the sentence that corrects it, which inside a long message is seldom its
    most specific sentence: a correction is lifted above a plain statement that is a little more specific."""
    earlier = SourceMessage(id="m1", role="user", speaker="Ada", content=(
        "The billing worker runs on a small VPS. Production runs Python 3.9 and Postgres 14."))
    reply = SourceMessage(id="m2", role="assistant", speaker="Assistant", content=(
        "Thanks, that settles which features the code can rely on."))
    later = SourceMessage(id="m3", role="user", speaker="Ada", content=(
        "Quick update on the reports page. I spent the whole morning on the reports page and it went slower than I "
        "hoped. Turns out production is on Python 3.11, not what I told you. I will look at the export next."))
    lines = extractive_note([earlier, reply, later], ignore=("Ada", "Assistant"), max_lines=3)
    from_later = [line.text for line in lines if line.label != "topic" and line.sources[0].id == "m3"]
    assert from_later == ["Ada: Turns out production is on Python 3.11, not what I told you."], from_later
