"""List columns and filters the memory admins share (history, review queue, and backoffice's memory list)."""
from __future__ import annotations

import uuid

from django.contrib import admin
from django.db.models import Count
from django.db.models.fields.json import KT

from infra.labels import label_cut
from memory.models import MemoryStatus
from memory.overview import DISTILLED, LAYER_LABELS, layer_of, layer_q, said_by

from .toolkit import user_short


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


class LayerFilter(admin.SimpleListFilter):
    """The memory list leads with the distilled memory; the transcript's passages and the session notes are a click
    away, each counted (active rows). A list opened from a count (a kind, a source, a status or a session picked)
    shows every layer, so it holds what was counted."""

    title = "layer"
    parameter_name = "layer"
    ALL = "all"
    EXPLICIT = ("kind__exact", "source_type__exact", "status__exact", "session__id__exact")

    def __init__(self, request, params, model, model_admin):
        self.explicit = any(p in request.GET for p in self.EXPLICIT)
        super().__init__(request, params, model, model_admin)

    def effective(self) -> str:
        value = self.value()
        if value in (*LAYER_LABELS, self.ALL):
            return value
        return self.ALL if self.explicit and value is None else DISTILLED

    def lookups(self, request, model_admin):
        qs = model_admin.get_queryset(request).filter(status=MemoryStatus.ACTIVE)
        user = request.GET.get("user__id__exact")
        try:
            qs = qs.filter(user__pk=uuid.UUID(user)) if user else qs
        except ValueError:
            qs = qs.none()
        counts = dict.fromkeys(LAYER_LABELS, 0)
        for row in qs.order_by().values("kind").annotate(note=KT("metadata__note"), n=Count("pk")):
            counts[layer_of(row["kind"], row["note"])] += row["n"]
        return [*((layer, f"{label} ({counts[layer]})") for layer, label in LAYER_LABELS.items()),
                (self.ALL, f"all ({sum(counts.values())} active)")]

    def choices(self, changelist):
        effective = self.effective()
        for value, label in self.lookup_choices:
            yield {"selected": effective == value, "display": label,
                   "query_string": changelist.get_query_string({self.parameter_name: value})}

    def queryset(self, request, queryset):
        layer = self.effective()
        return queryset if layer == self.ALL else queryset.filter(layer_q(layer))


def memory_text_short(text: str, limit: int = 90) -> str:
    return label_cut(text, limit)


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
