"""The turns right before and after given messages: what a retrieved memory is shown with (neighbour expansion).

On PostgreSQL one statement with the ids bound as an array; elsewhere the ORM. Both filter by tenant first and
return the same rows with the same keys, ids as strings.
"""
from __future__ import annotations

import functools

from django.db import connection
from django.db.models import Q

from infra.sql import column, ids_as_text, native, table, uuid_text

from .models import Message, Session

TURN_KEYS = ("pk", "session_id", "seq", "role", "name", "content", "created_at", "session__user_id", "around", "before")
_ID_KEYS = ("pk", "session_id", "session__user_id", "around")


def turns_around(*, tenant, message_ids: list[str]) -> list[dict]:
    """The turns right before and after each of these messages of this tenant, in the same session, as TURN_KEYS
    dicts (ids as strings); `around` names the message a turn is next to, `before` says it comes first."""
    message_ids = list(dict.fromkeys(str(m) for m in message_ids))
    if not message_ids:
        return []
    if not native():
        return turns_around_orm(tenant=tenant, message_ids=message_ids)
    with connection.cursor() as cursor:
        cursor.execute(_turns_sql(), [tenant.pk, message_ids])
        return [dict(zip(TURN_KEYS, values, strict=True)) for values in cursor.fetchall()]


def turns_around_orm(*, tenant, message_ids) -> list[dict]:
    # (session, seq) → (source, whether the turn comes before it) for the sources it is next to (a turn between two is
    # next to both)
    around: dict[tuple, list] = {}
    messages = Message.objects.for_tenant(tenant)
    for pk, session_id, seq in messages.filter(pk__in=message_ids).values_list(
            "pk", "session_id", "seq"):
        for position, before in (((session_id, seq - 1), True), ((session_id, seq + 1), False)):
            around.setdefault(position, []).append((pk, before))
    if not around:
        return []
    cond = Q()
    for session_id, seq in around:
        cond |= Q(session_id=session_id, seq=seq)
    rows = messages.filter(cond).order_by().values(*TURN_KEYS[:-2])
    return [ids_as_text({**row, "around": pk, "before": before}, _ID_KEYS)
            for row in rows for pk, before in around[(row["session_id"], row["seq"])]]


@functools.cache
def _turns_sql() -> str:
    m, s = Message, Session
    cols = ", ".join([uuid_text(f"m.{column(m, 'id')}"), uuid_text(f"m.{column(m, 'session')}"),
                      *(f"m.{column(m, k)}" for k in ("seq", "role", "name", "content", "created_at")),
                      uuid_text(f"s.{column(s, 'user')}"), uuid_text(f"src.{column(m, 'id')}"),
                      f"m.{column(m, 'seq')} < src.{column(m, 'seq')}"])
    session, seq, tenant = column(m, "session"), column(m, "seq"), column(m, "tenant")
    return (f"SELECT {cols} FROM {table(m)} src "
            f"JOIN {table(m)} m ON m.{session} = src.{session} AND m.{tenant} = src.{tenant} "
            f"AND m.{seq} IN (src.{seq} - 1, src.{seq} + 1) "
            f"JOIN {table(s)} s ON s.{column(s, 'id')} = m.{session} "
            f"WHERE src.{tenant} = %s AND src.{column(m, 'id')} = ANY(%s::uuid[])")
