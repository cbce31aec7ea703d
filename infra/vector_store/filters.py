"""The one filter builder: every search, scroll, count, delete, retrieve and set_payload is scoped here.

`scope_filter()` turns a Scope plus optional conditions into a backend-neutral `ScopeFilter`, which renders
itself for Qdrant Edge (`to_edge`) or qdrant-client (`to_client`) and re-checks returned payloads
(`admits`) as a second guard. There is no way to build a filter without a tenant.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import Scope, ScopeMissing, Search, payload_selection, point_id_for


@dataclass(frozen=True)
class ScopeFilter:
    tenant_id: str
    user_id: str | None = None
    statuses: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    not_expired_at: float | None = None
    point_ids: tuple[str, ...] | None = None
    said_between: tuple[float, float] | None = None

    def to_edge(self):
        from qdrant_edge import (
            FieldCondition,
            Filter,
            HasIdCondition,
            IsEmptyCondition,
            MatchAny,
            MatchValue,
            RangeFloat,
        )

        must = [FieldCondition("tenant_id", match=MatchValue(self.tenant_id))]
        if self.user_id is not None:
            must.append(FieldCondition("user_id", match=MatchValue(self.user_id)))
        if self.statuses is not None:
            must.append(FieldCondition("status", match=MatchAny(list(self.statuses))))
        if self.kinds is not None:
            must.append(FieldCondition("kind", match=MatchAny(list(self.kinds))))
        if self.not_expired_at is not None:
            must.append(Filter(should=[IsEmptyCondition("expires_at"),
                                       FieldCondition("expires_at", range=RangeFloat(gt=self.not_expired_at))]))
        if self.point_ids is not None:
            must.append(HasIdCondition(set(self.point_ids)))
        if self.said_between is not None:
            must.append(FieldCondition("created_at", range=RangeFloat(gte=self.said_between[0],
                                                                      lt=self.said_between[1])))
        return Filter(must=must)

    def to_client(self):
        from qdrant_client import models as m

        must = [m.FieldCondition(key="tenant_id", match=m.MatchValue(value=self.tenant_id))]
        if self.user_id is not None:
            must.append(m.FieldCondition(key="user_id", match=m.MatchValue(value=self.user_id)))
        if self.statuses is not None:
            must.append(m.FieldCondition(key="status", match=m.MatchAny(any=list(self.statuses))))
        if self.kinds is not None:
            must.append(m.FieldCondition(key="kind", match=m.MatchAny(any=list(self.kinds))))
        if self.not_expired_at is not None:
            must.append(m.Filter(should=[m.IsEmptyCondition(is_empty=m.PayloadField(key="expires_at")),
                                         m.FieldCondition(key="expires_at", range=m.Range(gt=self.not_expired_at))]))
        if self.point_ids is not None:
            must.append(m.HasIdCondition(has_id=list(self.point_ids)))
        if self.said_between is not None:
            must.append(m.FieldCondition(key="created_at", range=m.Range(gte=self.said_between[0],
                                                                         lt=self.said_between[1])))
        return m.Filter(must=must)

    @property
    def matches_nothing(self) -> bool:
        """An empty list of statuses, kinds or ids selects no point; callers skip the round trip."""
        return any(v is not None and not v for v in (self.statuses, self.kinds, self.point_ids))

    def admits(self, payload: dict | None) -> bool:
        """The second guard: a result outside the scope is dropped even if a backend let it through."""
        if not payload or str(payload.get("tenant_id")) != self.tenant_id:
            return False
        if self.user_id is not None and str(payload.get("user_id")) != self.user_id:
            return False
        if self.statuses is not None and payload.get("status") not in self.statuses:
            return False
        if self.kinds is not None and payload.get("kind") not in self.kinds:
            return False
        if self.not_expired_at is not None:
            expires_at = payload.get("expires_at")
            if expires_at is not None and not expires_at > self.not_expired_at:
                return False
        if self.said_between is not None:
            said = payload.get("created_at")
            if said is None or not self.said_between[0] <= said < self.said_between[1]:
                return False
        return True


def scope_filter(scope: Scope, *, statuses=None, kinds=None, not_expired_at: float | None = None,
                 memory_ids=None, said_between: tuple[float, float] | None = None) -> ScopeFilter:
    """The filter for one call. Raises ScopeMissing unless `scope` is a Scope naming a tenant.

    statuses/kinds: None means any; an empty list matches nothing. memory_ids narrows to those memories' points.
    said_between: only points said (created_at) in [start, end), epoch times.
    """
    tenant_id = getattr(scope, "tenant_id", None) if isinstance(scope, Scope) else None
    if not tenant_id or not str(tenant_id).strip():
        raise ScopeMissing("Every vector-store call needs a tenant scope.")
    return ScopeFilter(
        tenant_id=str(tenant_id),
        user_id=str(scope.user_id) if getattr(scope, "user_id", None) is not None else None,
        statuses=tuple(statuses) if statuses is not None else None,
        kinds=tuple(kinds) if kinds is not None else None,
        not_expired_at=float(not_expired_at) if not_expired_at is not None else None,
        point_ids=tuple(point_id_for(m) for m in memory_ids) if memory_ids is not None else None,
        said_between=(float(said_between[0]), float(said_between[1])) if said_between is not None else None,
    )


def search_plan(search: Search, *, dim: int):
    """What both backends check before a search: (filter spec, sparse query, payload to fetch), or None when
    nothing can match. The payload is True (all of it) or the asked keys plus the guard keys."""
    from .sparse import query_sparse

    spec = scope_filter(search.scope, statuses=search.statuses, kinds=search.kinds,
                        not_expired_at=search.not_expired_at, said_between=search.said_between)
    if search.dense is not None and len(search.dense) != dim:
        raise ValueError(f"Query vector has {len(search.dense)} dimensions; the store holds {dim}-d vectors.")
    sparse = query_sparse(search.text, tenant_id=search.scope.tenant_id)
    if spec.matches_nothing or search.limit <= 0 or (search.dense is None and sparse is None):
        return None
    selected = payload_selection(search.payload_keys)
    return spec, sparse, True if selected is None else selected
