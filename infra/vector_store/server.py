"""Qdrant server backend (qdrant-client against QDRANT_URL); also runs on qdrant-client's local mode for tests.

Local mode ignores payload indexes and is slow on filtered queries (see bench/vector_store.py): it is for
contract tests on small data, never the embedded default (that is Qdrant Edge). Local mode also does not
apply a query's top-level filter to its prefetches, so every prefetch carries the scope filter itself.
"""
from __future__ import annotations

import contextlib
import logging
import warnings

from django.conf import settings
from qdrant_client import QdrantClient
from qdrant_client import models as m
from qdrant_client.http.exceptions import UnexpectedResponse

from .base import (
    DENSE,
    SPARSE,
    Hit,
    MemoryPoint,
    Scope,
    ScopeMissing,
    Search,
    SearchThroughBatch,
    VectorStoreError,
    admitted_hits,
    checked_point_payload,
    collection_name,
    hits_per_search,
    point_id_for,
    refuse_scope_change,
)
from .filters import scope_filter, search_plan
from .sparse import document_sparse

log = logging.getLogger(__name__)

_PAYLOAD_INDEXES = {
    # is_tenant lets the server co-locate each tenant's points and plan per-tenant searches.
    "tenant_id": m.KeywordIndexParams(type=m.KeywordIndexType.KEYWORD, is_tenant=True),
    "user_id": m.PayloadSchemaType.KEYWORD,
    "kind": m.PayloadSchemaType.KEYWORD,
    "status": m.PayloadSchemaType.KEYWORD,
    "created_at": m.PayloadSchemaType.FLOAT,
    "expires_at": m.PayloadSchemaType.FLOAT,
}


def _sparse(vec) -> m.SparseVector:
    return m.SparseVector(indices=list(vec.indices), values=list(vec.values))


