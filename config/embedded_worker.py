"""Embedded topology: the Celery worker and beat run as threads of the web process.

A Qdrant Edge shard is locked to one process (its write-ahead log), so without QDRANT_URL the tasks that
write vectors must run where the shard is open. With a Qdrant server the same tasks run in separate
worker processes instead, and this module is not used.
"""
from __future__ import annotations

import logging
import os
import threading

from django.conf import settings

log = logging.getLogger(__name__)
_started = threading.Event()


def start_embedded_worker() -> None:
    if _started.is_set():
        return
    _started.set()
    from celery import signals
    from celery.beat import EmbeddedService
    from celery.worker import WorkController

    from config.celery import app

    class EmbeddedWorkController(WorkController):
        def on_consumer_ready(self, consumer):
            # The command-line worker announces this; the bare controller does not, and infra/worker_wakeup.py
            # listens for it.
            signals.worker_ready.send(sender=consumer)

    concurrency = settings.EMBEDDED_WORKER_CONCURRENCY

    def run_worker():
        # Built inside its own thread: creating a pool announces worker_process_init, and Django's Celery fixup then
        # closes connections, which Django refuses in the server's event-loop thread.
        # Tasks run on a pool of threads: most of an extraction is waiting for the model (two calls per user
        # message), and one task at a time lets extraction fall behind a busy conversation for good (bench/load.py
        # reports the lag). infra/worker_wakeup.py keeps the pool's finished tasks from holding their slots.
        EmbeddedWorkController(
            app=app, hostname=f"embedded@{os.getpid()}", concurrency=concurrency,
            pool_cls="threads" if concurrency > 1 else "solo",
            queues=["default", "llm", "maintenance", "bulk"],
            without_heartbeat=True, without_mingle=True, without_gossip=True,
        ).start()

    threading.Thread(target=run_worker, name="celery-worker", daemon=True).start()
    beat = EmbeddedService(app, thread=True)
    beat.start()
    log.info("embedded Celery worker (%d task threads) and beat started in process %d", concurrency, os.getpid())
