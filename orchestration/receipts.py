"""Receipts of composed contexts: what long-term memory each context handed the model (rank, score parts, token
cost, source messages) and what was ranked in but left out for budget.

Recording never writes on the request path: the composer's caller builds the receipt as plain data, and after
commit a background thread hands it to a task (context_receipt_write_task) that writes the rows. The turn pays for
building a small dict; a slow or unreachable broker delays or loses a receipt, never a reply. The receipt's id is
chosen when it is built, so a task that runs twice writes it once.
"""
from __future__ import annotations

import functools
import json
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Max

from infra import clock
from infra.sql import column, native, table
from infra.task_queue import task_get
from infra.tokens import count_tokens
from memory.actions import memory_access_record
from memory.profile import profile_line
from tenants.models import Tenant

from .models import ContextReceipt, ContextReceiptItem

log = logging.getLogger(__name__)

TEXT_CHARS = 500  # what a receipt keeps of a memory's text: enough to see what the model read
QUERY_CHARS = 2000
PENDING_MAX = 1000  # receipts waiting for the broker; beyond this a receipt is dropped (logged), never waited for


def _item(m, *, rank: int, included: bool, reason: str, section: str = "memories") -> dict:
    sources = [str(i) for i in (m.source_message_ids or ([m.source_message_id] if m.source_message_id else []))]
    sources += [str(i) for i in (getattr(m, "neighbour_message_ids", None) or []) if str(i) not in sources]
    return {"memory_id": str(m.memory_id), "included": included, "reason": reason, "section": section,
            "rank": rank, "kind": m.kind or "", "text": (m.text or "")[:TEXT_CHARS], "score": float(m.score or 0.0),
            "score_parts": dict(getattr(m, "score_parts", None) or {}), "tokens": int(m.token_count or 0),
            "source_message_ids": sources}


def _profile_items(entries: list, *, shown: list) -> list[dict]:
    """The standing profile's entries, ranked in the profile's own order (most binding first): it is chosen by kind,
    not scored against the query, so its ranks and score parts stand apart from retrieval's."""
    kept = {e.memory_id for e in shown}
    return [{"memory_id": e.memory_id, "included": e.memory_id in kept,
             "reason": "" if e.memory_id in kept else ContextReceiptItem.Reason.SECTION_BUDGET.value,
             "section": "profile", "rank": rank, "kind": e.kind, "text": (e.text or "")[:TEXT_CHARS], "score": 0.0,
             "score_parts": {}, "tokens": count_tokens(profile_line(e)),
             "source_message_ids": [e.source_message_id] if e.source_message_id else []}
            for rank, e in enumerate(entries, 1)]


def receipt_build(*, tenant, session, surface: str, query: str, ctx, retrieved: list, left_out: list,
                  profile: list | None = None) -> dict:
    """The receipt of one composed context as JSON-ready data.

    retrieved: what retrieval returned (best first); ctx.memories: those the composer kept; left_out: those
    retrieval ranked in but could not fit. Ranks run over all of them by score, best first. profile: the standing
    profile's candidates (ctx.profile: those shown), recorded as their own section with their own ranks."""
    kept = {str(m.memory_id) for m in ctx.memories}
    rows = [(m, True, "") for m in ctx.memories]
    rows += [(m, False, ContextReceiptItem.Reason.SECTION_BUDGET.value) for m in retrieved
             if str(m.memory_id) not in kept]
    rows += [(m, False, ContextReceiptItem.Reason.BUDGET.value) for m in left_out if str(m.memory_id) not in kept]
    rows.sort(key=lambda r: -float(r[0].score or 0.0))
    items = [_item(m, rank=i, included=inc, reason=why) for i, (m, inc, why) in enumerate(rows, 1)]
    items += _profile_items(profile or [], shown=getattr(ctx, "profile", None) or [])
    return {"id": str(uuid.uuid4()), "tenant_id": str(tenant.pk), "user_id": str(session.user_id),
            "session_id": str(session.pk), "surface": surface, "created_at": clock.now().isoformat(),
            "query": (query or "")[:QUERY_CHARS], "budget": int(ctx.budget or 0),
            "total_tokens": int(ctx.total_tokens or 0), "breakdown": dict(ctx.breakdown),
            "memory_status": ctx.memory_status, "items": items}


_executor: ThreadPoolExecutor | None = None
_pending = 0
_pending_lock = threading.Lock()


def _publish(payload: dict) -> None:
    try:
        task_get("orchestration.tasks.context_receipt_write_task").delay(payload)
    except Exception as exc:  # a broker outage loses an audit record, never a turn
        log.warning("context receipt %s not recorded: %s", payload.get("id"), exc)


def _publish_queued(payload: dict) -> None:
    global _pending
    try:
        _publish(payload)
    finally:
        with _pending_lock:
            _pending -= 1


