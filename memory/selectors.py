"""Reads of long-term memories, each scoped by tenant first (and by user where one is given)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from infra.errors import NotFound
from infra.vector_store import Hit, Scope, get_vector_store
from tenants.models import EndUser, Tenant
from tenants.selectors import parse_uuid

from .models import MemoryEvent, MemoryRecord, MemoryStatus


def _scope(tenant: Tenant | None, user: EndUser | None) -> Scope:
    # Scope() raises ScopeMissing without a tenant: no read may ever run unscoped.
    return Scope(tenant_id=str(tenant.pk) if tenant is not None else "",
                 user_id=str(user.pk) if user is not None else None)


def memory_list(*, tenant: Tenant, user: EndUser | None = None, kinds: list[str] | None = None,
                statuses: list[str] | None = None) -> QuerySet[MemoryRecord]:
    qs = MemoryRecord.objects.for_tenant(tenant)
    if user is not None:
        qs = qs.filter(user=user)
    if kinds:
        qs = qs.filter(kind__in=kinds)
    if statuses:
        qs = qs.filter(status__in=statuses)
    return qs


REPLACED_READ_MAX = 200  # the most recently replaced statements a read returns: what a bridge may still quote


def memory_replaced_texts(*, tenant: Tenant, user_id) -> list[str]:
    """The texts of the user's memories that a later statement replaced (superseded), newest first, at most
    REPLACED_READ_MAX."""
    return list(MemoryRecord.objects.for_tenant(tenant).filter(user_id=user_id, status=MemoryStatus.SUPERSEDED)
                .order_by("-updated_at").values_list("text", flat=True)[:REPLACED_READ_MAX])


@dataclass(frozen=True)
class MemoryCriteria:
    """Which of a user's memories a bulk operation takes; every given condition must hold."""
    kinds: tuple[str, ...] = ()
    source_types: tuple[str, ...] = ()
    session_id: str | None = None
    created_from: datetime | None = None  # inclusive
    created_to: datetime | None = None  # exclusive

    def is_empty(self) -> bool:
        return not (self.kinds or self.source_types or self.session_id or self.created_from or self.created_to)


def memories_matching(*, tenant: Tenant, user: EndUser, criteria: MemoryCriteria) -> QuerySet[MemoryRecord]:
    """The user's memories that match and are not deleted yet."""
    qs = MemoryRecord.objects.for_tenant(tenant).filter(user=user).exclude(status=MemoryStatus.DELETED)
    if criteria.kinds:
        qs = qs.filter(kind__in=list(criteria.kinds))
    if criteria.source_types:
        qs = qs.filter(source_type__in=list(criteria.source_types))
    if criteria.session_id:
        qs = qs.filter(session_id=criteria.session_id)
    if criteria.created_from:
        qs = qs.filter(created_at__gte=criteria.created_from)
    if criteria.created_to:
        qs = qs.filter(created_at__lt=criteria.created_to)
    return qs


def access_memory(*, tenant: Tenant, memory_id, user: EndUser | None = None) -> MemoryRecord:
    """One 404 for missing, another tenant's and (with user) another user's memory."""
    mid = parse_uuid(memory_id, what="memory")
    qs = MemoryRecord.objects.for_tenant(tenant).filter(pk=mid)
    if user is not None:
        qs = qs.filter(user=user)
    record = qs.select_related("source_message", "session").first()
    if record is None:
        raise NotFound("Memory not found.")
    return record


def memory_history(*, tenant: Tenant, memory_id) -> QuerySet[MemoryEvent]:
    return MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid=parse_uuid(memory_id, what="memory"))


def memory_points_scroll(*, tenant: Tenant | None, user: EndUser | None = None, limit: int = 256,
                         offset: str | None = None) -> tuple[list[Hit], str | None]:
    return get_vector_store().scroll(_scope(tenant, user), limit=limit, offset=offset)


def memory_points_count(*, tenant: Tenant | None, user: EndUser | None = None,
                        statuses: list[str] | None = None) -> int:
    return get_vector_store().count(_scope(tenant, user), statuses=statuses)


def memory_points_search(*, tenant: Tenant | None, user: EndUser | None, dense: list[float] | None = None,
                         text: str | None = None, limit: int = 10) -> list[Hit]:
    return get_vector_store().search(_scope(tenant, user), dense=dense, text=text, limit=limit)


def session_facts(*, tenant_id, session_id, limit: int) -> list[dict]:
    """The newest active memories drawn from one session, oldest first, as {id, text} (a session buffer's facts)."""
    rows = (MemoryRecord.objects.for_tenant(tenant_id).filter(session_id=session_id, status=MemoryStatus.ACTIVE)
            .order_by("-created_at").values_list("id", "text")[:limit])
    return [{"id": str(i), "text": t} for i, t in list(rows)[::-1]]
