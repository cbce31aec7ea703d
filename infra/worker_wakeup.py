"""Keep Celery's threads pool from sitting on finished tasks.

A task run by the threads pool finishes on a pool thread, which hands its acknowledgement to the consumer's event
loop; that loop sleeps in its poll until the broker sends something or a timer is due, a second or more when idle.
With late acks and a prefetch of one per thread, the finished task's slot stays taken until then (celery#6941):
40 tasks of 0.2 s on 8 threads took 26 s, longer than one solo consumer (8 s). A no-op timer every 20 ms bounds
the poll, and the same 40 tasks took 1.25 s. Other pools acknowledge in the loop itself and get no timer.
"""
from __future__ import annotations

from celery import signals

WAKE_SECONDS = 0.02


def _noop() -> None:
    pass


def threads_pool_wake(consumer) -> bool:
    """Add the timer when `consumer` runs the threads pool; returns whether it did."""
    from celery.concurrency.thread import TaskPool

    if not isinstance(getattr(consumer, "pool", None), TaskPool):
        return False
    consumer.timer.call_repeatedly(WAKE_SECONDS, _noop)
    return True


@signals.worker_ready.connect(weak=False)
def _on_worker_ready(sender=None, **kwargs) -> None:
    if sender is not None:
        threads_pool_wake(sender)
