"""List columns and filters the memory admins share (history, review queue, and backoffice's memory list)."""
from __future__ import annotations

from django.contrib import admin

from tenants.admin import user_short

from .overview import said_by


class ConfidenceFilter(admin.SimpleListFilter):
    title = "confidence"
    parameter_name = "confidence"
    RANGES = {"low": (0.0, 0.5), "medium": (0.5, 0.8), "high": (0.8, 1.01)}

    def lookups(self, request, model_admin):
        return [("low", "below 0.5"), ("medium", "0.5 to 0.8"), ("high", "0.8 and above")]

    def queryset(self, request, queryset):
        bounds = self.RANGES.get(self.value())
        if not bounds:
            return queryset
        return queryset.filter(confidence__gte=bounds[0], confidence__lt=bounds[1])


def memory_text_short(text: str, limit: int = 90) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


class UserColumn:
    """The end user a row belongs to, short, ordered by name."""

    @admin.display(description="user", ordering="user__display_name")
    def user_column(self, obj):
        return user_short(obj.user)


class MemoryColumns(UserColumn):
    """A memory list's user and who said it (the user, the assistant, or inferred)."""

    @admin.display(description="said by", ordering="source_type")
    def said_by(self, obj):
        return said_by(obj.source_type)
