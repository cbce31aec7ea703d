"""One fact, one memory: statements are stored in the third person with a subject and a predicate, the same words
from two extractors fold into one memory with both sources, and a correction updates every active statement it
contradicts. The flight of scripts/demo.py is one case; the rules are general."""
from __future__ import annotations

import json

import httpx
import pytest
import respx

from memory import actions
from memory.extraction.statements import statement_normalize, third_person
from memory.models import MemoryEvent, MemoryRecord
from orchestration.messages import message_extract, source_of

from .memory_support import record_turns

pytestmark = pytest.mark.django_db(transaction=True)


def active_statements(tenant, user):
    return list(MemoryRecord.objects.unscoped().filter(tenant=tenant, user=user, status="active")
                .exclude(kind="event").order_by("created_at", "text"))


# --- third person, subject and predicate --------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("I prefer aisle seats, and never United.", "Dana prefers aisle seats, and never United."),
    ("I never fly red-eyes", "Dana never flies red-eyes"),
    ("I'm allergic to peanuts and my son is too.", "Dana is allergic to peanuts and Dana's son is too."),
    ("I went to Lisbon in May.", "Dana went to Lisbon in May."),
    ("Dana's destination is Newark.", "Dana's destination is Newark."),
    ("Bear with me if I repeat myself.", "Bear with Dana if Dana repeats themselves."),
    ("I carve out some me-time each day.", "Dana carves out some me-time each day."),
    ("I need a flight to Newark.", "Dana needs a flight to Newark."),
    ("I tried sushi and I used chopsticks.", "Dana tried sushi and Dana used chopsticks."),
])
def test_first_person_text_is_put_in_the_third_person(text, expected):
    assert third_person(text, who="Dana") == expected


@pytest.mark.parametrize("fragment", ["aisle seats", "never United", "Aisle seats.", "Dana: aisle seats",
                                      "window or aisle"])
def test_a_fragment_is_no_statement(fragment):
    assert statement_normalize(fragment, who="Dana") is None


def test_a_statement_missing_only_its_subject_gets_the_users_name():
    assert statement_normalize("Prefers aisle seats.", who="Dana") == "Dana prefers aisle seats."
    assert statement_normalize("Never flies United", who="Dana") == "Dana never flies United"


def test_remember_stores_first_person_text_in_the_third_person(alice, alice_user):
    record, outcome = actions.memory_remember(tenant=alice, user=alice_user, kind="fact",
                                              text="I am allergic to peanuts.")
    assert outcome == "created" and record.text == "Ada is allergic to peanuts."


@pytest.mark.parametrize("fragment", ["aisle seats", "never United"])
def test_remember_refuses_a_memory_without_subject_or_predicate(alice, alice_user, fragment):
    assert actions.memory_remember(tenant=alice, user=alice_user, kind="preference", text=fragment,
                                   source_type="inferred") == (None, actions.INCOMPLETE)
    assert not MemoryRecord.objects.unscoped().filter(tenant=alice).exists()


