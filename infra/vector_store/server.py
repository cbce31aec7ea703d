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

from .base import DENSE, SPARSE, ScopeMissing, VectorStoreError, collection_name
from .scoped import ScopedBackend

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


class ServerVectorStore(ScopedBackend):
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

    # --- the engine's calls (ScopedBackend) -----------------------------------------------------------
    def _engine_upsert(self, points) -> None:
        built = [m.PointStruct(id=point_id, vector={DENSE: dense, SPARSE: _sparse(sparse)}, payload=payload)
                 for point_id, dense, sparse, payload in points]
        with self._call() as client:
            client.upsert(self.collection, points=built, wait=True)

    def _engine_delete(self, spec) -> None:
        with self._call() as client:
            client.delete(self.collection, points_selector=m.FilterSelector(filter=spec.to_client()), wait=True)

    def _engine_set_payload(self, spec, payload: dict) -> None:
        with self._call() as client:
            client.set_payload(self.collection, payload=payload, points=m.FilterSelector(filter=spec.to_client()),
                               wait=True)

    def _engine_request(self, spec, *, dense, sparse, limit: int, fetch: int, with_payload) -> m.QueryRequest:
        flt = spec.to_client()
        if dense is not None and sparse is not None:
            return m.QueryRequest(
                prefetch=[m.Prefetch(query=list(dense), using=DENSE, filter=flt, limit=fetch),
                          m.Prefetch(query=_sparse(sparse), using=SPARSE, filter=flt, limit=fetch)],
                query=m.FusionQuery(fusion=m.Fusion.RRF), filter=flt, limit=limit, with_payload=with_payload)
        vector, using = (list(dense), DENSE) if dense is not None else (_sparse(sparse), SPARSE)
        return m.QueryRequest(query=vector, using=using, filter=flt, limit=limit, with_payload=with_payload)

    def _engine_query(self, requests: list) -> list:
        """One round trip (query_batch_points) for several requests."""
        with self._call() as client:
            return [answer.points for answer in client.query_batch_points(self.collection, requests=requests)]

    def _engine_scroll(self, spec, *, limit: int, offset):
        with self._call() as client:
            return client.scroll(self.collection, scroll_filter=spec.to_client(), limit=limit, offset=offset,
                                 with_payload=True, with_vectors=False)

    def _engine_count(self, spec) -> int:
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
