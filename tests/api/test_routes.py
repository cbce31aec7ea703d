"""The REST surface's routes: one view per route name, the fixed routes under a user's memories before a memory's own
page, and a memory's page answering every id, well formed or not, from its one view."""
from __future__ import annotations

import uuid

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from api import memories, portable, search
from api.openai import urls as openai_urls
from api.urls import urlpatterns

pytestmark = pytest.mark.django_db


def _names(patterns) -> list[str]:
    names = []
    for p in patterns:
        if isinstance(p, URLResolver):
            names += _names(p.url_patterns)
        elif isinstance(p, URLPattern) and p.name:
            names.append(p.name)
    return names


def test_every_route_name_is_defined_once():
    for names in (_names(urlpatterns) + _names(openai_urls.urlpatterns), _names(get_resolver().url_patterns)):
        assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_a_users_memory_routes_resolve_to_their_own_views():
    user, memory = uuid.uuid4(), uuid.uuid4()
    base = f"/api/v1/users/{user}/memories"
    assert resolve(base).func.view_class is memories.UserMemoryListApi
    assert resolve(f"{base}/search").func.view_class is search.MemorySearchApi
    assert resolve(f"{base}/export").func.view_class is memories.UserMemoryExportApi
    assert resolve(f"{base}/export.jsonl").func.view_class is portable.UserMemoriesPortableExportApi
    assert resolve(f"{base}/bulk-delete").func.view_class is memories.UserMemoryBulkDeleteApi
    for memory_id in (str(memory), memory.hex, "not-a-memory"):
        match = resolve(f"{base}/{memory_id}")
        assert (match.func.view_class, match.url_name) == (memories.UserMemoryDetailApi, "user-memory-detail")


@pytest.mark.parametrize("method", ["get", "patch", "delete"])
@pytest.mark.parametrize("memory_id", ["not-a-memory", str(uuid.uuid4())])
def test_a_memory_id_that_is_no_memory_is_the_views_404(alice_client, alice_user, method, memory_id):
    r = getattr(alice_client, method)(f"/api/v1/users/{alice_user.pk}/memories/{memory_id}", {"text": "x"},
                                      format="json")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    assert r.json()["error"]["message"] == "Memory not found."
