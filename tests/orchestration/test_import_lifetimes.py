"""Imported history keeps its dates as when things were said, but its lifetimes (TTL, decay) count from the import:
2024 history is still there a day after it arrives. An import says beforehand what the tenant's TTLs will do."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from infra import clock
from memory.lifecycle.decay import memories_decay
from memory.lifecycle.expire import memories_expire
from memory.lifecycle.forget import memories_forget
from memory.lifecycle.runs import job_run
from memory.models import MemoryRecord
from memory.outbox import outbox_apply
from orchestration.models import ImportJob
from sessions.models import Message

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 1, 15, 9, 0, tzinfo=timezone.utc)
PETS = ["a greyhound named Biscuit", "a tabby cat named Miso", "a parrot named Kiwi", "a tortoise named Shelly",
        "a beagle named Pepper", "a goldfish named Bubbles", "a rabbit named Clover", "a ferret named Ziggy"]


def history_2024() -> list[dict]:
    """One conversation a month, January to August 2024, each a user's statement and a reply."""
    return [{"id": f"c{n}", "title": f"chat {n}", "messages": [
        {"role": "user", "content": f"I adopted {pet} last week.", "created_at": f"2024-{n:02d}-10T10:00:00Z"},
        {"role": "assistant", "content": f"Congratulations on {pet.split(' named ')[1]}!",
         "created_at": f"2024-{n:02d}-10T10:00:05Z"}]} for n, pet in enumerate(PETS, start=1)]


@pytest.fixture
def at_now():
    clock.set_now(NOW)
    yield lambda moment: clock.set_now(moment)
    clock.set_now(None)


@pytest.fixture
def eager(settings):
    """The import, its backlog (bridges, extraction) and the outbox run in the request, as workers would."""
    settings.CELERY_TASK_ALWAYS_EAGER = True


def post_import(client, user, body, query="export_format=openai"):
    return client.post(f"/api/v1/users/{user.pk}/import?{query}", data=json.dumps(body).encode(),
                       content_type="application/json")


def run_lifecycle(tenant):
    for job, fn in (("expire", memories_expire), ("decay", memories_decay), ("forget", memories_forget)):
        cursor = None
        for _ in range(20):
            out = job_run(job=job, tenant=tenant, fn=fn, cursor=cursor)
            if not out.get("more"):
                break
            cursor = out["cursor"]
    outbox_apply()


def test_2024_history_is_active_and_searchable_a_day_after_its_import(alice, alice_client, alice_user, at_now,
                                                                      eager):
    r = post_import(alice_client, alice_user, history_2024())
    assert r.status_code == 202, r.content
    job = alice_client.get(r["Location"]).json()
    assert (job["status"], job["messages_created"]) == ("done", 16)
    outbox_apply()
    memories = MemoryRecord.objects.for_tenant(alice).filter(user=alice_user)
    assert memories.filter(text__contains="Biscuit").exists()
    importance = dict(memories.values_list("pk", "importance"))

    at_now(NOW + timedelta(days=1))
    run_lifecycle(alice)

    assert set(memories.values_list("pk", flat=True)) == set(importance)  # nothing forgotten
    assert set(memories.values_list("status", flat=True)) == {"active"}
    for m in memories:
        # Said in 2024, learned now: the event's TTL (365 days) runs from the import, decay has barely started.
        assert m.created_at.year == 2024
        assert m.expires_at is None or m.expires_at > NOW + timedelta(days=300)
        assert m.importance >= 0.9 * importance[m.pk]
    found = alice_client.get(f"/api/v1/users/{alice_user.pk}/memories/search?q=greyhound Biscuit&k=5").json()
    top = found["results"][0]
    assert "Biscuit" in top["text"]
    assert "10 January 2024" in top["provenance"]  # retrieval still dates it when it was said
    assert Message.objects.for_tenant(alice).get(external_id="c1:1").created_at.year == 2024
    assert job["lifetimes"] == {"counted_from": "learned", "expiring_at_once": {"event": 0, "goal": 0}}


def test_a_tenant_counting_from_the_said_date_is_told_before_the_import_and_must_accept(alice, alice_client,
                                                                                       alice_user, at_now, eager):
    alice.memory_lifetime_from = "said"
    alice.save()
    dry = post_import(alice_client, alice_user, history_2024(), query="export_format=openai&dry_run=true")
    assert dry.status_code == 200, dry.content
    forecast = dry.json()
    assert (forecast["messages_total"], forecast["sessions_total"]) == (16, 8)
    assert forecast["lifetimes"]["counted_from"] == "said"
    # Every extracted message is older than the event TTL (365 days); only the user's words can become goals.
    assert forecast["lifetimes"]["expiring_at_once"] == {"event": 16, "goal": 8}
    assert not ImportJob.objects.for_tenant(alice).exists() and not Message.objects.for_tenant(alice).exists()

    refused = post_import(alice_client, alice_user, history_2024())
    assert refused.status_code == 409, refused.content
    error = refused.json()["error"]
    assert error["code"] == "import_would_expire" and "accept_expiry" in error["message"]
    assert error["details"]["expiring_at_once"] == {"event": 16, "goal": 8}
    assert not ImportJob.objects.for_tenant(alice).exists()

    accepted = post_import(alice_client, alice_user, history_2024(), query="export_format=openai&accept_expiry=true")
    assert accepted.status_code == 202
    assert accepted.json()["lifetimes"]["expiring_at_once"] == {"event": 16, "goal": 8}
    # What the tenant chose, and was told: its lifetimes ran out long ago.
    run_lifecycle(alice)
    assert set(MemoryRecord.objects.for_tenant(alice).values_list("status", flat=True)) == {"expired"}


def test_recent_history_counted_from_the_said_date_needs_no_acceptance(alice, alice_client, alice_user, at_now,
                                                                       eager):
    alice.memory_lifetime_from = "said"
    alice.memory_ttl_days = {"goal": None}
    alice.save()
    export = [{"id": "r", "messages": [{"role": "user", "content": "I adopted a greyhound named Biscuit.",
                                        "created_at": "2025-12-20T10:00:00Z"}]}]
    r = post_import(alice_client, alice_user, export)
    assert r.status_code == 202, r.content
    assert r.json()["lifetimes"] == {"counted_from": "said", "expiring_at_once": {"event": 0}}