class ServerVectorStore(SearchThroughBatch):
    backend_name = "qdrant"

    def __init__(self, client: QdrantClient, *, collection: str, dim: int, prefetch_factor: int = 4):
        self.client = client
        self.collection = collection
        self.dim = dim
        self._prefetch_factor = prefetch_factor

    @classmethod
    def from_settings(cls) -> "ServerVectorStore":
        client = QdrantClient(
            url=settings.QDRANT_URL,
            api_key=settings.QDRANT_API_KEY or None,
            timeout=int(getattr(settings, "QDRANT_TIMEOUT_SECONDS", 5)),
            check_compatibility=False,  # no network call at construction: a down server surfaces on first use
        )
        name = collection_name(settings.QDRANT_COLLECTION_PREFIX, settings.EMBEDDING_MODEL, settings.EMBEDDING_DIM)
        return cls(client, collection=name, dim=settings.EMBEDDING_DIM)

    @contextlib.contextmanager
    def _call(self):
        """Backend failures (connection refused, timeouts, 5xx) leave as VectorStoreError."""
        try:
            yield self.client
        except (ScopeMissing, ValueError, VectorStoreError):
            raise
        except Exception as exc:
            raise VectorStoreError(f"Qdrant failed: {exc.__class__.__name__}: {exc}"[:500]) from exc

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()

    def ensure_collection(self) -> None:
        with self._call() as client:
            if not client.collection_exists(self.collection):
                try:
                    client.create_collection(
                        self.collection,
                        vectors_config={DENSE: m.VectorParams(size=self.dim, distance=m.Distance.COSINE)},
                        sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
                    )
                except UnexpectedResponse as exc:
                    if exc.status_code != 409:  # 409: another process created it first
                        raise
            existing = client.get_collection(self.collection).payload_schema or {}
            for field_name, schema in _PAYLOAD_INDEXES.items():
                if field_name in existing:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # local mode warns that it has no payload indexes
                    client.create_payload_index(self.collection, field_name, field_schema=schema, wait=True)

    # --- writes --------------------------------------------------------------------------------------
    def upsert(self, points: list[MemoryPoint]) -> None:
        if not points:
            return
        built = []
        for p in points:
            payload = checked_point_payload(p, self.dim)
            sparse = _sparse(document_sparse(p.text, tenant_id=payload["tenant_id"]))
            built.append(m.PointStruct(id=point_id_for(p.memory_id), vector={DENSE: list(p.dense), SPARSE: sparse},
                                       payload=payload))
        with self._call() as client:
            client.upsert(self.collection, points=built, wait=True)

    def delete(self, scope: Scope, memory_ids: list[str]) -> None:
        spec = scope_filter(scope, memory_ids=list(memory_ids))
        if spec.matches_nothing:
            return
        with self._call() as client:
            client.delete(self.collection, points_selector=m.FilterSelector(filter=spec.to_client()), wait=True)

    def delete_scope(self, scope: Scope) -> None:
        spec = scope_filter(scope)
        with self._call() as client:
            client.delete(self.collection, points_selector=m.FilterSelector(filter=spec.to_client()), wait=True)

    def set_payload(self, scope: Scope, memory_id: str, payload: dict) -> None:
        refuse_scope_change(payload)
        spec = scope_filter(scope, memory_ids=[memory_id])
        with self._call() as client:
            client.set_payload(self.collection, payload=dict(payload),
                               points=m.FilterSelector(filter=spec.to_client()), wait=True)

    # --- reads ---------------------------------------------------------------------------------------
    def search_batch(self, searches: list[Search]) -> list[list[Hit]]:
        """Several searches in one round trip (query_batch_points); one list of hits per search."""
        planned = [self._request(s) for s in searches]
        requests = [p[1] for p in planned if p is not None]
        if not requests:
            return [[] for _ in searches]
        with self._call() as client:
            found = client.query_batch_points(self.collection, requests=requests)
        return hits_per_search(planned, [answer.points for answer in found])

    def _request(self, search: Search):
        """(filter spec, QueryRequest) for one search, or None when nothing can match."""
        plan = search_plan(search, dim=self.dim)
        if plan is None:
            return None
        spec, sparse, with_payload = plan
        flt = spec.to_client()
        dense, limit = search.dense, search.limit
        if dense is not None and sparse is not None:
            fetch = max(limit * self._prefetch_factor, 20)
            request = m.QueryRequest(
                prefetch=[m.Prefetch(query=list(dense), using=DENSE, filter=flt, limit=fetch),
                          m.Prefetch(query=_sparse(sparse), using=SPARSE, filter=flt, limit=fetch)],
                query=m.FusionQuery(fusion=m.Fusion.RRF), filter=flt, limit=limit, with_payload=with_payload)
        elif dense is not None:
            request = m.QueryRequest(query=list(dense), using=DENSE, filter=flt, limit=limit,
                                     with_payload=with_payload)
        else:
            request = m.QueryRequest(query=_sparse(sparse), using=SPARSE, filter=flt, limit=limit,
                                     with_payload=with_payload)
        return spec, request

    def retrieve(self, scope: Scope, memory_ids: list[str]) -> list[Hit]:
        spec = scope_filter(scope, memory_ids=list(memory_ids))
        if spec.matches_nothing:
            return []
        with self._call() as client:
            records, _ = client.scroll(self.collection, scroll_filter=spec.to_client(), limit=len(spec.point_ids),
                                       with_payload=True, with_vectors=False)
        return admitted_hits(records, spec, score=1.0)

    def scroll(self, scope: Scope, *, limit: int = 256, offset: str | None = None) -> tuple[list[Hit], str | None]:
        spec = scope_filter(scope)
        with self._call() as client:
            records, next_offset = client.scroll(self.collection, scroll_filter=spec.to_client(), limit=limit,
                                                 offset=offset, with_payload=True, with_vectors=False)
        hits = admitted_hits(records, spec, score=1.0)
        return hits, (str(next_offset) if next_offset is not None else None)

    def count(self, scope: Scope, *, statuses: list[str] | None = None) -> int:
        spec = scope_filter(scope, statuses=statuses)
        if spec.matches_nothing:
            return 0
        with self._call() as client:
            return client.count(self.collection, count_filter=spec.to_client(), exact=True).count

    def vacuum(self) -> bool:
        """Nothing to do from here: a Qdrant server runs its own optimizer (its collection's vacuum thresholds)."""
        return False

    def dense_size(self) -> int | None:
        with self._call() as client:
            if not client.collection_exists(self.collection):
                return None
            vectors = client.get_collection(self.collection).config.params.vectors
        if isinstance(vectors, dict):
            params = vectors.get(DENSE)
            return params.size if params else None
        return vectors.size if vectors else None

    def health(self) -> int:
        """Points in the collection (any tenant): a number for /readyz, never their contents."""
        with self._call() as client:
            return client.get_collection(self.collection).points_count or 0