def _hand_over(payload: dict) -> None:
    global _executor, _pending
    if settings.CELERY_TASK_ALWAYS_EAGER:  # the task runs where it is called anyway (tests, one-off scripts)
        _publish(payload)
        return
    with _pending_lock:
        if _pending >= PENDING_MAX:
            log.warning("context receipt %s dropped: %d receipts wait for the broker", payload.get("id"), _pending)
            return
        _pending += 1
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="receipts")
    _executor.submit(_publish_queued, payload)


def receipt_record_later(payload: dict) -> None:
    """Write the receipt after commit, off the request thread; nothing when receipts are turned off."""
    if not settings.CONTINUUM_RECEIPTS:
        return
    transaction.on_commit(lambda: _hand_over(payload))


def receipts_wait(timeout: float = 5.0) -> None:
    """Block until receipts handed to the background thread are published (tests, benchmarks, shutdown)."""
    if _executor is not None:
        _executor.submit(lambda: None).result(timeout=timeout)


def receipt_write(*, payload: dict) -> ContextReceipt | None:
    """The receipt's rows, once however often it is called, and one access counted for each retrieved memory the
    context included (at the receipt's time, so a rerun counts nothing twice); None when its session is gone
    (erased meanwhile)."""
    tenant_id = payload["tenant_id"]
    receipt = _receipt_rows_write(payload)
    if receipt is not None:
        shown = [i["memory_id"] for i in payload.get("items") or [] if i["included"] and i.get("section") == "memories"]
        memory_access_record(tenant_id=tenant_id, memory_ids=shown, at=datetime.fromisoformat(payload["created_at"]))
    return receipt


def _receipt_rows_write(payload: dict) -> ContextReceipt | None:
    """Insert first, ask later: a receipt is written once, so the common case is one statement (two through the ORM).
    Its id taken (a rerun) or its session or user gone (erased since the turn: the foreign keys refuse the rows) ends
    the same way, with whatever stands under that id."""
    tenant_id = payload["tenant_id"]
    items = payload.get("items") or []
    fields = dict(
        pk=payload["id"], tenant_id=tenant_id, user_id=payload["user_id"], session_id=payload["session_id"],
        surface=payload["surface"][:20], created_at=datetime.fromisoformat(payload["created_at"]),
        query=payload.get("query") or "",
        budget=payload.get("budget") or 0, total_tokens=payload.get("total_tokens") or 0,
        breakdown=payload.get("breakdown") or {}, memory_status=(payload.get("memory_status") or "ok")[:16],
        included_count=sum(1 for i in items if i["included"]),
        left_out_count=sum(1 for i in items if not i["included"]))
    rows = [dict(memory_uuid=i["memory_id"], included=i["included"], reason=i["reason"],
                 section=i.get("section") or "memories", rank=i["rank"], kind=i["kind"][:12], text=i["text"],
                 score=i["score"], score_parts=i["score_parts"], tokens=i["tokens"],
                 source_message_ids=i["source_message_ids"]) for i in items]
    try:
        with transaction.atomic():
            if native():
                receipt = ContextReceipt(**fields)  # what the ORM would hand back, without reading the row again
                _receipt_rows_insert(receipt, rows)
                return receipt
            receipt = ContextReceipt.objects.for_tenant(tenant_id).create(**fields)
            ContextReceiptItem.objects.bulk_create([ContextReceiptItem(receipt=receipt, tenant_id=tenant_id, **row)
                                                    for row in rows])
    except IntegrityError:
        receipt = ContextReceipt.objects.for_tenant(tenant_id).filter(pk=payload["id"]).first()
        if receipt is None:
            log.info("context receipt %s skipped: its session or user was erased", payload["id"])
        return receipt
    return receipt


# The receipt's and its items' columns, each with the type the statement casts its value to (None: as the driver sends
# it); names are read off the models, so a renamed column cannot drift from the ORM path (a test compares the rows
# both paths write). A jsonb value travels as its dumped text.
_RECEIPT_COLUMNS = (("id", "uuid"), ("tenant", "uuid"), ("user", "uuid"), ("session", "uuid"), ("surface", None),
                    ("created_at", "timestamptz"), ("query", None), ("budget", None), ("total_tokens", None),
                    ("breakdown", "jsonb"), ("memory_status", None), ("included_count", None),
                    ("left_out_count", None))
_ITEM_COLUMNS = (("memory_uuid", "uuid"), ("included", "boolean"), ("reason", "text"), ("section", "text"),
                 ("rank", "integer"), ("kind", "text"), ("text", "text"), ("score", "double precision"),
                 ("score_parts", "jsonb"), ("tokens", "integer"), ("source_message_ids", "jsonb"))


