"""The erasure receipt: erasing a user returns, per store, what was removed (database rows by table, vector points,
Redis keys, pending outbox writes, queued webhook payloads naming the user) and a re-check that finds nothing left;
another tenant's queued payloads stay."""
from __future__ import annotations

import pytest

from infra.redis_client import Keys, get_redis
from memory.actions import memory_create
from memory.models import VectorOutbox
from memory.sources import SourceMessage
from orchestration.erasure import user_erase
from orchestration.messages import messages_append
from sessions.services import NewMessage
from webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)


def _endpoint(tenant):
    return WebhookEndpoint.objects.create(tenant=tenant, url="http://127.0.0.1:9/hook", secret_sealed="unused",
                                          event_types=["memory.created", "user.erased"])


@pytest.fixture
def stored(alice, alice_user, alice_session, bob):
    """Alice's user in every store: messages and a buffer, memories with points, a pending vector write, queued
    webhook payloads; and a queued payload of Bob's that must survive."""
    from tenants.services import end_user_create

    _endpoint(alice)
    _endpoint(bob)
    messages = messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content="I live in Porto and work as a nurse."),
        NewMessage(role="assistant", content="Noted.")])
    source = SourceMessage(id=str(messages[0].pk), session_id=str(alice_session.pk), created_at=messages[0].created_at)
    memories = [memory_create(tenant=alice, user=alice_user, kind="fact", text=t, source=source,
                              session_id=alice_session.pk)
                for t in ("Ada lives in Porto.", "Ada works as a nurse.")]
    VectorOutbox.objects.create(tenant_id_value=alice.pk, memory_uuid=memories[0].pk, op="payload")
    outsider = end_user_create(tenant=bob, external_id="bob-user")
    memory_create(tenant=bob, user=outsider, kind="fact", text="Bo lives in Oslo.")
    return {"memories": memories, "messages": messages}


def test_erasing_a_user_returns_what_each_store_gave_up_and_a_recheck_that_finds_nothing(
        alice, alice_user, alice_session, alice_client, bob, stored):
    assert get_redis().exists(Keys.session_buffer(alice.pk, alice_user.pk, alice_session.pk))
    queued = WebhookDelivery.objects.for_tenant(alice).filter(state="pending", event_type="memory.created").count()
    assert queued == 2

    r = alice_client.post(f"/api/v1/users/{alice_user.pk}/erase")
    assert r.status_code == 200, r.content
    body = r.json()
    removed = body["removed"]
    assert removed["database"]["tenants.EndUser"] == 1
    assert removed["database"]["chat_sessions.Session"] == 1
    assert removed["database"]["chat_sessions.Message"] == 2
    assert removed["database"]["memory.MemoryRecord"] == 2
    assert removed["database"]["memory.MemoryEvent"] >= 2
    assert removed["vector_points"] == 2
    assert removed["redis_keys"] >= 1
    assert removed["outbox_pending"] == 1
    assert removed["webhook_payloads"] == queued
    assert body["remaining"] == {"database": {}, "vector_points": 0, "redis_keys": 0, "outbox_pending": 0,
                                 "webhook_payloads": 0}
    assert body["complete"] is True
    # The announcement of the erase is queued; Bob's payload is untouched.
    assert WebhookDelivery.objects.for_tenant(alice).filter(state="pending").values_list(
        "event_type", flat=True).get() == "user.erased"
    assert WebhookDelivery.objects.for_tenant(bob).filter(event_type="memory.created").count() == 1


def test_the_recheck_reports_what_a_store_kept(alice, alice_user, stored, monkeypatch):
    """A vector store that acknowledges the delete but keeps the points: the receipt says so instead of claiming
    success."""
    from infra.vector_store import get_vector_store

    store = get_vector_store()
    monkeypatch.setattr(type(store), "delete_scope", lambda self, scope: None)
    report = user_erase(tenant=alice, user=alice_user)
    assert report.remaining["vector_points"] == 2
    assert report.complete is False


def test_erasing_again_removes_nothing_and_still_finds_nothing(alice, alice_user, stored):
    user_erase(tenant=alice, user=alice_user)
    again = user_erase(tenant=alice, user_id=alice_user.pk)
    assert again.removed["database"] == {} and again.removed["vector_points"] == 0
    assert again.removed["webhook_payloads"] == 0 and again.complete is True
