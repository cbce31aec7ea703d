"""Receipts of composed contexts: what memory a context included (rank, score parts, tokens, source messages) and
what it left out for budget; recorded after the turn, off the request thread; read per session, scoped to the
tenant; purged past the tenant's retention; erased with the user; shown in the admin beside each memory."""
from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.db import transaction

from infra import clock
from memory.actions import memory_create
from memory.sources import SourceMessage
from orchestration.messages import messages_append
from orchestration.models import ContextReceipt, ContextReceiptItem
from orchestration.receipts import receipts_purge, receipts_wait
from orchestration.sessions import session_open
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db(transaction=True)

TOPICS = ["hiking boots", "trail maps", "mountain huts", "camping stoves", "rain jackets", "water filters",
          "sleeping bags", "trekking poles", "head torches", "first aid kits", "tent pegs", "route planning"]


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True


@pytest.fixture
def remembered(alice, alice_user):
    """An earlier session whose messages are the sources of a dozen memories about one trip."""
    earlier, _ = session_open(tenant=alice, user=alice_user, title="trip planning")
    messages = messages_append(tenant=alice, session_id=earlier.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content=f"For the Alps hike I packed {t} and checked them twice.") for t in TOPICS])
    records = [memory_create(tenant=alice, user=alice_user, kind="fact", session_id=earlier.pk,
                             text=f"For the Alps hike Ada packed {t} and checked them twice.",
                             source=SourceMessage(id=str(m.pk), session_id=str(earlier.pk), created_at=m.created_at))
               for t, m in zip(TOPICS, messages)]
    # The session asked about; opening it closes the earlier one, whose finishing work is queued, not run here.
    current, _ = session_open(tenant=alice, user=alice_user)
    return {"records": records, "messages": {str(r.pk): str(m.pk) for r, m in zip(records, messages)},
            "session": current}


def _context(client, session, **params):
    from urllib.parse import urlencode

    return client.get(f"/api/v1/sessions/{session.pk}/context?{urlencode(params)}")


def test_a_context_leaves_a_receipt_of_what_went_in_and_what_was_left_out(alice, alice_user, alice_client, remembered,
                                                                         eager, settings):
    settings.CONTINUUM_CONTEXT_CAPS = {**settings.CONTINUUM_CONTEXT_CAPS, "memories": 150}
    session = remembered["session"]
    r0 = r = _context(alice_client, session, input="What did I pack for the Alps hike?", budget=1500)
    assert r.status_code == 200, r.content
    shown = [m["memory_id"] for m in r.json()["memories"]]
    assert shown

    r = alice_client.get(f"/api/v1/sessions/{session.pk}/receipts")
    assert r.status_code == 200, r.content
    [receipt] = r.json()["results"]
    assert receipt["surface"] == "context" and receipt["query"] == "What did I pack for the Alps hike?"
    assert receipt["budget"] == 1500 and receipt["total_tokens"] <= 1500
    retrieved = [i for i in receipt["included"] if i["section"] == "memories"]
    assert [i["memory_id"] for i in retrieved] == shown
    for item in retrieved:
        assert item["tokens"] > 0 and item["reason"] == ""
        assert {"dense", "keyword", "recency", "session_prior"} <= set(item["score_parts"])
        assert item["source_message_ids"][0] == remembered["messages"][item["memory_id"]]
    # A dozen matching memories do not fit a 150-token memory section: the rest are on the receipt as left out.
    assert receipt["left_out"]
    assert {i["reason"] for i in receipt["left_out"]} <= {"budget", "section_budget"}
    assert not {i["memory_id"] for i in receipt["left_out"] if i["section"] == "memories"} & set(shown)
    ranks = sorted(i["rank"] for i in receipt["included"] + receipt["left_out"] if i["section"] == "memories")
    assert ranks == list(range(1, len(ranks) + 1))
    # The standing profile went in too (the stated facts are the user's profile): the receipt lists what was shown
    # of it, in the profile's own order, and what its share of the budget could not hold.
    profile_shown = [p["memory_id"] for p in r0.json()["profile"]]
    assert profile_shown
    assert not set(profile_shown) & set(shown)  # what the profile shows, retrieval does not spend tokens on again
    profile_items = sorted((i for i in receipt["included"] + receipt["left_out"] if i["section"] == "profile"),
                           key=lambda i: i["rank"])
    assert [i["memory_id"] for i in profile_items if i["memory_id"] in profile_shown] == profile_shown
    assert all(i["tokens"] > 0 for i in profile_items)
    assert {i["memory_id"] for i in profile_items} <= {str(rec.pk) for rec in remembered["records"]}


def test_score_parts_add_up_to_the_score(alice, alice_user, remembered, eager):
    from memory.retrieval import memory_retrieve

    for m in memory_retrieve(tenant=alice, user=alice_user, query="Alps hike packed", k=5, rewrite=False):
        parts = m.score_parts
        total = parts["fused"] + parts["session_prior"] + sum(parts[k] for k in ("recency", "confidence",
                                                                                 "importance", "access"))
        assert abs(total - m.score) < 1e-3


