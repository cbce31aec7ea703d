"""The database reads on a retrieval's hot path: the shortlisted memories, each with its session's number among its
user's sessions (the turns next to the best hits are the conversations' read, sessions.turn_reads).

On PostgreSQL each is one statement with its id lists bound as arrays. Through the ORM the same reads cost about
three times the statement itself (an IN list of up to ~120 ids compiled and quoted on every call, a dict built per
row), and they run on every turn. Other databases use the ORM. Both paths filter by tenant first and return the same
rows with the same keys (tests compare them on PostgreSQL).

The shortlist is read without its source turns: only the few best events are shown with their neighbours, so the
messages table is read for those alone, not for every shortlisted memory. Ids come back as
strings and times are read as integer microseconds: the driver's UUID and time-zone loaders cost more per row than
the rest of the statement on a shortlist of a hundred memories.
"""
from __future__ import annotations

import functools
import json

from django.db import connection
from django.db.models import Q
from django.db.models.fields.json import KeyTransform

from infra.sql import column, epoch_micros, from_micros, ids_as_text, native, table, uuid_text

from ..models import NOTE_TOPIC_LABEL, MemoryKind, MemoryRecord, MemoryStatus

# A memory's session is its provenance foreign key; its model is reached through that field, so the numbering
# reads the sessions table without memory depending on the sessions app's code.
Session = MemoryRecord._meta.get_field("session").related_model

MEMORY_KEYS = ("id", "user_id", "kind", "text", "source_type", "created_at", "session_id", "source_message_id",
               "source_message_ids", "confidence", "importance", "access_count", "extractor", "dates", "passage",
               "session_number")
# The keys read straight from a memory's columns; the last three of MEMORY_KEYS are derived in the read itself.
_COLUMN_KEYS = MEMORY_KEYS[:-3]
_ID_KEYS = ("id", "user_id", "session_id", "source_message_id")
# A session note's topics line ("Topics: invoices, caching, ...") names what a session was about and cites the turns
# that use those words, but holds none of what they say: read as evidence it spends the budget and stands in for
# turns whose own words then do not come back. It stays in the note (the API, the admin); retrieval leaves it out
# (NOTE_TOPIC_LABEL).


def memory_rows(*, tenant, user_ids: list[str], memory_ids: list[str], now, as_of=None,
                replaced: bool = False) -> dict[str, dict]:
    """Active, unexpired memories among `memory_ids` of these users of this tenant, by id, as MEMORY_KEYS dicts
    (ids as strings). `session_number` is the memory's session's ordinal among its user's sessions, oldest first
    (the user's "session 3"); None without a session.

    as_of: instead, the memories valid at that time (superseded ones included), each with valid_from and valid_to;
    replaced: the superseded memories too, whenever they held, each with valid_from and valid_to (a question
    about what a value was before it changed). A question about the past is rare, so both take the ORM path."""
    if not memory_ids or not user_ids:
        return {}
    if as_of is not None or replaced or not native():
        return {r["id"]: r for r in memory_rows_orm(tenant=tenant, user_ids=user_ids, memory_ids=memory_ids,
                                                         now=now, as_of=as_of, replaced=replaced)}
    with connection.cursor() as cursor:
        cursor.execute(_memory_sql(), [tenant.pk, list(user_ids), tenant.pk, list(user_ids), list(memory_ids),
                                       MemoryStatus.ACTIVE, now, MemoryKind.NOTE, NOTE_TOPIC_LABEL])
        rows = [dict(zip(MEMORY_KEYS, values, strict=True)) for values in cursor.fetchall()]
    for row in rows:
        row["created_at"] = from_micros(row["created_at"])
        for key in ("dates", "passage"):
            if isinstance(row[key], str):  # Django has psycopg hand jsonb over as text; JSONField would parse it
                row[key] = json.loads(row[key])
    return {r["id"]: r for r in rows}


