"""Delivery against a real HTTP receiver: signed and verified, retried with the same idempotency key, permanent
failures not retried, the attempt log, and an endpoint disabled after repeated failed deliveries."""
from __future__ import annotations

import json
import random
import socket
from datetime import timedelta

import pytest

from infra import clock
from memory import actions
from webhooks.delivery import backoff_seconds, webhook_delivery_attempt
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from webhooks.services import webhook_endpoint_update, webhook_secret_rotate

pytestmark = pytest.mark.django_db


@pytest.fixture
def remember(alice, alice_user, django_capture_on_commit_callbacks):
    """Make one memory change and let its transaction's after-commit work run (the delivery is queued)."""
    def _remember(text="Ada lives in Porto."):
        with django_capture_on_commit_callbacks(execute=True):
            return actions.memory_create(tenant=alice, user=alice_user, kind="fact", text=text)
    return _remember


def _delivery(tenant) -> WebhookDelivery:
    return WebhookDelivery.objects.for_tenant(tenant).get()


def _attempts(delivery):
    return list(WebhookAttempt.objects.for_tenant(delivery.tenant_id).filter(delivery=delivery)
                .values_list("number", "status_code", "outcome"))


def test_a_delivery_reaches_the_receiver_signed_and_verified(alice, endpoint_for, receiver, task_queue, remember):
    endpoint = endpoint_for(alice)
    record = remember()
    assert task_queue.run() == ["delivered"]
    (request,) = receiver.requests
    assert request["verified"] == [endpoint.plain_secret] and request["path"] == "/hooks/continuum"
    assert request["headers"]["content-type"] == "application/json"
    delivery = _delivery(alice)
    assert request["headers"]["webhook-id"] == str(delivery.event_id)
    assert request["body"] == delivery.body.encode()
    payload = json.loads(request["body"])
    assert payload["type"] == "memory.created" and payload["data"]["memory_id"] == str(record.pk)
    assert delivery.state == "delivered" and delivery.attempts == 1 and delivery.last_status_code == 200
    assert _attempts(delivery) == [(1, 200, "success")]
    attempt = WebhookAttempt.objects.for_tenant(alice).get()
    assert attempt.duration_ms >= 0 and attempt.error == ""


def test_a_500_is_retried_after_backoff_with_the_same_idempotency_key(alice, endpoint_for, receiver, task_queue,
                                                                      remember):
    endpoint_for(alice)
    receiver.script = [500]
    remember()
    assert task_queue.run() == ["pending", "delivered"]
    first, second = receiver.requests
    assert first["headers"]["webhook-id"] == second["headers"]["webhook-id"]
    assert first["body"] == second["body"] and first["verified"] and second["verified"]
    assert 0.025 <= task_queue.countdowns[0] <= 0.05  # base 0.05 s, half of it random
    delivery = _delivery(alice)
    assert delivery.state == "delivered" and delivery.attempts == 2
    assert _attempts(delivery) == [(1, 500, "retryable"), (2, 200, "success")]
    assert WebhookAttempt.objects.for_tenant(alice).get(number=1).error == "HTTP 500 from target"


def test_the_log_keeps_the_status_and_our_reason_never_the_targets_body(alice, alice_client, endpoint_for, receiver,
                                                                        task_queue, remember, settings):
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    endpoint = endpoint_for(alice)
    receiver.script = [500]  # the receiver's body says "answered 500": what an internal service would reveal
    remember()
    assert task_queue.run() == ["failed"]
    delivery = _delivery(alice)
    assert (delivery.last_status_code, delivery.last_error) == (500, "HTTP 500 from target")
    shown = alice_client.get(f"/api/v1/webhooks/{endpoint.pk}/deliveries").content.decode()
    assert "HTTP 500 from target" in shown and "answered" not in shown


