"""Project facts read by the rules (memory/extraction/project_facts.py): versions, deadlines, ports and chosen tools as
slots, from the user's stated sentences only; a later value of a slot supersedes the earlier one."""
from __future__ import annotations

from datetime import date, timedelta

import pytest

from memory.extraction.rules import rules_extract
from memory.models import MemoryRecord

from .memory_support import MAY_8, record_turns


def slots(text: str, who: str = "Nadia") -> dict[str, str]:
    """The project slots the rules fill from a user's message: subject -> value."""
    kinds = ("version:", "deadline:", "port:", "uses:")
    found = rules_extract(text, who=who, with_project_facts=True)
    return {c.subject: c.value for c in found if c.subject.startswith(kinds)}


def test_a_stated_version_of_a_named_tool_is_a_fact_in_its_own_slot():
    found = [c for c in rules_extract("Our billing service runs on Django 4.2.7 and Celery v5.3.", who="Nadia",
                                  with_project_facts=True)
             if c.subject.startswith("version:")]
    assert {c.subject: c.value for c in found} == {"version: django": "4.2.7", "version: celery": "5.3"}
    assert "Nadia's project uses Django 4.2.7." in [c.text for c in found]


def test_an_upgrade_takes_the_same_slot_as_the_version_it_replaces():
    before = slots("I'm building the inventory tool with FastAPI 0.95.2.")
    after = slots("Last night I upgraded FastAPI to 0.110.0 for the lifespan events.")
    assert before == {"version: fastapi": "0.95.2"} and after == {"version: fastapi": "0.110.0"}


def test_a_version_turned_away_from_or_only_considered_is_not_written():
    assert slots("We migrated from Angular 12.1 to Vue 3.4 in March.") == {"version: vue": "3.4"}
    assert slots("I'm thinking about using Postgres 16.1 for the archive.") == {}
    assert slots("We are disabling TLS 1.1 on the gateway.") == {}


def test_a_deadline_of_a_named_piece_of_work_is_a_fact_dated_by_its_own_date():
    found = [c for c in rules_extract("Our beta release is scheduled for October 3, and the office moves next week.",
                                      who="Nadia", reference=date(2024, 9, 2), with_project_facts=True)
             if c.subject.startswith("deadline:")]
    assert [(c.subject, c.value) for c in found] == [("deadline: beta release", "October 3")]
    assert [d["date"] for d in found[0].metadata["dates"]] == ["2024-10-03"]


def test_a_moved_deadline_takes_the_same_slot():
    first = slots("The deadline for our checkout redesign is set for June 12.")
    second = slots("Heads up: the deadline for the checkout redesign has been moved to June 26, can you re-plan "
                   "the tasks?")
    assert first == {"deadline: checkout redesign": "June 12"}
    assert second == {"deadline: checkout redesign": "June 26"}


def test_the_port_of_a_named_service_is_a_fact():
    assert slots("My Rails api is running on port 4100 behind Caddy.") == {"port: rails api": "4100"}


def test_a_port_with_no_service_named_writes_nothing():
    assert slots("Port 4100 was taken, so my Rails api is on port 4300.") == {"port: rails api": "4300"}
    assert slots("Everything listens on port 9000 now.") == {}


def test_a_tool_chosen_for_a_named_role_is_a_fact():
    assert slots("We're going with Meilisearch for the product search.") == {"uses: product search": "Meilisearch"}
    assert slots("I decided to use Pulumi for infrastructure, Grafana for dashboards, and Loki for log storage.") \
        == {"uses: infrastructure": "Pulumi", "uses: dashboards": "Grafana", "uses: log storage": "Loki"}


def test_a_choice_with_no_role_named_writes_nothing():
    assert slots("I've decided to use Meilisearch.") == {}
    assert slots("I've decided to use Meilisearch for search.") == {"uses: search": "Meilisearch"}


# (a statement, the same words asked, supposed or hedged)
UNSTATED = [
    ("I moved the worker to Python 3.12.", "Should I move the worker to Python 3.12?"),
    ("Our beta release is scheduled for October 3.", "Is our beta release scheduled for October 3?"),
    ("Last night I upgraded FastAPI to 0.110.0.", "If I upgraded FastAPI to 0.110.0, would the lifespan events work?"),
    ("We'll go with Meilisearch for the product search.", "Maybe we'll go with Meilisearch for the product search."),
    ("My Rails api is running on port 4100.", "What if my Rails api is running on port 4100?"),
]


@pytest.mark.parametrize(("stated", "unstated"), UNSTATED,
                         ids=["question", "question-deadline", "condition", "hedge", "what-if"])
def test_a_question_a_condition_or_a_hedge_writes_nothing(stated, unstated):
    assert slots(stated) and slots(unstated) == {}


def test_code_pasted_in_a_message_states_nothing():
    said = "my api is running on port 4100, using Django 4.2.7"
    assert slots(f"Here is how it starts: {said}.") == {"port: api": "4100", "version: django": "4.2.7"}
    assert slots(f"Here is the log:\n```\n{said}\n```\nIt fails at startup.") == {}


@pytest.mark.django_db(transaction=True)
def test_the_assistants_message_writes_no_project_fact(alice, alice_user, settings):
    settings.MEMORY_PROJECT_FACTS = True
    record_turns(alice, alice_user, [("assistant", "I'm using Django 4.2.7 and my api is running on port 4100."),
                                     ("user", "We'll go with Meilisearch for the product search.")])
    facts = MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user, kind="fact")
    assert list(facts.values_list("subject", flat=True)) == ["uses: product search"]


@pytest.mark.django_db(transaction=True)
def test_a_later_version_of_the_same_tool_supersedes_the_earlier_one(alice, alice_user, settings):
    settings.MEMORY_PROJECT_FACTS = True
    record_turns(alice, alice_user, [("user", "I'm building the inventory tool with FastAPI 0.95.2.")])
    old = MemoryRecord.objects.unscoped().get(tenant=alice, user=alice_user, subject="version: fastapi")
    record_turns(alice, alice_user, [("user", "Last night I upgraded FastAPI to 0.110.0 for the lifespan events.")],
                 start=MAY_8 + timedelta(days=2))
    new = MemoryRecord.objects.unscoped().get(tenant=alice, user=alice_user, subject="version: fastapi",
                                              status="active")
    old.refresh_from_db()
    assert (old.value, new.value) == ("0.95.2", "0.110.0")
    assert old.status == "superseded" and old.superseded_by_id == new.pk


@pytest.mark.django_db(transaction=True)
def test_switched_off_the_rules_write_no_project_fact(alice, alice_user, settings):
    settings.MEMORY_PROJECT_FACTS = False
    record_turns(alice, alice_user, [("user", "I'm building the inventory tool with FastAPI 0.95.2.")])
    assert not MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user, subject__startswith="version:")
