"""What every vector-store backend offers, and the scope every call must carry."""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from infra.errors import ServiceUnavailable

from .sparse import SPARSE_LAYOUT

# Point ids are uuid5 of the memory id under this namespace: a retried write lands on the same point.
POINT_NAMESPACE = uuid.UUID("6f1c3a52-3f0e-4c1b-9a7e-0d6c2b1f9e11")

DENSE = "dense"
SPARSE = "bm25"
# Qdrant's own RRF constant (server and qdrant-client local mode use 2): both backends rank alike.
RRF_K = 2
# Payload keys that place a point in a tenant and user; set_payload must never move a point out of its scope.
SCOPE_KEYS = frozenset({"tenant_id", "user_id", "memory_id"})
# Payload keys the backends' post-filter (ScopeFilter.admits) and admitted_hits read: a search asked for only some
# payload keys still returns these, so the second guard never judges a hit on a payload it cannot see.
GUARD_KEYS = frozenset({"tenant_id", "user_id", "memory_id", "status", "kind", "expires_at", "created_at"})


def point_id_for(memory_id) -> str:
    key = str(memory_id)
    try:
        key = str(uuid.UUID(key))  # "ABC…" and "abc…" name the same memory, so the same point
    except ValueError:
        pass
    return str(uuid.uuid5(POINT_NAMESPACE, key))


def collection_name(prefix: str, model: str, dim: int) -> str:
    """One collection (or Edge shard) per embedding model: vectors of two models never share an index."""
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_") or "model"
    return f"{prefix}_{slug}_{dim}"


class ScopeMissing(Exception):
    """A query without a tenant is a bug: it must fail, not return everything."""


class VectorStoreError(ServiceUnavailable):
    """The vector store could not do what was asked (down, locked, misconfigured); worth a retry later."""

    code = "vector_store_unavailable"


@dataclass(frozen=True)
class Scope:
    tenant_id: str
    user_id: str | None = None

    def __post_init__(self):
        if not self.tenant_id or not str(self.tenant_id).strip():
            raise ScopeMissing("Every vector-store call needs a tenant scope.")


@dataclass
class MemoryPoint:
    memory_id: str
    dense: list[float]
    text: str  # embedded into the sparse BM25 vector
    payload: dict = field(default_factory=dict)  # must hold tenant_id and user_id


@dataclass(frozen=True)
class Search:
    """One search of a batch (`search_batch`): the arguments `search` takes, as a value."""

    scope: Scope
    dense: list[float] | None = None
    text: str | None = None
    limit: int = 10
    kinds: tuple[str, ...] | None = None
    statuses: tuple[str, ...] | None = ("active",)
    not_expired_at: float | None = None
    payload_keys: tuple[str, ...] | None = None
    said_between: tuple[float, float] | None = None  # [start, end) epoch times of created_at (when it was said)


@dataclass
class Hit:
    memory_id: str
    score: float
    payload: dict


def hits_per_search(planned: list, answers) -> list[list[Hit]]:
    """planned: (filter spec, request) or None for each search; answers: the points of each planned request, in order.

    Each point passes the spec's own check again (the second guard) before it becomes a Hit.
    """
    results, remaining = [], iter(answers)
    for plan in planned:
        if plan is None:
            results.append([])
            continue
        spec = plan[0]
        results.append(admitted_hits(next(remaining), spec))
    return results


class VectorStore(Protocol):
    backend_name: str

    def ensure_collection(self) -> None: ...
    def upsert(self, points: list[MemoryPoint]) -> None: ...
    def delete(self, scope: Scope, memory_ids: list[str]) -> None: ...
    def delete_scope(self, scope: Scope) -> None: ...
    def search(self, scope: Scope, *, dense: list[float] | None, text: str | None, limit: int,
               kinds: list[str] | None = None, statuses: list[str] | None = ("active",),
               not_expired_at: float | None = None, payload_keys=None) -> list[Hit]: ...
    def search_batch(self, searches: list[Search]) -> list[list[Hit]]: ...
    def retrieve(self, scope: Scope, memory_ids: list[str]) -> list[Hit]: ...
    def scroll(self, scope: Scope, *, limit: int = 256, offset: str | None = None) -> tuple[list[Hit], str | None]: ...
    def count(self, scope: Scope, *, statuses: list[str] | None = None) -> int: ...
    def set_payload(self, scope: Scope, memory_id: str, payload: dict) -> None: ...
    def dense_size(self) -> int | None: ...
    def vacuum(self) -> bool: ...
    def health(self) -> int: ...
    def close(self) -> None: ...


# A payload key the store writes on every point: the layout of its keyword terms.
LAYOUT_KEY = "sparse_layout"


def checked_point_payload(point: MemoryPoint, dim: int) -> dict:
    """The payload a point is stored with; refuses a point that names no tenant or user, or has the wrong size."""
    payload = dict(point.payload)
    if not payload.get("tenant_id") or not payload.get("user_id"):
        raise ScopeMissing(f"Point for memory {point.memory_id} carries no tenant_id/user_id.")
    if len(point.dense) != dim:
        raise ValueError(f"Point for memory {point.memory_id} has {len(point.dense)}-d vector; "
                         f"the store holds {dim}-d.")
    payload["tenant_id"] = str(payload["tenant_id"])
    payload["user_id"] = str(payload["user_id"])
    payload["memory_id"] = str(point.memory_id)
    payload[LAYOUT_KEY] = SPARSE_LAYOUT  # how its keyword terms were written (infra/vector_store/sparse.py)
    return payload


def refuse_scope_change(payload: dict) -> None:
    moved = SCOPE_KEYS & payload.keys()
    if moved:
        raise ValueError(f"set_payload may not change {sorted(moved)}: a point never leaves its tenant or user.")


def payload_selection(payload_keys):
    """What to ask the backend for: the whole payload (None), or the given keys plus GUARD_KEYS, sorted."""
    if payload_keys is None:
        return None
    return sorted(GUARD_KEYS.union(payload_keys))


def admitted_hits(points, spec, *, score: float | None = None) -> list[Hit]:
    """The points that `spec` admits (the second guard), as Hits; score: the same for all (scrolls), else each one's.

    A point's payload (and id) is read once: the backends build a new dict on every access.
    """
    hits = []
    for point in points:
        payload = point.payload or {}
        if spec.admits(payload):
            memory_id = payload.get("memory_id") or point.id
            hits.append(Hit(memory_id=str(memory_id), score=float(point.score if score is None else score),
                            payload=payload))
    return hits
