"""Qdrant Edge backend: Qdrant's engine in-process, one shard per embedding model under QDRANT_EDGE_PATH.

A shard is locked to one process (its write-ahead log): a second process opening it fails with a
VectorStoreError. Within the process one threading.Lock serialises every call, so request threads and an
embedded worker can share the store. Writes are visible to the next query without flush or optimize
(verified against qdrant-edge-py 0.9); the WAL makes them durable, `close()` flushes segments.
"""
from __future__ import annotations

import contextlib
import json
import logging
import threading
from pathlib import Path

from django.conf import settings
from qdrant_edge import (
    CountRequest,
    Distance,
    EdgeConfig,
    EdgeOptimizersConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FloatIndexParams,
    Fusion,
    KeywordIndexParams,
    Memory,
    Modifier,
    Point,
    Prefetch,
    Query,
    QueryBatchRequest,
    QueryRequest,
    ScrollRequest,
    UpdateOperation,
)

from .base import DENSE, RRF_K, SPARSE, ScopeMissing, VectorStoreError, collection_name
from .scoped import ScopedBackend

log = logging.getLogger(__name__)

CONFIG_FILE = "edge_config.json"


def _payload_indexes():
    return {
        # is_tenant groups each tenant's points together on disk when segments are optimised.
        "tenant_id": KeywordIndexParams(is_tenant=True),
        "user_id": KeywordIndexParams(),
        "kind": KeywordIndexParams(),
        "status": KeywordIndexParams(),
        "created_at": FloatIndexParams(),
        "expires_at": FloatIndexParams(),
    }


