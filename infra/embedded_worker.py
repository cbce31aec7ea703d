"""Embedded topology: the Celery worker and beat run as threads of the web process.

A Qdrant Edge shard is locked to one process (its write-ahead log), so without QDRANT_URL the tasks that
write vectors must run where the shard is open. With a Qdrant server the same tasks run in separate
worker processes instead, and this module is not used.
"""
from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)
_started = threading.Event()


def start_embedded_worker() -> None:
    if _started.is_set():
        return
    _started.set()
    from celery.beat import EmbeddedService
    from celery.worker import WorkController

    from config.celery import app

    def run_worker():
        # Built inside its own thread: the solo pool announces worker_process_init when it is created, and Django's
        # Celery fixup then closes connections, which Django refuses in the server's event-loop thread.
        # The solo pool runs each task in the consumer's own thread. The threads pool, with late acks and a prefetch
        # of one, picked new tasks up only every few seconds (20 short tasks: 25 s against 0.2 s with solo).
        WorkController(
            app=app, hostname=f"embedded@{os.getpid()}", concurrency=1, pool_cls="solo",
            queues=["default", "llm", "maintenance"], without_heartbeat=True, without_mingle=True, without_gossip=True,
        ).start()

    threading.Thread(target=run_worker, name="celery-worker", daemon=True).start()
    beat = EmbeddedService(app, thread=True)
    beat.start()
    log.info("embedded Celery worker (solo pool) and beat started in process %d", os.getpid())
