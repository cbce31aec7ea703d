"""A correction of low confidence waits for a reviewer when the tenant asks (Tenant.review_supersede_below): the
value in use stays in use until a reviewer approves the new one, and the queue shows what it would replace."""
from __future__ import annotations

import pytest

from memory import actions
from memory.models import MemoryEvent, MemoryRecord
from memory.retrieval import memory_retrieve
from memory.review_queue import review_pending

pytestmark = pytest.mark.django_db(transaction=True)


def _say(tenant, user, city: str, confidence: float):
    return actions.memory_remember(tenant=tenant, user=user, kind="fact", text=f"I live in {city}.",
                                   subject="home city", value=city, confidence=confidence)


@pytest.fixture
def berlin(alice, alice_user):
    alice.review_supersede_below = 0.7
    alice.save(update_fields=["review_supersede_below"])
    record, outcome = _say(alice, alice_user, "Berlin", 0.9)
    assert outcome == "created"
    return record


def test_a_doubtful_correction_is_held_and_the_old_value_stays_in_use(alice, alice_user, berlin):
    held, outcome = _say(alice, alice_user, "Lisbon", 0.5)
    assert outcome == "held_for_review"
    assert held.status == "pending_review"
    berlin.refresh_from_db()
    assert berlin.status == "active" and berlin.superseded_by_id is None
    found = [m.text for m in memory_retrieve(tenant=alice, user=alice_user, query="Where do I live?", k=5,
                                             rewrite=False)]
    assert any("Berlin" in t for t in found) and not any("Lisbon" in t for t in found)
    [queued] = review_pending(tenant=alice)
    assert queued.pk == held.pk and "Berlin" in queued.replaces_text


def test_approving_it_supersedes_the_old_value_and_rejecting_it_keeps_it(alice, alice_user, berlin):
    held, _ = _say(alice, alice_user, "Lisbon", 0.5)
    actions.memory_approve(tenant=alice, memory=held, actor_type="staff", actor_id="reviewer")
    berlin.refresh_from_db()
    assert (berlin.status, berlin.superseded_by_id) == ("superseded", held.pk)
    assert berlin.valid_to is not None
    assert MemoryEvent.objects.for_tenant(alice).filter(memory_uuid=berlin.pk, action="superseded",
                                                        actor_id="reviewer").exists()

    doubtful, _ = _say(alice, alice_user, "Porto", 0.4)
    assert doubtful.status == "pending_review"
    actions.memory_reject(tenant=alice, memory=doubtful, actor_type="staff", actor_id="reviewer")
    current = MemoryRecord.objects.for_tenant(alice).get(pk=held.pk)
    assert current.status == "active"


def test_a_confident_correction_and_a_tenant_that_does_not_ask_supersede_at_once(alice, alice_user, berlin):
    newer, outcome = _say(alice, alice_user, "Lisbon", 0.9)
    assert (outcome, newer.status) == ("superseded", "active")
    alice.review_supersede_below = 0.0
    alice.save(update_fields=["review_supersede_below"])
    latest, outcome = _say(alice, alice_user, "Porto", 0.3)
    assert (outcome, latest.status) == ("superseded", "active")
    newer.refresh_from_db()
    assert newer.status == "superseded"


def test_the_review_queue_shows_what_a_held_correction_would_replace(alice, alice_user, berlin, admin_client):
    _say(alice, alice_user, "Lisbon", 0.5)
    page = admin_client.get("/admin/memory/memoryreview/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "would replace" in html.lower() and "Berlin" in html and "Lisbon" in html
    assert "Holding corrections of low confidence" in html