def test_receipts_are_written_off_the_request_thread(alice, alice_user, alice_client, remembered, monkeypatch):
    """A broker that takes half a second to accept a receipt does not slow the context by half a second."""
    from orchestration import tasks

    published = []

    def slow_delay(payload):
        time.sleep(0.5)
        published.append(payload)

    monkeypatch.setattr(tasks.context_receipt_write_task, "delay", slow_delay)
    session = remembered["session"]
    _context(alice_client, session, input="warm up")
    receipts_wait()
    started = time.perf_counter()
    r = _context(alice_client, session, input="What did I pack for the Alps hike?")
    elapsed = time.perf_counter() - started
    assert r.status_code == 200
    assert elapsed < 0.45, elapsed
    receipts_wait()
    assert len(published) == 2 and published[-1]["session_id"] == str(session.pk)


def test_receipts_off_records_nothing(alice, alice_user, alice_client, remembered, eager, settings):
    settings.CONTINUUM_RECEIPTS = False
    session = remembered["session"]
    assert _context(alice_client, session, input="Alps hike").status_code == 200
    assert not ContextReceipt.objects.for_tenant(alice).exists()


def test_a_task_that_runs_twice_writes_one_receipt(alice, alice_user, alice_client, remembered, monkeypatch):
    from orchestration import tasks
    from orchestration.receipts import receipt_write

    payloads = []
    monkeypatch.setattr(tasks.context_receipt_write_task, "delay", payloads.append)
    session = remembered["session"]
    _context(alice_client, session, input="Alps hike")
    receipts_wait()
    [payload] = payloads
    payload = json.loads(json.dumps(payload))  # as a broker hands it over
    first = receipt_write(payload=payload)
    again = receipt_write(payload=payload)
    assert str(first.pk) == str(again.pk)
    assert ContextReceipt.objects.for_tenant(alice).count() == 1
    assert ContextReceiptItem.objects.for_tenant(alice).count() == first.included_count + first.left_out_count > 0


def test_the_receipt_task_counts_the_included_memories_accesses_once(alice, alice_user, alice_client, remembered,
                                                                     monkeypatch):
    """One hand-off per context: the receipt's task counts the accesses (none from retrieval itself), and a rerun of
    the task counts nothing twice."""
    from memory import tasks as memory_tasks
    from memory.models import MemoryRecord
    from orchestration import tasks
    from orchestration.receipts import receipt_write

    payloads, access_tasks = [], []
    monkeypatch.setattr(tasks.context_receipt_write_task, "delay", payloads.append)
    monkeypatch.setattr(memory_tasks.memory_access_record_task, "delay", lambda *a: access_tasks.append(a))
    monkeypatch.setattr(memory_tasks.memory_access_record_task, "apply_async", lambda *a, **k: access_tasks.append(a))
    r = _context(alice_client, remembered["session"], input="What did I pack for the Alps hike?")
    shown = {m["memory_id"] for m in r.json()["memories"]}
    receipts_wait()
    assert shown and not access_tasks
    [payload] = payloads
    payload = json.loads(json.dumps(payload))
    receipt_write(payload=payload)
    receipt_write(payload=payload)
    counts = dict(MemoryRecord.objects.for_tenant(alice).values_list("id", "access_count"))
    assert {str(k) for k, n in counts.items() if n} == shown
    assert all(n in (0, 1) for n in counts.values())


def test_without_receipts_retrieval_counts_the_accesses_itself(alice, alice_user, alice_client, remembered, eager,
                                                               settings):
    from memory.models import MemoryRecord

    settings.CONTINUUM_RECEIPTS = False
    r = _context(alice_client, remembered["session"], input="What did I pack for the Alps hike?")
    shown = {m["memory_id"] for m in r.json()["memories"]}
    counts = dict(MemoryRecord.objects.for_tenant(alice).values_list("id", "access_count"))
    assert shown and {str(k) for k, n in counts.items() if n} == shown


def test_receipts_of_another_tenants_session_are_404(alice, alice_user, alice_client, bob_client, remembered, eager):
    session = remembered["session"]
    _context(alice_client, session, input="Alps hike")
    assert bob_client.get(f"/api/v1/sessions/{session.pk}/receipts").status_code == 404
    assert bob_client.get("/api/v1/sessions/not-a-uuid/receipts").status_code == 404
    assert len(alice_client.get(f"/api/v1/sessions/{session.pk}/receipts").json()["results"]) == 1


def test_mcp_and_assistant_surfaces_name_themselves(alice, alice_user, remembered, eager):
    from orchestration.context import turn_context

    session = remembered["session"]

    with transaction.atomic():
        turn_context(tenant=alice, session=session, new_input="Alps hike", surface="mcp")
    assert list(ContextReceipt.objects.for_tenant(alice).values_list("surface", flat=True)) == ["mcp"]


