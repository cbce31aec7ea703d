"""Emission: every state change named in the issue writes its deliveries in its own transaction (the outbox),
queues them only after commit, and carries ids and provenance, the text only where the endpoint opted in."""
from __future__ import annotations

import json

import pytest
from django.db import transaction

from memory import actions
from memory.models import MemoryRecord
from memory.sources import SourceMessage
from orchestration.messages import messages_append
from orchestration.sessions import session_close, session_open
from sessions.services import NewMessage
from webhooks.events import webhook_event_emit
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_endpoint_create, webhook_endpoint_update

MESSAGE_TEXT = "I moved to Porto last spring and I prefer window seats."


def _deliveries(tenant, **filters):
    return list(WebhookDelivery.objects.for_tenant(tenant).filter(**filters).order_by("id"))


def _body(delivery) -> dict:
    return json.loads(delivery.body)


def _source_message(tenant, session):
    (message,) = messages_append(tenant=tenant, session_id=session.pk, enqueue_extraction=False,
                                 items=[NewMessage(role="user", content=MESSAGE_TEXT)])
    return SourceMessage(id=str(message.pk), session_id=str(session.pk), created_at=message.created_at,
                         content=message.content)


@pytest.fixture
def hook(alice, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    endpoint, _ = webhook_endpoint_create(tenant=alice, url="https://hooks.example.com/continuum")
    return endpoint


@pytest.mark.django_db
def test_a_memory_created_event_carries_ids_and_provenance_and_no_text(alice, alice_user, alice_session, hook,
                                                                        task_queue,
                                                                        django_capture_on_commit_callbacks):
    source = _source_message(alice, alice_session)
    with django_capture_on_commit_callbacks(execute=True):
        record = actions.memory_create(tenant=alice, user=alice_user, kind="preference",
                                       text="Ada prefers window seats.", source=source, confidence=0.9)
    (delivery,) = _deliveries(alice, event_type="memory.created")
    body = _body(delivery)
    assert body["id"] == str(delivery.event_id) and body["type"] == "memory.created"
    assert body["tenant_id"] == str(alice.pk)
    data = body["data"]
    assert data["memory_id"] == str(record.pk) and data["user_id"] == str(alice_user.pk)
    assert data["kind"] == "preference" and data["source_type"] == "user_stated" and data["status"] == "active"
    assert data["session_id"] == str(alice_session.pk) and data["source_message_id"] == source.id
    assert data["created_at"] and data["changed_at"] and data["action"] == "created"
    assert "text" not in data and "window" not in delivery.body and MESSAGE_TEXT not in delivery.body
    # Queued once the transaction committed, by id.
    assert [args for _, args in task_queue.items] == [(str(alice.pk), delivery.pk)]


@pytest.mark.django_db
def test_an_endpoint_that_opted_in_gets_the_text(alice, alice_user, hook):
    webhook_endpoint_update(tenant=alice, endpoint_id=hook.pk, include_content=True)
    record = actions.memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
    (delivery,) = _deliveries(alice, event_type="memory.created")
    assert _body(delivery)["data"]["text"] == record.text


@pytest.mark.django_db
def test_opted_in_content_still_has_its_secrets_cut_out(alice, hook):
    webhook_endpoint_update(tenant=alice, endpoint_id=hook.pk, include_content=True)
    with transaction.atomic():
        webhook_event_emit(tenant_id=alice.pk, event_type="bridge.written", data={"bridge_id": 1},
                           content={"text": "Goal: deploy with key sk-proj-Abcdefghijklmnop1234567890."})
    (delivery,) = _deliveries(alice)
    text = _body(delivery)["data"]["text"]
    assert "sk-proj" not in delivery.body and "[redacted]" in text and text.startswith("Goal: deploy")


@pytest.mark.django_db
def test_each_memory_change_maps_to_its_event_type(alice, alice_user, hook):
    record = actions.memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
    actions.memory_update_text(tenant=alice, memory_id=record.pk, text="Ada lives in Lisbon.", actor_type="staff")
    actions.memory_delete(tenant=alice, memory_id=record.pk, actor_type="end_user")
    actions.memory_restore(tenant=alice, memory_id=record.pk, actor_type="staff")
    newer = actions.memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Braga.")
    with transaction.atomic():
        old = MemoryRecord.objects.for_tenant(alice).select_for_update().get(pk=record.pk)
        actions.memory_supersede(old=old, new=newer, actor_type="system")
    got = [(_body(d)["data"]["memory_id"], d.event_type, _body(d)["data"]["action"]) for d in _deliveries(alice)]
    r, n = str(record.pk), str(newer.pk)
    assert got == [(r, "memory.created", "created"), (r, "memory.updated", "updated"),
                   (r, "memory.deleted", "deleted"), (r, "memory.updated", "restored"),
                   (n, "memory.created", "created"), (r, "memory.superseded", "superseded")]
    assert _body(_deliveries(alice)[-1])["data"]["superseded_by"] == n


@pytest.mark.django_db
def test_only_active_endpoints_subscribed_to_the_type_get_it(alice, alice_user, bob, hook):
    sessions_only, _ = webhook_endpoint_create(tenant=alice, url="https://a.example.com/h",
                                               event_types=["session.closed"])
    off, _ = webhook_endpoint_create(tenant=alice, url="https://b.example.com/h")
    webhook_endpoint_update(tenant=alice, endpoint_id=off.pk, enabled=False)
    bobs, _ = webhook_endpoint_create(tenant=bob, url="https://c.example.com/h")
    actions.memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
    assert [d.endpoint_id for d in _deliveries(alice)] == [hook.pk]
    assert not _deliveries(bob)


@pytest.mark.django_db
def test_one_event_to_two_endpoints_has_one_event_id(alice, alice_user, hook):
    webhook_endpoint_create(tenant=alice, url="https://a.example.com/h")
    actions.memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
    first, second = _deliveries(alice)
    assert first.endpoint_id != second.endpoint_id and first.event_id == second.event_id


@pytest.mark.django_db
def test_without_endpoints_nothing_is_written(alice, alice_user):
    actions.memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
    assert not _deliveries(alice)


@pytest.mark.django_db
def test_an_unknown_event_type_is_a_bug(alice):
    with pytest.raises(ValueError):
        webhook_event_emit(tenant_id=alice.pk, event_type="memory.exploded", data={})


@pytest.mark.django_db
def test_closing_a_session_writing_its_bridge_and_erasing_the_user_emit_once_each(alice, alice_user, alice_session,
                                                                                   hook, monkeypatch):
    from orchestration.erasure import user_erase
    from orchestration.sessions import session_finish
    from orchestration.tasks import message_extract_task

    monkeypatch.setattr(message_extract_task, "delay", lambda *args: None)  # extraction is not under test here

    _source_message(alice, alice_session)
    session_close(tenant=alice, session_id=alice_session.pk)
    session_close(tenant=alice, session_id=alice_session.pk)  # closing twice closes once
    session_finish(tenant_id=alice.pk, session_id=alice_session.pk)
    session_finish(tenant_id=alice.pk, session_id=alice_session.pk)  # the bridge exists: nothing new
    (closed,) = _deliveries(alice, event_type="session.closed")
    data = _body(closed)["data"]
    assert data["session_id"] == str(alice_session.pk) and data["user_id"] == str(alice_user.pk)
    assert data["close_reason"] == "api" and data["closed_at"] and data["message_count"] == 1
    (bridge,) = _deliveries(alice, event_type="bridge.written")
    assert _body(bridge)["data"]["session_id"] == str(alice_session.pk)
    assert "text" not in _body(bridge)["data"] and "Porto" not in bridge.body

    user_erase(tenant=alice, user=alice_user)
    user_erase(tenant=alice, user_id=alice_user.pk)  # already gone: nothing to announce
    (erased,) = _deliveries(alice, event_type="user.erased")
    assert _body(erased)["data"]["user_id"] == str(alice_user.pk)
    # The tenant's own id for the user (often an email) is content: this endpoint did not opt in.
    assert "external_id" not in _body(erased)["data"] and "alice-user-1" not in erased.body


@pytest.mark.django_db
def test_user_erased_carries_the_external_id_only_to_an_endpoint_that_opted_in(alice, hook):
    from orchestration.erasure import user_erase
    from tenants.services import end_user_create

    opted, _ = webhook_endpoint_create(tenant=alice, url="https://hooks.example.com/with-content",
                                       include_content=True)
    user = end_user_create(tenant=alice, external_id="ada@example.com")
    user_erase(tenant=alice, user=user)
    bodies = {d.endpoint_id: _body(d)["data"] for d in _deliveries(alice, event_type="user.erased")}
    assert bodies[hook.pk] == {"user_id": str(user.pk), "erased_at": bodies[hook.pk]["erased_at"], "memories": 0,
                               "sessions": 0}
    assert bodies[opted.pk]["external_id"] == "ada@example.com"


@pytest.mark.django_db
def test_a_session_closed_by_a_new_open_or_the_idle_job_is_announced(alice, alice_user, alice_session, hook):
    from datetime import timedelta

    from infra import clock
    from orchestration.sessions import sessions_close_idle

    second, _ = session_open(tenant=alice, user=alice_user)  # the tenant's policy closes the first
    sessions_close_idle(now=clock.now() + timedelta(hours=2))
    got = {_body(d)["data"]["session_id"]: _body(d)["data"]["close_reason"]
           for d in _deliveries(alice, event_type="session.closed")}
    assert got == {str(alice_session.pk): "superseded", str(second.pk): "idle"}


@pytest.mark.django_db
def test_the_forget_job_announces_the_hard_delete(alice, alice_user, hook, settings):
    from datetime import timedelta

    from infra import clock
    from memory.lifecycle.forget import memories_forget

    record = actions.memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
    actions.memory_delete(tenant=alice, memory_id=record.pk, actor_type="end_user")
    MemoryRecord.objects.for_tenant(alice).filter(pk=record.pk).update(
        status_changed_at=clock.now() - timedelta(days=settings.MEMORY_FORGET_GRACE_DAYS + 1))
    memories_forget(tenant=alice, limit=10)
    last = _deliveries(alice)[-1]
    assert last.event_type == "memory.deleted" and _body(last)["data"]["action"] == "forgotten"
    assert _body(last)["data"]["memory_id"] == str(record.pk)


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_change_sends_nothing(alice, alice_user, endpoint_for, receiver, task_queue):
    endpoint_for(alice)
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            actions.memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
            assert len(_deliveries(alice)) == 1  # written beside the change, inside its transaction
            raise RuntimeError("the request failed after the write")
    assert not MemoryRecord.objects.for_tenant(alice).exists()
    assert not _deliveries(alice) and task_queue.items == []
    task_queue.run()
    assert receiver.requests == []

    actions.memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada lives in Porto.")
    assert task_queue.run() == ["delivered"] and len(receiver.requests) == 1


@pytest.mark.django_db
def test_a_batch_of_events_reads_the_endpoints_once(alice, hook):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from webhooks.events import Event, webhook_events_emit

    webhook_endpoint_create(tenant=alice, url="https://a.example.com/h", event_types=["memory.deleted"])
    events = [Event("memory.deleted", {"memory_id": i}) for i in range(3)] + [Event("user.erased", {"user_id": 1})]
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        webhook_events_emit(tenant_id=alice.pk, events=events)
    reads = [q for q in queries.captured_queries if q["sql"].startswith("SELECT") and "webhookendpoint" in q["sql"]]
    assert len(reads) == 1
    assert sorted(d.event_type for d in _deliveries(alice)) == ["memory.deleted"] * 6 + ["user.erased"]
