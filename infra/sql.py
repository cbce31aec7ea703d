"""What the hand-written SQL statements on the hot paths share: quoted names from the models, ids read as text."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from django.db import connection

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def native() -> bool:
    """Whether the hand-written statements apply (PostgreSQL); other databases read through the ORM."""
    return connection.vendor == "postgresql"


def column(model, name: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(name).column)


def table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def uuid_text(sql_column: str) -> str:
    return f"{sql_column}::text"


def ids_as_text(row: dict, keys) -> dict:
    """The row with the UUIDs under `keys` as strings, as the statements return them."""
    for key in keys:
        if isinstance(row.get(key), uuid.UUID):
            row[key] = str(row[key])
    return row


def epoch_micros(sql_column: str) -> str:
    """A timestamp as integer microseconds since the epoch: exact, and a plain int to load (the driver's time-zone
    loader costs more per row than the rest of a short statement)."""
    return f"(EXTRACT(EPOCH FROM {sql_column}) * 1000000)::bigint"


def from_micros(value: int | None) -> datetime | None:
    return None if value is None else _EPOCH + timedelta(microseconds=value)
