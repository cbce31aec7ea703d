"""Liveness and readiness: /healthz says the process runs; /readyz checks every dependency."""
from __future__ import annotations

import logging
import time

from celery import current_app
from django.db import connection
from django.http import JsonResponse

from infra.operator_token import operator_token_given
from infra.redis_client import get_redis
from infra.vector_store import get_vector_store

log = logging.getLogger(__name__)


def _timed(fn) -> dict:
    started = time.perf_counter()
    try:
        detail = fn() or {}
        return {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 2), **detail}
    except Exception as exc:  # readiness reports failures, it never raises them
        log.warning("readiness: %s failed: %s: %s", getattr(fn, "__name__", fn), exc.__class__.__name__, exc)
        return {"ok": False, "error": f"{exc.__class__.__name__}: {exc}"[:300]}


def _database():
    with connection.cursor() as cur:
        cur.execute("SELECT 1")
    return {"vendor": connection.vendor}


def _redis():
    get_redis().ping()


def _qdrant():
    store = get_vector_store()
    return {"backend": store.backend_name, "points": store.health()}


def _broker():
    app = current_app  # the project's app (config/celery.py), without importing the configuration package

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return {"url": app.conf.broker_url.split("@")[-1]}


def healthz(request):
    return JsonResponse({"status": "ok"})


def readyz(request):
    """Status and HTTP code for anyone (a load balancer needs no more); which component failed and why (hosts,
    exception text) only with the operator token, the same one /metrics takes. The failure is logged either way."""
    components = {"database": _timed(_database), "redis": _timed(_redis), "qdrant": _timed(_qdrant),
                  "broker": _timed(_broker)}
    ok = all(c["ok"] for c in components.values())
    body = {"status": "ok" if ok else "degraded"}
    if operator_token_given(request):
        body["components"] = components
    return JsonResponse(body, status=200 if ok else 503)