def test_receipts_past_the_tenants_retention_are_purged(alice, alice_user, alice_client, remembered, eager):
    session = remembered["session"]
    _context(alice_client, session, input="Alps hike")
    _context(alice_client, session, input="trail maps")
    old, new = ContextReceipt.objects.for_tenant(alice).order_by("created_at")
    ContextReceipt.objects.for_tenant(alice).filter(pk=old.pk).update(created_at=clock.now() - timedelta(days=8))
    alice.receipt_retention_days = 10
    assert receipts_purge(tenant=alice) == {"deleted": 0, "more": False}
    alice.receipt_retention_days = 7
    assert receipts_purge(tenant=alice) == {"deleted": 1, "more": False}
    assert list(ContextReceipt.objects.for_tenant(alice).values_list("pk", flat=True)) == [new.pk]
    assert not ContextReceiptItem.objects.for_tenant(alice).filter(receipt_id=old.pk).exists()


def test_erasing_the_user_erases_their_receipts(alice, alice_user, alice_client, remembered, eager):
    from orchestration.erasure import user_erase

    session = remembered["session"]
    _context(alice_client, session, input="Alps hike")
    assert ContextReceipt.objects.for_tenant(alice).exists()
    user_erase(tenant=alice, user=alice_user)
    assert not ContextReceipt.objects.for_tenant(alice).exists()
    assert not ContextReceiptItem.objects.for_tenant(alice).exists()


def test_a_receipt_for_a_session_erased_meanwhile_is_not_written(alice, alice_user, alice_client, remembered,
                                                                  monkeypatch):
    from orchestration import tasks
    from orchestration.erasure import user_erase
    from orchestration.receipts import receipt_write

    payloads = []
    monkeypatch.setattr(tasks.context_receipt_write_task, "delay", payloads.append)
    session = remembered["session"]
    _context(alice_client, session, input="Alps hike")
    receipts_wait()
    user_erase(tenant=alice, user=alice_user)
    assert receipt_write(payload=payloads[0]) is None
    assert not ContextReceipt.objects.for_tenant(alice).exists()


def test_the_admin_shows_how_often_a_memory_was_used_and_links_its_receipts(alice, alice_user, alice_client,
                                                                            remembered, eager, admin_client):
    session = remembered["session"]
    for question in ("What did I pack for the Alps hike?", "Alps hike packing again"):
        _context(alice_client, session, input=question)
    item = ContextReceiptItem.objects.for_tenant(alice).filter(included=True).order_by("receipt__created_at").last()
    turns = ContextReceiptItem.objects.for_tenant(alice).filter(memory_uuid=item.memory_uuid, included=True) \
        .values("receipt").distinct().count()
    last = ContextReceipt.objects.for_tenant(alice).get(pk=item.receipt_id).created_at
    page = admin_client.get(f"/admin/memory/memoryrecord/{item.memory_uuid}/change/").content.decode()
    assert f"used in {turns} turns, last on {last:%d %b %Y %H:%M}" in page
    assert f"/admin/orchestration/contextreceipt/?memory={item.memory_uuid}" in page
    listing = admin_client.get(f"/admin/orchestration/contextreceipt/?memory={item.memory_uuid}")
    assert listing.status_code == 200
    assert listing.context["cl"].result_count == turns
    detail = admin_client.get(f"/admin/orchestration/contextreceipt/{item.receipt_id}/change/")
    assert detail.status_code == 200 and item.text[:40] in detail.content.decode()


def test_the_one_statement_write_stores_what_the_orm_path_stores(alice, alice_user, alice_client, remembered,
                                                                  monkeypatch):
    """On PostgreSQL a receipt and its items go in as one statement; elsewhere through the ORM. Both must leave the
    same rows (the ORM path is the reference)."""
    from django.db import connection

    from orchestration import receipts, tasks

    assert connection.vendor == "postgresql"  # the suite runs on PostgreSQL, so the statement is the path compared
    payloads = []
    monkeypatch.setattr(tasks.context_receipt_write_task, "delay", payloads.append)
    _context(alice_client, remembered["session"], input="What did I pack for the Alps hike?", budget=1500)
    receipts_wait()
    [payload] = payloads
    payload = json.loads(json.dumps(payload))
    assert len(payload["items"]) > 1

    def written(receipt_id: str) -> tuple:
        receipt = ContextReceipt.objects.for_tenant(alice).values().get(pk=receipt_id)
        items = list(ContextReceiptItem.objects.for_tenant(alice).filter(receipt_id=receipt_id)
                     .order_by("rank").values())
        for row in (receipt, *items):
            row.pop("id", None)
            row.pop("receipt_id", None)
        return receipt, items

    native = receipts._receipt_rows_write(dict(payload, id="00000000-0000-4000-8000-000000000001"))
    monkeypatch.setattr(receipts, "native", lambda: False)
    orm = receipts._receipt_rows_write(dict(payload, id="00000000-0000-4000-8000-000000000002"))
    assert written(str(native.pk)) == written(str(orm.pk))
    assert (native.included_count, native.left_out_count) == (orm.included_count, orm.left_out_count)
    assert native.created_at == orm.created_at
    # A rerun of the same id writes nothing more and hands back what stands.
    again = receipts._receipt_rows_write(dict(payload, id=str(native.pk)))
    assert str(again.pk) == str(native.pk)
    assert ContextReceipt.objects.for_tenant(alice).count() == 2
