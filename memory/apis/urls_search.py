"""Routes for memory search (before the controls' detail route, which would take "search" as a memory id)."""
from django.urls import path

from .search import MemorySearchApi

urlpatterns = [
    path("users/<str:user_id>/memories/search", MemorySearchApi.as_view(), name="user-memories-search"),
]