def _llm_answer(stated, implied=()):
    body = {"stated": list(stated), "implied": list(implied)}
    return httpx.Response(200, json={
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": json.dumps(body)}}]})


def test_extraction_drops_fragments_and_restates_first_person_memories(alice, alice_user, settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_API_KEY = "http://llm.test/v1", "m", "k"
    settings.LLM_MAX_RETRIES = 0
    explicit = [{"kind": "preference", "text": "I like quiet hotel rooms.", "subject": "", "value": "",
                 "confidence": 0.9}]
    implicit = [{"kind": "preference", "text": "quiet hotel rooms", "subject": "", "value": "", "confidence": 0.7},
                {"kind": "preference", "text": "never noisy hotel rooms", "subject": "", "value": "",
                 "confidence": 0.7}]
    with respx.mock(assert_all_called=True) as mock:
        mock.post("http://llm.test/v1/chat/completions").mock(side_effect=[_llm_answer(explicit, implicit)])
        record_turns(alice, alice_user, [("user", "The last hotel was far too noisy; I like quiet rooms.")])
    texts = {m.text for m in active_statements(alice, alice_user)}
    assert "Ada likes quiet hotel rooms." in texts
    assert not texts & {"quiet hotel rooms", "never noisy hotel rooms", "I like quiet hotel rooms."}


# --- one statement, one memory ------------------------------------------------------------------------------------

@pytest.mark.parametrize("remember_first", [True, False])
def test_the_remember_tool_and_the_rules_on_one_message_make_one_memory_per_fact(alice, alice_user, remember_first):
    """The demo's second line: the model's remember(kind=fact, the user's words) and the rules' preferences on the
    same message were five memories; they are the two facts the message states, each with both sources."""
    _, (message,) = record_turns(alice, alice_user, [("user", "I prefer aisle seats, and never United.")],
                                 extract=False)

    def remember():
        actions.memory_remember(tenant=alice, user=alice_user, kind="fact",
                                text="I prefer aisle seats, and never United.", source=source_of(message))

    def extract():
        message_extract(tenant_id=message.tenant_id, message_id=message.pk)

    for step in ([remember, extract] if remember_first else [extract, remember]):
        step()
    memories = active_statements(alice, alice_user)
    assert sorted(m.text for m in memories) == ["Ada avoids United.", "Ada prefers aisle seats."]
    for m in memories:
        assert {m.extractor, *m.metadata.get("also_extracted_by", [])} == {"remember", "rules"}
        assert m.source_message_ids == [str(message.pk)] and m.reinforcement_count == 0


def test_the_same_statement_filed_under_another_kind_reinforces_it(alice, alice_user):
    first, _ = actions.memory_remember(tenant=alice, user=alice_user, kind="preference", text="Ada rides a bike.")
    second, outcome = actions.memory_remember(tenant=alice, user=alice_user, kind="fact", text="Ada rides a bike.")
    assert outcome == "reinforced" and second.pk == first.pk
    assert len(active_statements(alice, alice_user)) == 1


# --- a correction reaches every statement it contradicts ----------------------------------------------------------

def test_a_corrected_value_updates_the_goal_that_still_said_the_old_one(alice, alice_user):
    record_turns(alice, alice_user, [("user", "I need a flight from SFO to NYC next Tuesday, under $400."),
                                     ("user", "Actually, change the destination to Newark.")])
    texts = [m.text for m in active_statements(alice, alice_user)]
    assert not [t for t in texts if "NYC" in t], texts
    goal = MemoryRecord.objects.unscoped().get(tenant=alice, kind="goal", status="active")
    assert goal.text == "Ada needs a flight from SFO to Newark next Tuesday."
    old_goal = MemoryRecord.objects.unscoped().get(tenant=alice, kind="goal", status="superseded")
    assert "NYC" in old_goal.text and old_goal.superseded_by_id == goal.pk
    history = [e.action for e in MemoryEvent.objects.unscoped().filter(memory_uuid=old_goal.pk).order_by("created_at")]
    assert history == ["created", "superseded"]
    destination = MemoryRecord.objects.unscoped().get(tenant=alice, subject="destination", status="active")
    assert destination.value == "Newark"


def test_a_correction_leaves_the_users_own_words_and_unrelated_memories_alone(alice, alice_user):
    record_turns(alice, alice_user, [("user", "I need a flight from SFO to NYC next Tuesday."),
                                     ("user", "My sister lives in Boston."),
                                     ("user", "Actually, change the destination to Newark.")])
    assert MemoryRecord.objects.unscoped().filter(tenant=alice, kind="event", text__contains="NYC",
                                                  status="active").exists()
    corrected = [m for m in active_statements(alice, alice_user) if m.extractor == "correction"]
    assert corrected and all("Boston" not in m.text and "Newark" in m.text for m in corrected)


def test_without_the_users_name_a_statement_opening_with_a_name_has_a_subject():
    assert statement_normalize("Ada is vegetarian.", who="") == "Ada is vegetarian."
    assert statement_normalize("Never United", who="") is None and statement_normalize("Aisle seats", who="") is None


def test_a_correction_extracted_first_still_corrects_the_goal_said_before_it(alice, alice_user):
    """Messages are extracted in no fixed order: the correction may be stored before the message it corrects."""
    _, (first, second) = record_turns(alice, alice_user, [
        ("user", "I need a flight from SFO to NYC next Tuesday, under $400."),
        ("user", "Actually, change the destination to Newark.")], extract=False)
    for message in (second, first):
        message_extract(tenant_id=message.tenant_id, message_id=message.pk)
    texts = [m.text for m in active_statements(alice, alice_user)]
    assert "Ada needs a flight from SFO to Newark next Tuesday." in texts and not [t for t in texts if "NYC" in t]


def test_a_model_that_files_every_statement_under_the_users_name_supersedes_nothing(alice, alice_user, settings):
    """A small model filled `subject` with the user's name; every statement then shared one slot, and each new one
    superseded all the earlier, unrelated ones. A subject naming the person is no slot; a real slot still corrects."""
    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_API_KEY = "http://llm.test/v1", "m", "k"
    settings.LLM_MAX_RETRIES = 0

    def said(text, subject, value):
        return _llm_answer([{"kind": "fact", "text": text, "subject": subject, "value": value, "confidence": 0.9}], [])

    answers = [said("Ada keeps notes in a markdown file.", "Ada", "notes"),
               said("Ada's deploys take about four minutes.", "Ada", "deploys"),
               said("Ada's staging server listens on port 8443.", "ada", "port"),
               said("Ada's editor is VS Code.", "editor", "VS Code"),
               said("Ada's editor is Neovim.", "editor", "Neovim")]
    with respx.mock(assert_all_called=True) as mock:
        mock.post("http://llm.test/v1/chat/completions").mock(side_effect=answers)
        record_turns(alice, alice_user, [
            ("user", "I keep notes in a markdown file."), ("user", "Deploys take about four minutes."),
            ("user", "The staging server listens on port 8443."), ("user", "My editor is VS Code."),
            ("user", "I switched: my editor is Neovim now.")], extract=False)
        for m in source_of_all(alice):
            message_extract(tenant_id=m.tenant_id, message_id=m.pk)
    texts = {m.text for m in active_statements(alice, alice_user)}
    assert {"Ada keeps notes in a markdown file.", "Ada's deploys take about four minutes.",
            "Ada's staging server listens on port 8443."} <= texts
    assert any("Neovim" in t for t in texts) and not any("VS Code" in t for t in texts)  # a real slot still corrects


def test_the_same_statement_again_reinforces_whatever_value_the_model_gave_it(alice, alice_user, settings):
    """The local model filed a remark under a slot and read a different value off it each time it was said: by value
    alone the second telling superseded the first, the very same words. Fails on the code that compared values only.
    A different statement of the slot still corrects it."""
    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_API_KEY = "http://llm.test/v1", "m", "k"
    settings.LLM_MAX_RETRIES = 0
    remark = "Ada is not sure whether the importer belongs in the web process."

    def said(text, value):
        return _llm_answer([{"kind": "fact", "text": text, "subject": "importer", "value": value,
                             "confidence": 0.9}], [])

    answers = [said(remark, "undecided"), said(remark, "web process"),
               said("Ada's importer runs in a background job.", "background job")]
    with respx.mock(assert_all_called=True) as mock:
        mock.post("http://llm.test/v1/chat/completions").mock(side_effect=answers)
        record_turns(alice, alice_user, [
            ("user", "I am not sure whether the importer belongs in the web process."),
            ("user", "Still not sure whether the importer belongs in the web process."),
            ("user", "Decided: the importer runs in a background job.")], extract=False)
        messages = source_of_all(alice)
        for m in messages[:2]:
            message_extract(tenant_id=m.tenant_id, message_id=m.pk)
        told = MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user, text=remark)
        assert [(m.status, m.reinforcement_count) for m in told] == [("active", 1)]
        message_extract(tenant_id=messages[2].tenant_id, message_id=messages[2].pk)
    texts = {m.text for m in active_statements(alice, alice_user)}
    assert "Ada's importer runs in a background job." in texts and remark not in texts


def test_the_same_statement_filed_under_a_slot_later_reinforces_its_first_telling(alice, alice_user, settings):
    """Said first with no slot, the same words said again and filed under a slot another memory holds: the first
    telling is reinforced, and the slot's memory, which the repeat says nothing against, stays. Fails on the code
    that compared the same words within the slot only (it superseded the slot's memory and stored the words twice)."""
    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_API_KEY = "http://llm.test/v1", "m", "k"
    settings.LLM_MAX_RETRIES = 0
    where = "Ada's import script lives in tools/import.py."
    remark = "Ada wrote a small script to check the due dates, and it found a few odd rows."
    answers = [_llm_answer([{"kind": "fact", "text": where, "subject": "script", "value": "tools/import.py",
                             "confidence": 0.9},
                            {"kind": "fact", "text": remark, "subject": "", "value": "", "confidence": 0.9}], []),
               _llm_answer([{"kind": "fact", "text": remark, "subject": "script", "value": "due dates",
                             "confidence": 0.9}], [])]
    with respx.mock(assert_all_called=True) as mock:
        mock.post("http://llm.test/v1/chat/completions").mock(side_effect=answers)
        record_turns(alice, alice_user, [
            ("user", "My import script lives in tools/import.py. I wrote a small script to check the due dates, and "
                     "it found a few odd rows."),
            ("user", "As I said, I wrote a small script to check the due dates, and it found a few odd rows.")],
            extract=False)
        for m in source_of_all(alice):
            message_extract(tenant_id=m.tenant_id, message_id=m.pk)
    told = MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user, text=remark)
    assert [(m.status, m.reinforcement_count) for m in told] == [("active", 1)]
    assert MemoryRecord.objects.unscoped().get(tenant=alice, user=alice_user, text=where).status == "active"


def source_of_all(tenant):
    from sessions.models import Message

    return list(Message.objects.unscoped().filter(tenant=tenant, role="user").order_by("seq"))


def test_part_of_a_statement_told_again_under_a_slot_reinforces_the_statement(alice, alice_user, settings):
    """In a later session the model filed part of an earlier statement under a slot that another memory holds (the
    product set's dump: "Priya would rather keep the code boring than clever." under "ledgerly"): the statement is
    reinforced, and the slot's memory, which the repeat says nothing against, stays. Fails on the code that took a
    slot's other value for a correction unless the repeat had the statement's very words."""
    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_API_KEY = "http://llm.test/v1", "m", "k"
    settings.LLM_MAX_RETRIES = 0
    first = ("Ada would rather keep the code boring than clever, since Ada is the only one maintaining it and reads "
             "it again months later.")
    ledger = "Ada's ledger app keeps the invoices of forty clients."
    part = "Ada would rather keep the code boring than clever."

    def told(text, subject="", value=""):
        return {"kind": "fact", "text": text, "subject": subject, "value": value, "confidence": 0.9}

    answers = [_llm_answer([told(first), told(ledger, "ledger", "invoices")], []),
               _llm_answer([told(part, "ledger", "code")], [])]
    with respx.mock(assert_all_called=True) as mock:
        mock.post("http://llm.test/v1/chat/completions").mock(side_effect=answers)
        record_turns(alice, alice_user, [
            ("user", "I'd rather keep the code boring than clever, since I'm the only one maintaining it and I read it "
                     "again months later. My ledger app keeps the invoices of forty clients."),
            ("user", "Like I said, I'd rather keep the code boring than clever.")], extract=False)
        for m in source_of_all(alice):
            message_extract(tenant_id=m.tenant_id, message_id=m.pk)
    stored = {m.text: m for m in MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user)
              .exclude(kind="event")}
    assert part not in stored, sorted(stored)
    assert (stored[first].status, stored[first].reinforcement_count) == ("active", 1)
    assert stored[ledger].status == "active"
    # The history says how alike the two tellings were, not that they were the same words.
    note = MemoryEvent.objects.for_tenant(alice).get(memory_id=stored[first].pk,
                                                      action=MemoryEvent.Action.REINFORCED).note
    assert note.startswith("similarity 0.9") and note != "similarity 1.000", note


@pytest.mark.parametrize("text, stored, same", [
    ("Ada would rather keep the code boring than clever.",
     "Ada would rather keep the code boring than clever; Ada is the only one maintaining it.", True),
    ("Ada has a standing desk.", "Ada wants a standing desk.", False),
    ("Ada's budget is $500.", "Ada's budget is $400 or less.", False),
    ("Ada would keep the code boring.", "Ada would not keep the code boring and clever.", False),
    ("Ada would not keep it boring.", "Ada would keep it boring, or not clever at all.", False),
])
def test_a_telling_says_no_more_only_in_the_statements_own_words(text, stored, same):
    from memory.extraction.verify import says_no_more

    assert says_no_more(text, stored) is same
