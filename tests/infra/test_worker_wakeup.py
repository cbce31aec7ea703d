"""A threads-pool worker's event loop wakes often enough to acknowledge finished tasks (celery#6941)."""
from __future__ import annotations

from celery import signals
from celery.concurrency.solo import TaskPool as SoloPool
from celery.concurrency.thread import TaskPool as ThreadsPool
from kombu.asynchronous import Hub

from infra.worker_wakeup import WAKE_SECONDS


class Consumer:
    """The two attributes of a worker's consumer that the handler reads."""

    def __init__(self, pool, timer):
        self.pool, self.timer = pool, timer


def _consumer(pool):
    hub = Hub()
    return Consumer(pool, hub.timer), hub


def test_a_threads_pool_worker_loop_never_sleeps_longer_than_the_wake_interval():
    pool = ThreadsPool(limit=2)
    consumer, hub = _consumer(pool)
    try:
        # Idle, the loop would poll the broker for a second (the hub's default) before running a pool thread's ack.
        assert not hub.timer._queue
        signals.worker_ready.send(sender=consumer)  # what every worker sends once it consumes
        for _ in range(3):
            # fire_timers() returns how long the loop may now sleep in its poll.
            assert hub.fire_timers() <= WAKE_SECONDS
    finally:
        hub.close()
        pool.stop()


def test_pools_that_acknowledge_in_their_loop_get_no_timer():
    consumer, hub = _consumer(SoloPool(limit=1))
    try:
        signals.worker_ready.send(sender=consumer)
        assert not hub.timer._queue
    finally:
        hub.close()
