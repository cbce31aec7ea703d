"""The half both backends share: the scope filter, the second guard, and a single search as a batch of one."""
from __future__ import annotations

from .base import (
    Hit,
    MemoryPoint,
    Scope,
    Search,
    admitted_hits,
    checked_point_payload,
    hits_per_search,
    point_id_for,
    refuse_scope_change,
)
from .filters import scope_filter, search_plan
from .sparse import document_sparse


class ScopedBackend:
    """What both backends do alike around their engine's calls, so the two cannot drift apart: every call's filter
    comes from its scope, a filter that can match nothing never reaches the engine, every point read passes the
    filter's own check again (admitted_hits), and a single search is a batch of one. A backend supplies the calls
    named `_engine_*`, each given a filter spec (filters.py) it turns into its engine's own."""

    dim: int
    _prefetch_factor: int

    def _engine_upsert(self, points: list[tuple[str, list[float], object, dict]]) -> None:
        """(point id, dense vector, sparse vector, payload) of each point."""
        raise NotImplementedError

    def _engine_delete(self, spec) -> None:
        raise NotImplementedError

    def _engine_set_payload(self, spec, payload: dict) -> None:
        raise NotImplementedError

    def _engine_request(self, spec, *, dense, sparse, limit: int, fetch: int, with_payload):
        """The engine's query: hybrid (each side fetching `fetch`, fused by RRF) when both vectors are given."""
        raise NotImplementedError

    def _engine_query(self, requests: list) -> list:
        """The points each request found, in order."""
        raise NotImplementedError

    def _engine_scroll(self, spec, *, limit: int, offset):
        """(points, next offset)."""
        raise NotImplementedError

    def _engine_count(self, spec) -> int:
        raise NotImplementedError

    # --- writes --------------------------------------------------------------------------------------
    def upsert(self, points: list[MemoryPoint]) -> None:
        if not points:
            return
        built = []
        for p in points:
            payload = checked_point_payload(p, self.dim)
            sparse = document_sparse(p.text, tenant_id=payload["tenant_id"])
            built.append((point_id_for(p.memory_id), list(p.dense), sparse, payload))
        self._engine_upsert(built)

    def delete(self, scope: Scope, memory_ids: list[str]) -> None:
        spec = scope_filter(scope, memory_ids=list(memory_ids))
        if not spec.matches_nothing:
            self._engine_delete(spec)

    def delete_scope(self, scope: Scope) -> None:
        self._engine_delete(scope_filter(scope))

    def set_payload(self, scope: Scope, memory_id: str, payload: dict) -> None:
        refuse_scope_change(payload)
        self._engine_set_payload(scope_filter(scope, memory_ids=[memory_id]), dict(payload))

    # --- reads ---------------------------------------------------------------------------------------
    def search(self, scope: Scope, *, dense: list[float] | None = None, text: str | None = None, limit: int = 10,
               kinds: list[str] | None = None, statuses: list[str] | None = ("active",),
               not_expired_at: float | None = None, payload_keys=None) -> list[Hit]:
        """Hybrid (dense + BM25, fused by RRF) when both inputs are given, else whichever one is.

        not_expired_at: an epoch time; points whose expires_at is at or before it are left out (None: no check).
        payload_keys: only these payload keys (plus GUARD_KEYS) come back with each hit; None: the whole payload.
        """
        return self.search_batch([Search(scope, dense=dense, text=text, limit=limit, kinds=kinds, statuses=statuses,
                                         not_expired_at=not_expired_at, payload_keys=payload_keys)])[0]

    def search_batch(self, searches: list[Search]) -> list[list[Hit]]:
        """Several searches in one call to the engine; one list of hits per search."""
        planned = [self._request(s) for s in searches]
        requests = [p[1] for p in planned if p is not None]
        if not requests:
            return [[] for _ in searches]
        return hits_per_search(planned, self._engine_query(requests))

    def _request(self, search: Search):
        """(filter spec, engine request) for one search, or None when nothing can match."""
        plan = search_plan(search, dim=self.dim)
        if plan is None:
            return None
        spec, sparse, with_payload = plan
        return spec, self._engine_request(spec, dense=search.dense, sparse=sparse, limit=search.limit,
                                          fetch=max(search.limit * self._prefetch_factor, 20),
                                          with_payload=with_payload)

    def retrieve(self, scope: Scope, memory_ids: list[str]) -> list[Hit]:
        spec = scope_filter(scope, memory_ids=list(memory_ids))
        if spec.matches_nothing:
            return []
        records, _ = self._engine_scroll(spec, limit=len(spec.point_ids), offset=None)
        return admitted_hits(records, spec, score=1.0)

    def scroll(self, scope: Scope, *, limit: int = 256, offset: str | None = None) -> tuple[list[Hit], str | None]:
        spec = scope_filter(scope)
        records, next_offset = self._engine_scroll(spec, limit=limit, offset=offset)
        return admitted_hits(records, spec, score=1.0), (str(next_offset) if next_offset is not None else None)

    def count(self, scope: Scope, *, statuses: list[str] | None = None) -> int:
        spec = scope_filter(scope, statuses=statuses)
        return 0 if spec.matches_nothing else self._engine_count(spec)
