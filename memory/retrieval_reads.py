"""The two database reads on a retrieval's hot path: the shortlisted memories, and the turns next to the best hits.

On PostgreSQL each is one statement with its id lists bound as arrays. Through the ORM the same reads cost about
three times the statement itself (an IN list of up to ~120 ids compiled and quoted on every call, a dict built per
row), and they run on every turn. Other databases use the ORM. Both paths filter by tenant first and return the same
rows with the same keys (tests compare them on PostgreSQL).
"""
from __future__ import annotations

import functools
import json

from django.db import connection
from django.db.models import Q

from sessions.models import Message, Session

from .models import MemoryRecord, MemoryStatus

RECORD_KEYS = ("id", "user_id", "kind", "text", "source_type", "created_at", "session_id", "source_message_id",
               "source_message_ids", "confidence", "importance", "access_count", "metadata")
MEMORY_KEYS = (*RECORD_KEYS, "source_message__seq", "source_message__session_id")  # the source turn's position
TURN_KEYS = ("pk", "session_id", "seq", "role", "name", "content", "session__user_id")
_JSON_KEYS = ("source_message_ids", "metadata")


def _column(model, name: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(name).column)


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _native() -> bool:
    return connection.vendor == "postgresql"


def memory_rows(*, tenant, user_ids: list[str], memory_ids: list[str], now) -> dict[str, dict]:
    """Active, unexpired memories among `memory_ids` of these users of this tenant, by id, as MEMORY_KEYS dicts."""
    if not memory_ids or not user_ids:
        return {}
    if not _native():
        return {str(r["id"]): r for r in memory_rows_orm(tenant=tenant, user_ids=user_ids, memory_ids=memory_ids,
                                                         now=now)}
    with connection.cursor() as cursor:
        cursor.execute(_memory_sql(), [tenant.pk, list(user_ids), list(memory_ids), MemoryStatus.ACTIVE, now])
        rows = [dict(zip(MEMORY_KEYS, values, strict=True)) for values in cursor.fetchall()]
    for row in rows:
        for key in _JSON_KEYS:
            if isinstance(row[key], str):  # Django has psycopg hand jsonb over as text; JSONField would parse it
                row[key] = json.loads(row[key])
    return {str(r["id"]): r for r in rows}


def memory_rows_orm(*, tenant, user_ids, memory_ids, now) -> list[dict]:
    return list(MemoryRecord.objects.filter(tenant=tenant, user_id__in=user_ids, pk__in=memory_ids,
                                            status=MemoryStatus.ACTIVE)
                .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
                .order_by()  # the rows are looked up by id: sorting them is wasted work
                .values(*MEMORY_KEYS))


@functools.cache
def _memory_sql() -> str:
    r, m = MemoryRecord, Message
    cols = ", ".join(f"r.{_column(r, k)}" for k in RECORD_KEYS)
    return (f"SELECT {cols}, m.{_column(m, 'seq')}, m.{_column(m, 'session')} "
            f"FROM {_table(r)} r LEFT JOIN {_table(m)} m ON m.{_column(m, 'id')} = r.{_column(r, 'source_message')} "
            f"WHERE r.{_column(r, 'tenant')} = %s AND r.{_column(r, 'user')} = ANY(%s::uuid[]) "
            f"AND r.{_column(r, 'id')} = ANY(%s::uuid[]) "
            f"AND r.{_column(r, 'status')} = %s "
            f"AND (r.{_column(r, 'expires_at')} IS NULL OR r.{_column(r, 'expires_at')} > %s)")


def turns_at(*, tenant, positions: list[tuple]) -> list[dict]:
    """The messages of this tenant at the given (session id, seq) positions, as TURN_KEYS dicts."""
    positions = list(dict.fromkeys(positions))
    if not positions:
        return []
    if not _native():
        return turns_at_orm(tenant=tenant, positions=positions)
    with connection.cursor() as cursor:
        cursor.execute(_turns_sql(), [tenant.pk, [p[0] for p in positions], [p[1] for p in positions]])
        return [dict(zip(TURN_KEYS, values, strict=True)) for values in cursor.fetchall()]


def turns_at_orm(*, tenant, positions) -> list[dict]:
    cond = Q()
    for session_id, seq in positions:
        cond |= Q(session_id=session_id, seq=seq)
    return list(Message.objects.filter(cond, tenant=tenant).order_by().values(*TURN_KEYS))


@functools.cache
def _turns_sql() -> str:
    m, s = Message, Session
    cols = ", ".join(f"m.{_column(m, k)}" for k in ("id", "session", "seq", "role", "name", "content"))
    return (f"SELECT {cols}, s.{_column(s, 'user')} FROM {_table(m)} m "
            f"JOIN {_table(s)} s ON s.{_column(s, 'id')} = m.{_column(m, 'session')} "
            f"WHERE m.{_column(m, 'tenant')} = %s "
            f"AND (m.{_column(m, 'session')}, m.{_column(m, 'seq')}) IN "
            f"(SELECT * FROM unnest(%s::uuid[], %s::integer[]))")
