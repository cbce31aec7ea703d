"""The turns right before and after given messages: what a retrieved memory is shown with (neighbour expansion).

On PostgreSQL one statement with the ids bound as an array; elsewhere the ORM. Both filter by tenant first and
return the same rows with the same keys, ids as strings.
"""
from __future__ import annotations

import functools
import uuid

from django.db import connection
from django.db.models import Q

from .models import Message, Session

TURN_KEYS = ("pk", "session_id", "seq", "role", "name", "content", "session__user_id", "around")
_ID_KEYS = ("pk", "session_id", "session__user_id", "around")


def _column(model, name: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(name).column)


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _ids_as_text(row: dict) -> dict:
    for key in _ID_KEYS:
        if isinstance(row.get(key), uuid.UUID):
            row[key] = str(row[key])
    return row


def _uuid_text(sql_column: str) -> str:
    return f"{sql_column}::text"


def turns_around(*, tenant, message_ids: list[str]) -> list[dict]:
    """The turns right before and after each of these messages of this tenant, in the same session, as TURN_KEYS
    dicts (ids as strings); `around` names the message a turn is next to."""
    message_ids = list(dict.fromkeys(str(m) for m in message_ids))
    if not message_ids:
        return []
    if connection.vendor != "postgresql":
        return turns_around_orm(tenant=tenant, message_ids=message_ids)
    with connection.cursor() as cursor:
        cursor.execute(_turns_sql(), [tenant.pk, message_ids])
        return [dict(zip(TURN_KEYS, values, strict=True)) for values in cursor.fetchall()]


def turns_around_orm(*, tenant, message_ids) -> list[dict]:
    around: dict[tuple, list] = {}  # (session, seq) → the sources it is next to (a turn between two is next to both)
    messages = Message.objects.for_tenant(tenant)
    for pk, session_id, seq in messages.filter(pk__in=message_ids).values_list(
            "pk", "session_id", "seq"):
        for position in ((session_id, seq - 1), (session_id, seq + 1)):
            around.setdefault(position, []).append(pk)
    if not around:
        return []
    cond = Q()
    for session_id, seq in around:
        cond |= Q(session_id=session_id, seq=seq)
    rows = messages.filter(cond).order_by().values(*TURN_KEYS[:-1])
    return [_ids_as_text({**row, "around": pk}) for row in rows for pk in around[(row["session_id"], row["seq"])]]


@functools.cache
def _turns_sql() -> str:
    m, s = Message, Session
    cols = ", ".join([_uuid_text(f"m.{_column(m, 'id')}"), _uuid_text(f"m.{_column(m, 'session')}"),
                      *(f"m.{_column(m, k)}" for k in ("seq", "role", "name", "content")),
                      _uuid_text(f"s.{_column(s, 'user')}"), _uuid_text(f"src.{_column(m, 'id')}")])
    session, seq, tenant = _column(m, "session"), _column(m, "seq"), _column(m, "tenant")
    return (f"SELECT {cols} FROM {_table(m)} src "
            f"JOIN {_table(m)} m ON m.{session} = src.{session} AND m.{tenant} = src.{tenant} "
            f"AND m.{seq} IN (src.{seq} - 1, src.{seq} + 1) "
            f"JOIN {_table(s)} s ON s.{_column(s, 'id')} = m.{session} "
            f"WHERE src.{tenant} = %s AND src.{_column(m, 'id')} = ANY(%s::uuid[])")
