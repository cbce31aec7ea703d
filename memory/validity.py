"""A memory's validity in time: the `as_of` instant a retrieval asks about, read from what a caller sends."""
from __future__ import annotations

from datetime import date, datetime, time, timezone

from infra.errors import ValidationFailed


def as_of_parse(value) -> datetime | None:
    """An ISO 8601 date or date-time as an aware instant; None for nothing. A bare date means the end of that day
    (UTC): what held on that day, corrections made during it included. A time without a zone is UTC."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime.combine(value, time.max)
    else:
        text = str(value).strip()
        try:
            parsed = datetime.combine(date.fromisoformat(text), time.max) if len(text) == 10 else \
                datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationFailed("as_of must be an ISO 8601 date or date-time, e.g. 2024-03-31 or "
                                   "2024-03-31T12:00:00Z.", code="invalid_as_of", details={"as_of": text[:64]})
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
