"""Which vector store this process uses: a Qdrant server when QDRANT_URL is set, else Qdrant Edge."""
from __future__ import annotations

import threading

from django.conf import settings

from .base import VectorStore

_lock = threading.Lock()
_store: VectorStore | None = None


def get_vector_store() -> VectorStore:
    global _store
    if _store is None:
        with _lock:
            if _store is None:
                if settings.QDRANT_URL:
                    from .server import ServerVectorStore

                    _store = ServerVectorStore.from_settings()
                else:
                    from .edge import EdgeVectorStore

                    _store = EdgeVectorStore.from_settings()
                _store.ensure_collection()
    return _store


def set_vector_store(store: VectorStore | None) -> None:
    global _store
    with _lock:
        _store = store


def reset_vector_store() -> None:
    """Close and forget the store (tests; the Edge shard's lock is released on close)."""
    global _store
    with _lock:
        if _store is not None and hasattr(_store, "close"):
            _store.close()
        _store = None