def _receipt_rows_insert(receipt: ContextReceipt, rows: list[dict]) -> None:
    """The receipt and its items in one statement (PostgreSQL): a turn writes one in the background, and the ORM's
    per-row model instances and JSON adaptation cost several times what the database spends."""
    meta = ContextReceipt._meta
    values = [_param(getattr(receipt, meta.get_field(name).attname), kind) for name, kind in _RECEIPT_COLUMNS]
    arrays = [[_param(r[name], kind) for r in rows] for name, kind in _ITEM_COLUMNS]
    with connection.cursor() as cursor:
        cursor.execute(_receipt_insert_sql(), [*values, *arrays])


def _param(value, kind: str | None):
    return json.dumps(value) if kind == "jsonb" else value


@functools.cache
def _receipt_insert_sql() -> str:
    r, i = ContextReceipt, ContextReceiptItem
    placeholders = ", ".join(f"%s::{kind}" if kind else "%s" for _, kind in _RECEIPT_COLUMNS)
    unnest = ", ".join(f"%s::{'text' if kind == 'jsonb' else kind}[]" for _, kind in _ITEM_COLUMNS)
    items = [column(i, name) for name, _ in _ITEM_COLUMNS]
    picked = ", ".join(f"i.{c}::jsonb" if kind == "jsonb" else f"i.{c}"
                       for c, (_, kind) in zip(items, _ITEM_COLUMNS, strict=True))
    return (f"WITH receipt AS (INSERT INTO {table(r)} ({', '.join(column(r, n) for n, _ in _RECEIPT_COLUMNS)}) "
            f"VALUES ({placeholders}) RETURNING {column(r, 'id')} AS id, {column(r, 'tenant')} AS tenant_id) "
            f"INSERT INTO {table(i)} ({column(i, 'receipt')}, {column(i, 'tenant')}, {', '.join(items)}) "
            f"SELECT receipt.id, receipt.tenant_id, {picked} FROM receipt, unnest({unnest}) AS i({', '.join(items)})")


# --- reads -----------------------------------------------------------------------------------------------------


def receipt_list(*, tenant, session):
    """A session's receipts, newest first, with their items."""
    return ContextReceipt.objects.for_tenant(tenant).filter(session=session).prefetch_related("items")


def memory_receipt_usage(*, tenant, memory_id) -> dict:
    """How often a memory went into a context, and when last: {"turns": n, "last": datetime | None}."""
    found = ContextReceiptItem.objects.for_tenant(tenant).filter(memory_uuid=memory_id, included=True).aggregate(
        turns=Count("receipt", distinct=True), last=Max("receipt__created_at"))
    return {"turns": found["turns"] or 0, "last": found["last"]}


# --- words taken back ------------------------------------------------------------------------------------------


def receipts_text_rewrite(*, tenant, user, query: Callable[[str], str],
                          items: Mapping[str, Callable[[str], str]]) -> int:
    """Rewrite the words the user took back out of their receipts (orchestration.forgetting decides which): each
    receipt's query through `query`, and each item of a memory in `items` through that memory's rewrite. What was
    given, its rank, score, tokens and sources stay. Returns how many rows changed."""
    changed = 0
    with transaction.atomic():
        for pk, text in ContextReceipt.objects.for_tenant(tenant).filter(user=user).exclude(query="") \
                .values_list("pk", "query").iterator():
            new = query(text)
            if new != text:
                changed += ContextReceipt.objects.for_tenant(tenant).filter(pk=pk).update(query=new)
        if items:
            for pk, memory_id, text in ContextReceiptItem.objects.for_tenant(tenant) \
                    .filter(memory_uuid__in=list(items), receipt__user=user) \
                    .values_list("pk", "memory_uuid", "text").iterator():
                new = items[str(memory_id)](text)
                if new != text:
                    changed += ContextReceiptItem.objects.for_tenant(tenant).filter(pk=pk).update(text=new)
    return changed


# --- retention -------------------------------------------------------------------------------------------------


def receipts_purge(*, tenant: Tenant, limit: int = 5000) -> dict:
    """Delete the tenant's receipts older than its retention, at most `limit` per run: {"deleted", "more"}."""
    cutoff = clock.now() - timedelta(days=tenant.receipt_retention_days)
    pks = list(ContextReceipt.objects.for_tenant(tenant).filter(created_at__lt=cutoff)
               .order_by("created_at").values_list("pk", flat=True)[:limit + 1])
    more = len(pks) > limit
    pks = pks[:limit]
    if pks:
        ContextReceiptItem.objects.for_tenant(tenant).filter(receipt_id__in=pks).delete()
        ContextReceipt.objects.for_tenant(tenant).filter(pk__in=pks).delete()
    return {"deleted": len(pks), "more": more}
