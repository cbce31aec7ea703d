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


def start_embedded_worker(*, concurrency: int = 2) -> None:
    if _started.is_set():
        return
    _started.set()
    from celery.beat import EmbeddedService
    from celery.worker import WorkController

    from config.celery import app

    worker = WorkController(
        app=app, hostname=f"embedded@{os.getpid()}", concurrency=concurrency, pool_cls="threads",
        queues=["default", "llm", "maintenance"], without_heartbeat=True, without_mingle=True, without_gossip=True,
    )
    threading.Thread(target=worker.start, name="celery-worker", daemon=True).start()
    beat = EmbeddedService(app, thread=True)
    beat.start()
    log.info("embedded Celery worker (%d threads) and beat started in process %d", concurrency, os.getpid())