class EdgeVectorStore(ScopedBackend):
    backend_name = "edge"

    def __init__(self, path, *, dim: int, prefetch_factor: int = 4, search_threads: int | None = 1):
        self.path = Path(path)
        self.dim = dim
        self._search_threads = search_threads
        self._prefetch_factor = prefetch_factor
        self._lock = threading.Lock()
        self._shard = None
        self._open()

    @classmethod
    def from_settings(cls) -> "EdgeVectorStore":
        name = collection_name(settings.QDRANT_COLLECTION_PREFIX, settings.EMBEDDING_MODEL, settings.EMBEDDING_DIM)
        return cls(Path(settings.QDRANT_EDGE_PATH) / name, dim=settings.EMBEDDING_DIM,
                   search_threads=settings.QDRANT_EDGE_SEARCH_THREADS or None)

    # --- lifecycle -----------------------------------------------------------------------------------
    def _config(self) -> EdgeConfig:
        return EdgeConfig(
            vectors={DENSE: EdgeVectorParams(size=self.dim, distance=Distance.Cosine)},
            sparse_vectors={SPARSE: EdgeSparseVectorParams(modifier=Modifier.Idf)},
            payload_memory=Memory.Cached,  # payloads are small and read on every hit
            # Edge runs no optimizer of its own: `vacuum()` does, and with Qdrant's defaults it would leave a deleted
            # point's payload (the memory's text) in the segment files until a fifth of the segment was deleted. Any
            # deleted point now makes its segment due. Indexing keeps Qdrant's default: a large segment gets its HNSW
            # graph at the first vacuum, which makes filtered searches faster than in the unindexed segment (the
            # first build takes seconds for tens of thousands of points; bench/vector_store.py times both).
            optimizers=EdgeOptimizersConfig(deleted_threshold=0.0, vacuum_min_vector_number=0),
            # Requests are the parallelism here: a search pool per CPU spread one small filtered search over both
            # cores of this machine (1.2 cores of CPU per search), beside the query's embedding on the other thread.
            max_search_threads=self._search_threads,
        )

    def _open(self) -> None:
        try:
            if (self.path / CONFIG_FILE).exists():
                # A shard of another vector size is loaded as it is, so the mismatch surfaces through dense_size()
                # and the system check instead of as an opaque load failure; one of this size takes today's config.
                same_size = self.dense_size() == self.dim
                self._shard = EdgeShard.load(str(self.path), self._config() if same_size else None)
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                self._shard = EdgeShard.create(str(self.path), self._config())
        except Exception as exc:
            raise VectorStoreError(f"Cannot open the Qdrant Edge shard at {self.path} (is another process "
                                   f"holding it?): {exc}") from exc

    def close(self) -> None:
        """Flush and release the shard (and its process lock). Idempotent."""
        with self._lock:
            shard, self._shard = self._shard, None
            if shard is not None:
                try:
                    shard.flush()
                finally:
                    shard.close()

    @contextlib.contextmanager
    def _using(self):
        """The shard under the lock; backend failures leave as VectorStoreError."""
        with self._lock:
            if self._shard is None:
                raise VectorStoreError("The Qdrant Edge shard is closed.")
            try:
                yield self._shard
            except (ScopeMissing, ValueError, VectorStoreError):
                raise
            except Exception as exc:
                raise VectorStoreError(f"Qdrant Edge failed: {exc}") from exc

    def ensure_collection(self) -> None:
        with self._using() as shard:
            existing = shard.info().payload_schema
            for field_name, params in _payload_indexes().items():
                if field_name not in existing:
                    shard.update(UpdateOperation.create_field_index(field_name, params))

    def vacuum(self) -> bool:
        """Rewrite the segments that hold deleted points, so what was deleted leaves the segment files (the write-ahead
        log keeps recent operations until it rolls over). Blocks this process's other calls while it runs; True when
        something was rewritten."""
        with self._using() as shard:
            return shard.optimize()

    # --- the engine's calls (ScopedBackend) -----------------------------------------------------------
    def _engine_upsert(self, points) -> None:
        built = [Point(point_id, {DENSE: dense, SPARSE: sparse}, payload)
                 for point_id, dense, sparse, payload in points]
        with self._using() as shard:
            shard.update(UpdateOperation.upsert_points(built))

    def _engine_delete(self, spec) -> None:
        with self._using() as shard:
            shard.update(UpdateOperation.delete_points_by_filter(spec.to_edge()))

    def _engine_set_payload(self, spec, payload: dict) -> None:
        with self._using() as shard:
            shard.update(UpdateOperation.set_payload_by_filter(spec.to_edge(), payload))

    def _engine_request(self, spec, *, dense, sparse, limit: int, fetch: int, with_payload) -> QueryRequest:
        flt = spec.to_edge()
        if dense is not None and sparse is not None:
            return QueryRequest(
                limit=limit,
                prefetches=[Prefetch(limit=fetch, query=Query.Nearest(list(dense), using=DENSE), filter=flt),
                            Prefetch(limit=fetch, query=Query.Nearest(sparse, using=SPARSE), filter=flt)],
                query=Fusion.Rrf(k=RRF_K),
                filter=flt,
                with_payload=with_payload,
            )
        vector, using = (list(dense), DENSE) if dense is not None else (sparse, SPARSE)
        return QueryRequest(limit=limit, query=Query.Nearest(vector, using=using), filter=flt,
                            with_payload=with_payload)

    def _engine_query(self, requests: list) -> list:
        """One planned pass over the shard (query_batch) for several requests."""
        with self._using() as shard:
            if len(requests) == 1:
                return [shard.query(requests[0])]
            return shard.query_batch(QueryBatchRequest(requests))

    def _engine_scroll(self, spec, *, limit: int, offset):
        with self._using() as shard:
            return shard.scroll(ScrollRequest(offset=offset, limit=limit, filter=spec.to_edge(), with_payload=True,
                                              with_vector=False))

    def _engine_count(self, spec) -> int:
        with self._using() as shard:
            return shard.count(CountRequest(exact=True, filter=spec.to_edge()))

    def dense_size(self) -> int | None:
        try:
            config = json.loads((self.path / CONFIG_FILE).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise VectorStoreError(f"Unreadable Qdrant Edge config at {self.path}: {exc}") from exc
        return (config.get("vectors") or {}).get(DENSE, {}).get("size")

    def health(self) -> int:
        """Points in the shard (any tenant): a number for /readyz, never their contents."""
        with self._using() as shard:
            return shard.info().points_count
