"""Retrieval on conversations unlike two friends' short turns: a long message whose one sentence answers, something
the assistant suggested that the user asks about later, and one topic spread over five sessions."""
from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.conf import settings

from infra.tokens import count_tokens
from memory.models import MemoryRecord
from memory.rendering import memories_block
from memory.retrieval import memory_retrieve
from orchestration.context import turn_context
from orchestration.sessions import session_close
from sessions.turn_reads import turns_around

from .memory_support import MAY_8, record_turns

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = "The staging database migration is scheduled for the ninth of March, right after the audit closes."


def long_status_update(words: int = 1500) -> str:
    """A project update of about `words` words, in paragraphs, that never mentions databases, staging or migrations
    except in ANSWER, placed two thirds of the way in."""
    rng = random.Random(7)
    teams = ["design", "mobile", "billing", "support", "research", "marketing", "legal", "platform", "sales"]
    things = ["onboarding flow", "pricing page", "release notes", "survey results", "hiring plan", "roadmap",
              "style guide", "customer interviews", "quarterly goals", "help centre articles", "partner contracts"]
    verbs = ["reviewed", "rewrote", "presented", "postponed", "shortened", "translated", "approved", "questioned"]
    outcomes = ["everyone agreed to revisit it next month", "the feedback was mostly positive",
                "two open questions remain for the steering group", "the deadline moved by a week",
                "nobody raised an objection", "it needs another round of edits before it ships"]
    sentences = []
    while sum(len(s.split()) for s in sentences) < words:
        sentences.append(f"The {rng.choice(teams)} team {rng.choice(verbs)} the {rng.choice(things)}, and "
                         f"{rng.choice(outcomes)}.")
    sentences.insert(len(sentences) * 2 // 3, ANSWER)
    paragraphs = [" ".join(sentences[i:i + 6]) for i in range(0, len(sentences), 6)]
    return "\n\n".join(paragraphs)


def test_a_long_message_is_stored_as_passages_and_its_answering_sentence_comes_back_within_a_small_budget(
        alice, alice_user):
    alice.memory_ttl_days = {"event": None}
    alice.save()
    text = long_status_update()
    assert len(text.split()) >= 1500 and count_tokens(text) > 1500
    _, messages = record_turns(alice, alice_user, [("user", text)])
    passages = list(MemoryRecord.objects.for_tenant(alice).filter(user=alice_user, kind="event"))
    # Every passage keeps the message's provenance and fits the embedder's window; together they hold the message.
    assert len(passages) >= 10
    assert all(p.source_message_id == messages[0].pk and p.session_id == messages[0].session_id for p in passages)
    assert all(count_tokens(p.text) <= settings.MEMORY_PASSAGE_MAX_TOKENS + 5 for p in passages)
    assert sorted(p.metadata["passage"] for p in passages) == list(range(len(passages)))
    assert sum(ANSWER in p.text for p in passages) == 1  # never cut mid-sentence

    found = memory_retrieve(tenant=alice, user=alice_user, query="When is the staging database migration?",
                            k=5, token_budget=300, neighbours=turns_around)
    assert found and ANSWER in found[0].text
    assert count_tokens(memories_block(found)) <= 300
    assert found[0].source_message_id == str(messages[0].pk)


SUGGESTION = ("For the invoices table I suggest a composite index on customer_id and issued_at, and storing "
              "amounts as integer cents rather than floats.")


def test_what_the_assistant_suggested_is_found_in_a_later_session_as_said_by_the_assistant(alice, alice_user):
    alice.memory_ttl_days = {"event": None}
    alice.save()
    first, _ = record_turns(alice, alice_user, [
        ("user", "I'm designing the billing schema this week. Any advice on the invoices table?"),
        ("assistant", SUGGESTION),
        ("user", "Thanks, that makes sense. I'll also need a table for refunds later."),
    ])
    session_close(tenant=alice, session_id=first.pk, reason="test")
    later, _ = record_turns(alice, alice_user, [("user", "Back on the billing work today.")],
                            start=MAY_8 + timedelta(days=3))

    question = "What did you suggest for the invoices table schema?"
    ranked = memory_retrieve(tenant=alice, user=alice_user, query=question, k=5)
    said = [m for m in ranked if m.source_type == "assistant"]
    assert said and "integer cents" in said[0].text
    assert said[0].provenance.startswith("the assistant said on 8 May 2023")
    # What a turn's model reads: the suggestion under the assistant's name (as its own record, or beside the
    # user's question it answered).
    ctx = turn_context(tenant=alice, session=later, new_input=question, rewrite_query=False)
    assert "assistant: For the invoices table I suggest" in ctx.messages[0]["content"]
    # Kept as what the assistant said, never as something the user prefers or stated.
    about_user = MemoryRecord.objects.for_tenant(alice).filter(user=alice_user, text__contains="integer cents")
    assert set(about_user.values_list("kind", "source_type")) == {("event", "assistant")}


def test_one_topic_over_five_sessions_comes_back_from_every_session(alice, alice_user):
    alice.memory_ttl_days = {"event": None}
    alice.save()
    sessions = [
        [("user", "I'm planning a vegetable garden this spring: tomatoes along the south fence."),
         ("user", "The garden beds need compost before I plant the tomatoes."),
         ("user", "For the vegetable garden I'm buying cherry tomato and basil seedlings."),
         ("user", "I sketched where each vegetable goes in the garden, tomatoes in the sunniest spot."),
         ("user", "My neighbour lent me stakes for the garden tomatoes."),
         ("user", "I watered the vegetable garden twice today since it was so dry.")],
        [("user", "Work was hectic, the quarterly report is due Friday."),
         ("user", "The tomatoes in my garden caught blight, so I pulled three plants.")],
        [("user", "We finally booked the flights to Lisbon for October."),
         ("user", "I rebuilt the vegetable garden as raised beds to stop the blight coming back.")],
        [("user", "My sister's wedding was lovely, we danced all night."),
         ("user", "The garden gave me four kilos of tomatoes this week, way more than we can eat.")],
        [("user", "I started a pottery class on Thursday evenings."),
         ("user", "I'm saving seeds from the best garden tomatoes to plant next year.")],
    ]
    for i, turns in enumerate(sessions):
        session, _ = record_turns(alice, alice_user, turns, start=MAY_8 + timedelta(days=30 * i))
        session_close(tenant=alice, session_id=session.pk, reason="test")

    # As a turn asks: the composer's number of memories, in a budget much smaller than the five sessions.
    found = memory_retrieve(tenant=alice, user=alice_user, query="How did my vegetable garden and the tomatoes go?",
                            k=settings.CONTINUUM_CONTEXT_MEMORY_K, token_budget=400, neighbours=turns_around)
    by_session = {m.session_number for m in found}
    assert by_session == {1, 2, 3, 4, 5}
    block = memories_block(found)
    # Oldest first, each under its date: the model can tell the story in order.
    dates = ["8 May 2023", "7 June 2023", "7 July 2023", "6 August 2023", "5 September 2023"]
    assert [block.index(d) for d in dates] == sorted(block.index(d) for d in dates)


def test_long_neighbouring_turns_are_left_out_so_the_budget_holds_more_hits(alice, alice_user):
    """A user's short questions over five sessions, each answered by a long reply about something else: the
    question's turns are the hits, and a reply cut to its opening would spend the budget on words that answer
    nothing."""
    alice.memory_ttl_days = {"event": None}
    alice.save()
    asks = ["Can the deploy pipeline run the database migrations before the canary step?",
            "The deploy pipeline failed again on the canary step, should I pin the runner image?",
            "I moved the deploy pipeline to the new runners; the canary step now takes nine minutes.",
            "Should the deploy pipeline page someone when the canary step is rolled back?",
            "I want the deploy pipeline to skip the canary step for documentation-only changes."]
    for i, ask in enumerate(asks):
        reply = long_status_update(words=300).replace(ANSWER, "")
        assert count_tokens(reply) > 300
        session, _ = record_turns(alice, alice_user, [("user", ask), ("assistant", reply)],
                                  start=MAY_8 + timedelta(days=7 * i))
        session_close(tenant=alice, session_id=session.pk, reason="test")

    question = "What did I say about the deploy pipeline's canary step?"
    found = memory_retrieve(tenant=alice, user=alice_user, query=question, k=settings.CONTINUUM_CONTEXT_MEMORY_K,
                            token_budget=400, neighbours=turns_around)
    assert {m.text.removeprefix("Ada: ") for m in found if m.source_type == "user_stated"} >= set(asks)
    assert count_tokens(memories_block(found)) <= 400
    assert all(not n.endswith("…") for m in found for n in m.neighbours)


LOG_LINE = "ERROR payments.reconcile: ledger mismatch for account 7731 (expected 120.00, found 112.50)"


def pasted_log(lines: int = 160) -> str:
    """A user's message with a long pasted log between two paragraphs of prose; one line of the log matters."""
    rng = random.Random(11)
    events = ["INFO http: GET /accounts/?page={n} 200", "DEBUG cache: miss for account:{n}",
              "INFO worker: task sync_accounts received for {n} ids", "WARNING import: duplicate iban in row {n}"]
    log = [f"10:{i // 60:02d}:{i % 60:02d} " + rng.choice(events).format(n=rng.randrange(1, 9999))
           for i in range(lines)]
    log.insert(lines * 2 // 3, f"10:59:59 {LOG_LINE}")
    prose = long_status_update(300).split("\n\n")
    return "\n\n".join([prose[0], "The log from last night:", "```text\n" + "\n".join(log) + "\n```", *prose[1:]])


def test_a_long_pasted_block_is_cut_at_line_edges_into_fenced_parts_within_the_window(alice, alice_user):
    alice.memory_ttl_days = {"event": None}
    alice.save()
    text = pasted_log()
    _, messages = record_turns(alice, alice_user, [("user", text)])
    passages = sorted(MemoryRecord.objects.for_tenant(alice).filter(user=alice_user, kind="event"),
                      key=lambda p: p.metadata["passage"])
    blocks = [p for p in passages if "```" in p.text]
    log = text.split("```text\n")[1].split("\n```")[0]
    # Every part of the log is within the embedder's window and fenced as the log is, whole lines only: together
    # every line once, in order (a part past the window would be searchable by its opening alone).
    assert len(blocks) > 2
    assert all(count_tokens(p.text) <= settings.MEMORY_PASSAGE_MAX_TOKENS + 5 for p in passages)  # "Ada: " too
    assert all(p.text.count("```text\n") == 1 and "\n```" in p.text.split("```text\n")[1] for p in blocks)
    lines = [line for p in blocks for line in p.text.split("```text\n")[1].split("\n```")[0].split("\n")]
    assert lines == log.split("\n")
    assert sum(LOG_LINE in p.text for p in blocks) == 1
    # The prose around it is split as any long message is.
    prose = [p for p in passages if p not in blocks]
    assert len(prose) >= 2
    assert all(p.source_message_id == messages[0].pk for p in passages)

    found = memory_retrieve(tenant=alice, user=alice_user, query="Which account had a ledger mismatch?",
                            k=5, token_budget=300, neighbours=turns_around)
    answering = next(p for p in blocks if LOG_LINE in p.text)
    shown = next(m for m in found if m.memory_id == str(answering.pk))
    # Shown as its best lines: the one that answers, not the log's opening.
    assert "ledger mismatch for account 7731" in shown.text and count_tokens(shown.text) < 100
    assert count_tokens(memories_block(found)) <= 300
