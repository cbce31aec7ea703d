"""What every vector-store backend offers, and the scope every call must carry."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Protocol

# Point ids are uuid5 of the memory id under this namespace: a retried write lands on the same point.
POINT_NAMESPACE = uuid.UUID("6f1c3a52-3f0e-4c1b-9a7e-0d6c2b1f9e11")


def point_id_for(memory_id) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, str(memory_id)))


class ScopeMissing(Exception):
    """A query without a tenant is a bug: it must fail, not return everything."""


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


@dataclass
class Hit:
    memory_id: str
    score: float
    payload: dict


class VectorStore(Protocol):
    backend_name: str

    def ensure_collection(self) -> None: ...
    def upsert(self, points: list[MemoryPoint]) -> None: ...
    def delete(self, scope: Scope, memory_ids: list[str]) -> None: ...
    def delete_scope(self, scope: Scope) -> None: ...
    def search(self, scope: Scope, *, dense: list[float] | None, text: str | None, limit: int,
               kinds: list[str] | None = None, statuses: list[str] | None = ("active",),
               not_expired_at: float | None = None) -> list[Hit]: ...
    def retrieve(self, scope: Scope, memory_ids: list[str]) -> list[Hit]: ...
    def scroll(self, scope: Scope, *, limit: int = 256, offset: str | None = None) -> tuple[list[Hit], str | None]: ...
    def count(self, scope: Scope, *, statuses: list[str] | None = None) -> int: ...
    def set_payload(self, scope: Scope, memory_id: str, payload: dict) -> None: ...
    def dense_size(self) -> int | None: ...
    def health(self) -> int: ...