def test_a_malformed_answer_is_logged_without_the_bytes_it_quotes(alice, alice_user, task_queue, remember, settings):
    """A target answering garbage: the HTTP client's error names the bytes it could not parse."""
    import threading

    from webhooks.services import webhook_endpoint_create

    settings.WEBHOOK_MAX_ATTEMPTS = 1
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer():
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"INTERNAL-DB-PASSWORD=hunter2\r\n\r\n")
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    webhook_endpoint_create(tenant=alice, url=f"http://127.0.0.1:{server.getsockname()[1]}/hook")
    remember()
    assert task_queue.run() == ["failed"]
    server.close()
    error = _delivery(alice).last_error
    assert error.startswith("no valid answer from target") and "hunter2" not in error


@pytest.mark.parametrize("status", [408, 429, 502, 503])
def test_timeouts_overload_and_server_errors_are_retried(status, alice, endpoint_for, receiver, task_queue, remember):
    endpoint_for(alice)
    receiver.script = [status]
    remember()
    assert task_queue.run() == ["pending", "delivered"]


@pytest.mark.parametrize("status", [400, 401, 404, 410, 301])
def test_other_client_errors_and_redirects_are_permanent(status, alice, endpoint_for, receiver, task_queue, remember):
    endpoint_for(alice)
    receiver.script = [status]
    remember()
    assert task_queue.run() == ["failed"]
    assert len(receiver.requests) == 1
    delivery = _delivery(alice)
    assert delivery.state == "failed" and _attempts(delivery) == [(1, status, "permanent")]


def test_attempts_stop_at_the_maximum(alice, endpoint_for, receiver, task_queue, remember, settings):
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    endpoint = endpoint_for(alice)
    receiver.script = [500] * 10
    remember()
    assert task_queue.run() == ["pending", "pending", "failed"]
    assert len(receiver.requests) == 3 and len({r["headers"]["webhook-id"] for r in receiver.requests}) == 1
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 1 and endpoint.is_active


