"""The database reads on a retrieval's hot path: the shortlisted memories (each with its session's number among its
user's sessions), and the turns next to the best hits.

On PostgreSQL each is one statement with its id lists bound as arrays. Through the ORM the same reads cost about
three times the statement itself (an IN list of up to ~120 ids compiled and quoted on every call, a dict built per
row), and they run on every turn. Other databases use the ORM. Both paths filter by tenant first and return the same
rows with the same keys (tests compare them on PostgreSQL).

The shortlist is read without its source turns: only the few best events are shown with their neighbours, so the
messages table is joined for those alone (`turns_around`), not for every shortlisted memory. Ids come back as
strings and times are read as integer microseconds: the driver's UUID and time-zone loaders cost more per row than
the rest of the statement on a shortlist of a hundred memories.
"""
from __future__ import annotations

import functools
import json
import uuid
from datetime import datetime, timedelta, timezone

from django.db import connection
from django.db.models import Q
from django.db.models.fields.json import KeyTransform

from sessions.models import Message, Session

from .models import MemoryRecord, MemoryStatus

MEMORY_KEYS = ("id", "user_id", "kind", "text", "source_type", "created_at", "session_id", "source_message_id",
               "source_message_ids", "confidence", "importance", "access_count", "dates", "session_number")
# The keys read straight from a memory's columns; the last two of MEMORY_KEYS are derived in the read itself.
_COLUMN_KEYS = MEMORY_KEYS[:-2]
TURN_KEYS = ("pk", "session_id", "seq", "role", "name", "content", "session__user_id", "around")
_ID_KEYS = ("id", "user_id", "session_id", "source_message_id", "pk", "session__user_id", "around")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _column(model, name: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(name).column)


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _native() -> bool:
    return connection.vendor == "postgresql"


def _ids_as_text(row: dict) -> dict:
    for key in _ID_KEYS:
        if isinstance(row.get(key), uuid.UUID):
            row[key] = str(row[key])
    return row


def _uuid_text(sql_column: str) -> str:
    return f"{sql_column}::text"


def _micros(sql_column: str) -> str:
    """A timestamp as integer microseconds since the epoch: exact, and a plain int to load."""
    return f"(EXTRACT(EPOCH FROM {sql_column}) * 1000000)::bigint"


def _from_micros(value):
    return None if value is None else _EPOCH + timedelta(microseconds=value)


def memory_rows(*, tenant, user_ids: list[str], memory_ids: list[str], now) -> dict[str, dict]:
    """Active, unexpired memories among `memory_ids` of these users of this tenant, by id, as MEMORY_KEYS dicts
    (ids as strings). `session_number` is the memory's session's ordinal among its user's sessions, oldest first
    (the user's "session 3"); None without a session."""
    if not memory_ids or not user_ids:
        return {}
    if not _native():
        return {r["id"]: r for r in memory_rows_orm(tenant=tenant, user_ids=user_ids, memory_ids=memory_ids,
                                                         now=now)}
    with connection.cursor() as cursor:
        cursor.execute(_memory_sql(), [tenant.pk, list(user_ids), tenant.pk, list(user_ids), list(memory_ids),
                                       MemoryStatus.ACTIVE, now])
        rows = [dict(zip(MEMORY_KEYS, values, strict=True)) for values in cursor.fetchall()]
    for row in rows:
        row["created_at"] = _from_micros(row["created_at"])
        if isinstance(row["dates"], str):  # Django has psycopg hand jsonb over as text; JSONField would parse it
            row["dates"] = json.loads(row["dates"])
    return {r["id"]: r for r in rows}


def memory_rows_orm(*, tenant, user_ids, memory_ids, now) -> list[dict]:
    rows = [_ids_as_text(row) for row in
            MemoryRecord.objects.filter(tenant=tenant, user_id__in=user_ids, pk__in=memory_ids,
                                        status=MemoryStatus.ACTIVE)
            .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
            .order_by()  # the rows are looked up by id: sorting them is wasted work
            .values(*_COLUMN_KEYS, dates=KeyTransform("dates", "metadata"))]
    numbers = session_numbers_orm(tenant=tenant, user_ids=user_ids) if rows else {}
    for row in rows:
        ids = row["source_message_ids"]
        row["source_message_ids"] = [str(m) for m in ids] if isinstance(ids, list) else None
        row["session_number"] = numbers.get(row["session_id"])
    return rows


