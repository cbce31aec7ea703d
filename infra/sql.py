"""What the hand-written SQL statements on the hot paths share: quoted names from the models, ids read as text."""
from __future__ import annotations

import uuid

from django.db import connection


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