def test_a_receiver_slower_than_the_timeout_is_retried(alice, endpoint_for, receiver, task_queue, remember, settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.3
    settings.WEBHOOK_MAX_ATTEMPTS = 2
    endpoint_for(alice)
    receiver.delay = 1.0
    remember()
    assert task_queue.run() == ["pending", "failed"]
    errors = list(WebhookAttempt.objects.for_tenant(alice).values_list("outcome", "error", "status_code"))
    assert all(o == "retryable" and e.startswith("timeout") and code is None for o, e, code in errors)


def test_a_refused_connection_is_retried(alice, alice_user, receiver, task_queue, remember, settings):
    from webhooks.services import webhook_endpoint_create

    settings.WEBHOOK_MAX_ATTEMPTS = 2
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    webhook_endpoint_create(tenant=alice, url=f"http://127.0.0.1:{port}/hook")
    remember()
    assert task_queue.run() == ["pending", "failed"]
    assert all(o == "retryable" and e == "no valid answer from target (ConnectError)" for o, e in
               WebhookAttempt.objects.for_tenant(alice).values_list("outcome", "error"))


def test_an_endpoint_is_disabled_after_repeated_failed_deliveries(alice, alice_client, endpoint_for, receiver,
                                                                   task_queue, remember, settings):
    settings.WEBHOOK_MAX_ATTEMPTS = 2
    settings.WEBHOOK_DISABLE_AFTER_FAILURES = 3
    endpoint = endpoint_for(alice)
    receiver.script = [500] * 6
    for i in range(3):
        remember(f"Ada visited city number {i}.")
    assert task_queue.run().count("failed") == 3
    endpoint.refresh_from_db()
    assert not endpoint.is_active and endpoint.consecutive_failures == 3
    assert "3 failed deliveries" in endpoint.disabled_reason and endpoint.disabled_at is not None

    remember("Ada visited a fourth city.")  # a disabled endpoint is sent nothing
    assert task_queue.items == [] and len(receiver.requests) == 6

    response = alice_client.patch(f"/api/v1/webhooks/{endpoint.pk}", {"enabled": True}, format="json")
    assert response.status_code == 200 and response.json()["enabled"] is True
    assert response.json()["consecutive_failures"] == 0
    remember("Ada visited a fifth city.")
    assert task_queue.run() == ["delivered"]


def test_a_success_resets_the_failure_count(alice, endpoint_for, receiver, task_queue, remember, settings):
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    endpoint = endpoint_for(alice)
    receiver.script = [500]
    remember("one")
    remember("two")
    assert task_queue.run() == ["failed", "delivered"]
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 0 and endpoint.is_active


def test_a_delivery_run_twice_is_sent_once(alice, endpoint_for, receiver, task_queue, remember):
    endpoint_for(alice)
    remember()
    ((_, args),) = task_queue.items
    task_queue.items.append((0.0, args))  # the broker delivers the task twice
    assert sorted(task_queue.run()) == ["delivered", "skipped"]
    assert len(receiver.requests) == 1


def test_a_pending_delivery_of_an_endpoint_disabled_meanwhile_is_not_sent(alice, endpoint_for, receiver, task_queue,
                                                                          remember):
    endpoint = endpoint_for(alice)
    remember()
    webhook_endpoint_update(tenant=alice, endpoint_id=endpoint.pk, enabled=False)
    assert task_queue.run() == ["failed"]
    assert receiver.requests == [] and _delivery(alice).last_error == "the endpoint is disabled"


def test_the_sweep_queues_overdue_deliveries_only(alice, endpoint_for, receiver, task_queue, remember, monkeypatch):
    from webhooks.tasks import webhook_deliveries_sweep_task

    endpoint_for(alice)
    remember("one")
    remember("two")
    task_queue.items.clear()  # both tasks were lost with the broker
    lost, fresh = WebhookDelivery.objects.for_tenant(alice).order_by("id")
    WebhookDelivery.objects.for_tenant(alice).filter(pk=lost.pk).update(
        next_attempt_at=clock.now() - timedelta(minutes=5))
    assert webhook_deliveries_sweep_task.apply(throw=True).get() == 1
    assert [args for _, args in task_queue.items] == [(str(alice.pk), lost.pk)]
    assert task_queue.run() == ["delivered"] and len(receiver.requests) == 1


def test_a_rotated_secret_signs_beside_the_old_one_until_the_grace_ends(alice, endpoint_for, receiver, task_queue,
                                                                        remember):
    endpoint = endpoint_for(alice)
    old = endpoint.plain_secret
    _, new = webhook_secret_rotate(tenant=alice, endpoint_id=endpoint.pk)
    receiver.secrets.append(new)
    remember("during the grace period")
    task_queue.run()
    assert set(receiver.requests[-1]["verified"]) == {old, new}

    WebhookEndpoint.objects.for_tenant(alice).filter(pk=endpoint.pk).update(
        previous_secret_expires_at=clock.now() - timedelta(seconds=1))
    remember("after it")
    task_queue.run()
    assert receiver.requests[-1]["verified"] == [new]


def test_a_target_that_resolves_to_a_private_address_is_refused_before_any_request(alice, receiver, task_queue,
                                                                                    remember, settings):
    from webhooks.services import webhook_endpoint_create

    # Registered while private targets were allowed; by the time of the attempt they are not.
    webhook_endpoint_create(tenant=alice, url=receiver.url.replace("127.0.0.1", "localhost"))
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    remember()
    assert task_queue.run() == ["failed"]
    assert receiver.requests == [] and "non-public address" in _delivery(alice).last_error


def test_a_task_for_a_delivery_that_is_gone_does_nothing(alice):
    assert webhook_delivery_attempt(tenant_id=alice.pk, delivery_id=987654) == "skipped"


def test_backoff_doubles_up_to_the_cap_with_jitter(settings):
    settings.WEBHOOK_RETRY_BASE_SECONDS, settings.WEBHOOK_RETRY_MAX_SECONDS = 30, 3600
    rng = random.Random(7)
    waits = [backoff_seconds(n, rng=rng) for n in range(1, 11)]
    ceilings = [min(3600, 30 * 2 ** (n - 1)) for n in range(1, 11)]
    assert all(c / 2 <= w <= c for w, c in zip(waits, ceilings))
    assert max(waits) <= 3600 and waits[-1] >= 1800
    assert len({round(backoff_seconds(3), 6) for _ in range(20)}) > 1  # jittered, not fixed