def memory_rows_orm(*, tenant, user_ids, memory_ids, now, as_of=None, replaced: bool = False) -> list[dict]:
    past = as_of is not None or replaced
    statuses = [MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED] if past else [MemoryStatus.ACTIVE]
    found = (MemoryRecord.objects.for_tenant(tenant).filter(user_id__in=user_ids, pk__in=memory_ids,
                                                            status__in=statuses)
             .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
             .exclude(kind=MemoryKind.NOTE, metadata__note=NOTE_TOPIC_LABEL))
    keys = (*_COLUMN_KEYS, "valid_from", "valid_to") if past else _COLUMN_KEYS
    if as_of is not None:
        found = found.filter(Q(valid_from__isnull=True) | Q(valid_from__lte=as_of),
                             Q(valid_to__isnull=True) | Q(valid_to__gt=as_of))
    rows = [ids_as_text(row, _ID_KEYS) for row in
            found.order_by()  # the rows are looked up by id: sorting them is wasted work
            .values(*keys, dates=KeyTransform("dates", "metadata"), passage=KeyTransform("passage", "metadata"))]
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
        col = f"r.{column(r, key)}"
        if key in _ID_KEYS:
            col = uuid_text(col)
        elif key == "created_at":
            col = epoch_micros(col)
        elif key == "source_message_ids":
            # A text[] the driver loads natively: a JSON document per row costs a json.loads each. Anything but a
            # JSON array (a stored null) reads as no list, as the ORM path reads it.
            col = f"CASE WHEN jsonb_typeof({col}) = 'array' THEN ARRAY(SELECT jsonb_array_elements_text({col})) END"
        cols.append(col)
    # Of the metadata, only the dates a memory's words refer to are shown (its provenance line).
    cols.append(f"r.{column(r, 'metadata')} -> 'dates'")
    # A passage's position in its message: passages of one long message are separate memories.
    cols.append(f"r.{column(r, 'metadata')} -> 'passage'")
    user, opened, pk = column(s, "user"), column(s, "opened_at"), column(s, "id")
    # The users' sessions numbered in the same statement: one round trip fewer on every retrieval.
    return (f"WITH numbered AS (SELECT {pk} AS id, "
            f"ROW_NUMBER() OVER (PARTITION BY {user} ORDER BY {opened}, {pk})::integer AS n "
            f"FROM {table(s)} WHERE {column(s, 'tenant')} = %s AND {user} = ANY(%s::uuid[])) "
            f"SELECT {', '.join(cols)}, numbered.n FROM {table(r)} r "
            f"LEFT JOIN numbered ON numbered.id = r.{column(r, 'session')} "
            f"WHERE r.{column(r, 'tenant')} = %s AND r.{column(r, 'user')} = ANY(%s::uuid[]) "
            f"AND r.{column(r, 'id')} = ANY(%s::uuid[]) "
            f"AND r.{column(r, 'status')} = %s "
            f"AND (r.{column(r, 'expires_at')} IS NULL OR r.{column(r, 'expires_at')} > %s) "
            f"AND NOT (r.{column(r, 'kind')} = %s AND COALESCE(r.{column(r, 'metadata')} ->> 'note', '') = %s)")


def turn_event_ids(*, tenant, user_ids: list[str], message_ids, now) -> dict[str, list[str]]:
    """The active, unexpired episodic memories of these messages (a message's words, or its passages), by message."""
    out: dict[str, list[str]] = {}
    if not message_ids or not user_ids:
        return out
    found = (MemoryRecord.objects.for_tenant(tenant)
             .filter(user_id__in=user_ids, kind=MemoryKind.EVENT, status=MemoryStatus.ACTIVE,
                     source_message_id__in=list(message_ids))
             .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
             .order_by().values_list("id", "source_message_id"))
    for mid, message_id in found:
        out.setdefault(str(message_id), []).append(str(mid))
    return out


def replacing_ids(*, tenant, memory_ids: list[str]) -> set[str]:
    """Those of `memory_ids` that superseded another memory (the current value of something that changed)."""
    if not memory_ids:
        return set()
    return {str(mid) for mid in MemoryRecord.objects.for_tenant(tenant)
            .filter(superseded_by_id__in=list(memory_ids)).values_list("superseded_by_id", flat=True).distinct()}


def session_numbers_orm(*, tenant, user_ids) -> dict[str, int]:
    """Each session's ordinal among its user's sessions, oldest first, by session id."""
    numbers: dict[str, int] = {}
    counters: dict[str, int] = {}
    rows = (Session.objects.for_tenant(tenant).filter(user_id__in=list(user_ids))
            .order_by("opened_at", "id").values_list("id", "user_id"))
    for sid, uid in rows:
        counters[uid] = counters.get(uid, 0) + 1
        numbers[str(sid)] = counters[uid]
    return numbers
