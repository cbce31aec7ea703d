"""Sending one delivery: claim it, sign it, POST it with a bounded timeout, log the attempt, then finish it,
schedule the next attempt, or give up (and disable an endpoint whose deliveries keep failing).

2xx is success. 5xx, 408, 429, timeouts and connection errors are retried with exponential backoff, jitter and a
cap, up to WEBHOOK_MAX_ATTEMPTS; any other status (4xx, and 3xx: redirects are not followed) is permanent.
Delivery is at least once: a receiver that answers after the timeout, or a worker that dies after the request,
leads to the same event again with the same webhook-id.
"""
from __future__ import annotations

import functools
import logging
import random
import time
from dataclasses import dataclass
from datetime import timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import F

from infra import clock
from infra.encryption import unseal
from infra.task_queue import task_enqueue

from .models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from .signing import webhook_headers
from .targets import TargetRefused, TargetUnresolved, webhook_target_check

log = logging.getLogger(__name__)

Outcome = WebhookAttempt.Outcome
State = WebhookDelivery.State
RETRYABLE_STATUSES = frozenset({408, 429})
USER_AGENT = "Continuum-Webhooks/1"
ERROR_BODY_CHARS = 500  # of a failed response's body, kept in the log; the rest is never read


@dataclass
class AttemptResult:
    outcome: str
    status_code: int | None = None
    error: str = ""
    retry_after: float | None = None
    duration_ms: int = 0


def backoff_seconds(attempt: int, *, rng: random.Random | None = None) -> float:
    """The wait after failed attempt number `attempt` (1, 2, …): base × 2^(attempt-1), capped, with equal jitter
    (half fixed, half random) so endpoints that failed together do not retry together."""
    ceiling = min(settings.WEBHOOK_RETRY_MAX_SECONDS, settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** (attempt - 1))
    return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


def endpoint_signing_secrets(endpoint: WebhookEndpoint) -> list[str]:
    """The current secret, and the previous one while its grace period after a rotation lasts."""
    found = [unseal(endpoint.secret_sealed)]
    if (endpoint.previous_secret_sealed and endpoint.previous_secret_expires_at
            and endpoint.previous_secret_expires_at > clock.now()):
        found.append(unseal(endpoint.previous_secret_sealed))
    return found


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None  # an HTTP date, or nothing: the backoff decides


def _classify(status: int) -> str:
    if 200 <= status < 300:
        return Outcome.SUCCESS
    if status >= 500 or status in RETRYABLE_STATUSES:
        return Outcome.RETRYABLE
    return Outcome.PERMANENT


@functools.lru_cache(maxsize=1)
def _tls_context():
    # Loading the CA bundle costs ~90 ms; a client per attempt (no pooled connection outlives it) shares this one.
    return httpx.create_ssl_context()


def _post(delivery: WebhookDelivery, endpoint: WebhookEndpoint) -> AttemptResult:
    body = delivery.body.encode()
    headers = {"content-type": "application/json", "user-agent": USER_AGENT,
               **webhook_headers(signing_secrets=endpoint_signing_secrets(endpoint), msg_id=str(delivery.event_id),
                                 timestamp=int(clock.now().timestamp()), body=body)}
    started = time.monotonic()
    try:
        webhook_target_check(endpoint.url)
        with httpx.Client(timeout=settings.WEBHOOK_TIMEOUT_SECONDS, follow_redirects=False,
                          verify=_tls_context()) as client:
            with client.stream("POST", endpoint.url, content=body, headers=headers) as response:
                outcome = _classify(response.status_code)
                error = ""
                if outcome != Outcome.SUCCESS:
                    head = b""
                    for chunk in response.iter_bytes():
                        head += chunk
                        # A receiver dripping its error page byte by byte does not hold the worker longer.
                        late = time.monotonic() - started > settings.WEBHOOK_TIMEOUT_SECONDS
                        if len(head) >= ERROR_BODY_CHARS or late:
                            break
                    error = f"HTTP {response.status_code}: {head[:ERROR_BODY_CHARS].decode(errors='replace')}"
                return AttemptResult(outcome, response.status_code, error, _retry_after(response),
                                     int((time.monotonic() - started) * 1000))
    except TargetRefused as exc:
        return AttemptResult(Outcome.PERMANENT, error=f"refused: {exc}")
    except TargetUnresolved as exc:
        return AttemptResult(Outcome.RETRYABLE, error=str(exc), duration_ms=int((time.monotonic() - started) * 1000))
    except httpx.TimeoutException as exc:
        return AttemptResult(Outcome.RETRYABLE, error=f"timeout: {exc.__class__.__name__}",
                             duration_ms=int((time.monotonic() - started) * 1000))
    except httpx.HTTPError as exc:  # connection refused or reset, TLS, protocol errors
        return AttemptResult(Outcome.RETRYABLE, error=f"{exc.__class__.__name__}: {exc}"[:2000],
                             duration_ms=int((time.monotonic() - started) * 1000))