@functools.cache
def _memory_sql() -> str:
    r, s = MemoryRecord, Session
    cols = []
    for key in _COLUMN_KEYS:
        col = f"r.{_column(r, key)}"
        if key in _ID_KEYS:
            col = _uuid_text(col)
        elif key == "created_at":
            col = _micros(col)
        elif key == "source_message_ids":
            # A text[] the driver loads natively: a JSON document per row costs a json.loads each. Anything but a
            # JSON array (a stored null) reads as no list, as the ORM path reads it.
            col = f"CASE WHEN jsonb_typeof({col}) = 'array' THEN ARRAY(SELECT jsonb_array_elements_text({col})) END"
        cols.append(col)
    # Of the metadata, only the dates a memory's words refer to are shown (its provenance line).
    cols.append(f"r.{_column(r, 'metadata')} -> 'dates'")
    user, opened, pk = _column(s, "user"), _column(s, "opened_at"), _column(s, "id")
    # The users' sessions numbered in the same statement: one round trip fewer on every retrieval.
    return (f"WITH numbered AS (SELECT {pk} AS id, "
            f"ROW_NUMBER() OVER (PARTITION BY {user} ORDER BY {opened}, {pk})::integer AS n "
            f"FROM {_table(s)} WHERE {_column(s, 'tenant')} = %s AND {user} = ANY(%s::uuid[])) "
            f"SELECT {', '.join(cols)}, numbered.n FROM {_table(r)} r "
            f"LEFT JOIN numbered ON numbered.id = r.{_column(r, 'session')} "
            f"WHERE r.{_column(r, 'tenant')} = %s AND r.{_column(r, 'user')} = ANY(%s::uuid[]) "
            f"AND r.{_column(r, 'id')} = ANY(%s::uuid[]) "
            f"AND r.{_column(r, 'status')} = %s "
            f"AND (r.{_column(r, 'expires_at')} IS NULL OR r.{_column(r, 'expires_at')} > %s)")


def turns_around(*, tenant, message_ids: list[str]) -> list[dict]:
    """The turns right before and after each of these messages of this tenant, in the same session, as TURN_KEYS
    dicts (ids as strings); `around` names the message a turn is next to."""
    message_ids = list(dict.fromkeys(str(m) for m in message_ids))
    if not message_ids:
        return []
    if not _native():
        return turns_around_orm(tenant=tenant, message_ids=message_ids)
    with connection.cursor() as cursor:
        cursor.execute(_turns_sql(), [tenant.pk, message_ids])
        return [dict(zip(TURN_KEYS, values, strict=True)) for values in cursor.fetchall()]


def turns_around_orm(*, tenant, message_ids) -> list[dict]:
    around: dict[tuple, list] = {}  # (session, seq) → the sources it is next to (a turn between two is next to both)
    for pk, session_id, seq in Message.objects.filter(tenant=tenant, pk__in=message_ids).values_list(
            "pk", "session_id", "seq"):
        for position in ((session_id, seq - 1), (session_id, seq + 1)):
            around.setdefault(position, []).append(pk)
    if not around:
        return []
    cond = Q()
    for session_id, seq in around:
        cond |= Q(session_id=session_id, seq=seq)
    rows = Message.objects.filter(cond, tenant=tenant).order_by().values(*TURN_KEYS[:-1])
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


def session_numbers_orm(*, tenant, user_ids) -> dict[str, int]:
    """Each session's ordinal among its user's sessions, oldest first, by session id."""
    numbers: dict[str, int] = {}
    counters: dict[str, int] = {}
    rows = (Session.objects.filter(tenant=tenant, user_id__in=list(user_ids))
            .order_by("opened_at", "id").values_list("id", "user_id"))
    for sid, uid in rows:
        counters[uid] = counters.get(uid, 0) + 1
        numbers[str(sid)] = counters[uid]
    return numbers
