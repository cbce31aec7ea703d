"""The clock, injectable so tests can move time without patching internals."""
from __future__ import annotations

from datetime import datetime

from django.utils import timezone

_override: datetime | None = None


def now() -> datetime:
    return _override or timezone.now()


def set_now(value: datetime | None) -> None:
    global _override
    _override = value
