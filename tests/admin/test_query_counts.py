"""What each reviewer's page costs in queries, for a user with something of everything: each stays within
PAGE_QUERIES_MAX (run with -s to see the table). That no page's cost grows with its rows is
tests/memory/test_admin_pages.py's test_every_page_renders_and_costs_no_query_per_row."""
from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from memory.models import MemoryEvent
from tests.admin.admin_world import admin_world, form_of, post_data

pytestmark = pytest.mark.django_db

# The session page, with its transcript, bridge and three inlines (anchors, links each way), is the dearest.
PAGE_QUERIES_MAX = 14


def _pages(tenant, user, w) -> dict[str, str]:
    memory = w["boston"]
    event = MemoryEvent.objects.for_tenant(tenant).filter(memory_uuid=memory.pk).first()
    return {
        "user page (distilled)": f"/admin/tenants/enduser/{user.pk}/change/",
        "user page (passages tab)": f"/admin/tenants/enduser/{user.pk}/change/?tab=passages",
        "user page (notes tab)": f"/admin/tenants/enduser/{user.pk}/change/?tab=notes",
        "user list": f"/admin/tenants/enduser/?tenant={tenant.pk}",
        "memory list of the user": f"/admin/memory/memoryrecord/?user__id__exact={user.pk}",
        "memory list, passages": f"/admin/memory/memoryrecord/?user__id__exact={user.pk}&layer=passages",
        "memory page": f"/admin/memory/memoryrecord/{memory.pk}/change/",
        "memory history": f"/admin/memory/memoryrecord/{memory.pk}/history/",
        "review queue": f"/admin/memory/memoryreview/?tenant={tenant.pk}",
        "review queue of the user": f"/admin/memory/memoryreview/?user__id__exact={user.pk}",
        "stored twice": f"/admin/memory/memoryreview/duplicates/{user.pk}/",
        "events": f"/admin/memory/memoryevent/?user__id__exact={user.pk}",
        "event page": f"/admin/memory/memoryevent/{event.pk}/change/",
        "receipts": f"/admin/orchestration/contextreceipt/?tenant={tenant.pk}",
        "receipt page": f"/admin/orchestration/contextreceipt/{w['receipt'].pk}/change/",
        "session page": f"/admin/chat_sessions/session/{w['earlier'].pk}/change/",
        "message page": f"/admin/chat_sessions/message/{w['messages'][0].pk}/change/",
        "tenant page": f"/admin/tenants/tenant/{tenant.pk}/change/",
        "user erase confirmation": f"/admin/tenants/enduser/{user.pk}/delete/",
    }


def test_every_reviewers_page_stays_within_its_query_budget(alice, dana, root):
    w = admin_world(alice, dana)
    client = Client()
    client.force_login(root)
    client.get("/admin/")  # the session and the site's caches are warm before anything is counted
    counts = {}
    for name, url in _pages(alice, dana, w).items():
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            r = client.get(url)
            ms = (time.perf_counter() - start) * 1000
        assert r.status_code == 200, (name, r.status_code)
        counts[name] = (len(ctx.captured_queries), ms)
    url = f"/admin/tenants/tenant/{alice.pk}/change/"
    data = post_data(form_of(client.get(url).content.decode(), "tenant_form").data)
    with CaptureQueriesContext(connection) as ctx:
        start = time.perf_counter()
        r = client.post(url, {**data, "_save": "Save"})
        ms = (time.perf_counter() - start) * 1000
    assert r.status_code == 302
    counts["tenant save (POST)"] = (len(ctx.captured_queries), ms)
    print("\n" + "\n".join(f"{n:<28} {q:>3} queries {ms:7.1f} ms" for n, (q, ms) in counts.items()))
    over = {n: q for n, (q, _) in counts.items() if q > PAGE_QUERIES_MAX}
    assert not over, over
