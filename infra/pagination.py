"""Cursor pagination whose bad cursors are a 400, not a 404."""
from __future__ import annotations

from rest_framework.pagination import CursorPagination

from .errors import ValidationFailed


class Cursor(CursorPagination):
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
    ordering = "-created_at"

    def decode_cursor(self, request):
        try:
            return super().decode_cursor(request)
        except Exception as exc:
            raise ValidationFailed("Invalid cursor.", code="invalid_cursor") from exc

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        try:
            value = int(raw)
        except ValueError:
            raise ValidationFailed("limit must be an integer.", code="invalid_limit")
        if value < 1:
            raise ValidationFailed("limit must be at least 1.", code="invalid_limit")
        return min(value, self.max_page_size)


def paginate(view, request, queryset, serializer_class, *, ordering: str):
    paginator = Cursor()
    paginator.ordering = ordering
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)
