"""Which vector store this process uses: a Qdrant server when QDRANT_URL is set, else Qdrant Edge."""
from __future__ import annotations

import os
import threading

from django.conf import settings

from .base import VectorStore

_lock = threading.Lock()
_store: VectorStore | None = None
_pid: int | None = None


def get_vector_store() -> VectorStore:
    """The process's store, opened on first use. A failed open is not cached: the next call tries again."""
    global _store, _pid
    if _store is None or _pid != os.getpid():
        with _lock:
            if _store is not None and _pid != os.getpid():
                # Forked after the parent opened it: the parent's Edge shard or HTTP pool is not ours to use
                # (two processes writing one shard corrupt it), so open our own; Edge then fails loudly.
                _store = None
            if _store is None:
                if settings.QDRANT_URL:
                    from .server import ServerVectorStore

                    store = ServerVectorStore.from_settings()
                else:
                    from .edge import EdgeVectorStore

                    store = EdgeVectorStore.from_settings()
                try:
                    store.ensure_collection()
                except Exception:
                    store.close()
                    raise
                _store, _pid = store, os.getpid()
    return _store


def set_vector_store(store: VectorStore | None) -> None:
    """Swap the store (tests, benchmarks); the caller keeps ownership of the one it replaces."""
    global _store, _pid
    with _lock:
        _store, _pid = store, os.getpid()


def reset_vector_store() -> None:
    """Close and forget the store (tests; the Edge shard's lock is released on close)."""
    global _store, _pid
    with _lock:
        if _store is not None and _pid == os.getpid() and hasattr(_store, "close"):
            _store.close()
        _store, _pid = None, None