def _claim(tenant_id, delivery_id) -> WebhookDelivery | None:
    """Take the delivery for one attempt: a conditional UPDATE that only one worker wins. It pushes the next
    attempt past this one's lease, so a worker that dies mid-attempt leaves it to the sweep, not to nobody."""
    now = clock.now()
    lease = timedelta(seconds=settings.WEBHOOK_TIMEOUT_SECONDS * 3 + 60)
    deliveries = WebhookDelivery.objects.for_tenant(tenant_id)
    if not deliveries.filter(pk=delivery_id, state=State.PENDING, next_attempt_at__lte=now).update(
            attempts=F("attempts") + 1, next_attempt_at=now + lease):
        return None
    return deliveries.select_related("endpoint").get(pk=delivery_id)


def _enqueue_retry(tenant_id: str, delivery_id: int, countdown: float) -> None:
    task_enqueue("webhooks.tasks.webhook_deliver_task", tenant_id, delivery_id, countdown=countdown)


def _record(delivery: WebhookDelivery, endpoint: WebhookEndpoint, result: AttemptResult, started_at) -> str:
    """Log the attempt and move the delivery on, in one transaction. Returns the delivery's state."""
    now = clock.now()
    deliveries = WebhookDelivery.objects.for_tenant(delivery.tenant_id).filter(pk=delivery.pk)
    endpoints = WebhookEndpoint.objects.for_tenant(delivery.tenant_id).filter(pk=endpoint.pk)
    with transaction.atomic():
        WebhookAttempt.objects.create(tenant_id=delivery.tenant_id, delivery=delivery, number=delivery.attempts,
                                      started_at=started_at, duration_ms=result.duration_ms,
                                      status_code=result.status_code, outcome=result.outcome,
                                      error=result.error[:2000])
        last = {"last_status_code": result.status_code, "last_error": result.error[:2000]}
        if result.outcome == Outcome.SUCCESS:
            deliveries.update(state=State.DELIVERED, finished_at=now, next_attempt_at=None, **last)
            endpoints.filter(consecutive_failures__gt=0).update(consecutive_failures=0)
            return State.DELIVERED
        if result.outcome == Outcome.RETRYABLE and delivery.attempts < settings.WEBHOOK_MAX_ATTEMPTS:
            wait = backoff_seconds(delivery.attempts)
            if result.retry_after is not None:  # the receiver asked for a pause: honoured, within the cap
                wait = max(wait, min(result.retry_after, settings.WEBHOOK_RETRY_MAX_SECONDS))
            deliveries.update(state=State.PENDING, next_attempt_at=now + timedelta(seconds=wait), **last)
            transaction.on_commit(functools.partial(_enqueue_retry, str(delivery.tenant_id), delivery.pk, wait),
                                  robust=True)
            return State.PENDING
        deliveries.update(state=State.FAILED, finished_at=now, next_attempt_at=None, **last)
        endpoints.update(consecutive_failures=F("consecutive_failures") + 1)
        limit = settings.WEBHOOK_DISABLE_AFTER_FAILURES
        if limit and endpoints.filter(is_active=True, consecutive_failures__gte=limit).update(
                is_active=False, disabled_at=now,
                disabled_reason=f"disabled after {limit} failed deliveries in a row"):
            log.warning("webhook endpoint %s disabled after %d failed deliveries", endpoint.pk, limit)
        return State.FAILED


def webhook_delivery_attempt(*, tenant_id, delivery_id) -> str:
    """One attempt of one delivery, if it is due. Returns the delivery's state afterwards, or "skipped" when it
    was not due (already delivered, given up, gone, or another worker holds it). Safe to run any number of times."""
    delivery = _claim(tenant_id, delivery_id)
    if delivery is None:
        return "skipped"
    endpoint = delivery.endpoint
    if not endpoint.is_active:
        WebhookDelivery.objects.for_tenant(tenant_id).filter(pk=delivery.pk).update(
            state=State.FAILED, finished_at=clock.now(), next_attempt_at=None, attempts=F("attempts") - 1,
            last_error="the endpoint is disabled")
        return State.FAILED
    started_at = clock.now()
    result = _post(delivery, endpoint)
    state = _record(delivery, endpoint, result, started_at)
    log.info("webhook %s %s to endpoint %s: attempt %d %s (%s)", delivery.event_type, delivery.event_id,
             endpoint.pk, delivery.attempts, result.outcome, result.status_code or result.error[:80])
    return state


def webhook_deliveries_due(*, limit: int, grace_seconds: int = 60) -> list[tuple[str, int]]:
    """(tenant id, delivery id) of pending deliveries overdue by more than the grace: their queued task was lost
    (a broker restart, a dead worker's lease run out). Spans tenants: one sweep serves them all."""
    cutoff = clock.now() - timedelta(seconds=grace_seconds)
    return [(str(t), pk) for pk, t in WebhookDelivery.objects.unscoped()
            .filter(state=State.PENDING, next_attempt_at__lte=cutoff).order_by("next_attempt_at")
            .values_list("pk", "tenant_id")[:limit]]
