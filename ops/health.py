"""Liveness and readiness: /healthz says the process runs; /readyz checks every dependency."""
from __future__ import annotations

import time

from django.db import connection
from django.http import JsonResponse


def _timed(fn) -> dict:
    started = time.perf_counter()
    try:
        detail = fn() or {}
        return {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 2), **detail}
    except Exception as exc:  # readiness reports failures, it never raises them
        return {"ok": False, "error": f"{exc.__class__.__name__}: {exc}"[:300]}


def _database():
    with connection.cursor() as cur:
        cur.execute("SELECT 1")
    return {"vendor": connection.vendor}


def _redis():
    from infra.redis_client import get_redis

    get_redis().ping()


def _qdrant():
    from infra.vector_store import get_vector_store

    store = get_vector_store()
    return {"backend": store.backend_name, "points": store.health()}


def _broker():
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return {"url": app.conf.broker_url.split("@")[-1]}


def healthz(request):
    return JsonResponse({"status": "ok"})


def readyz(request):
    components = {"database": _timed(_database), "redis": _timed(_redis), "qdrant": _timed(_qdrant),
                  "broker": _timed(_broker)}
    ok = all(c["ok"] for c in components.values())
    return JsonResponse({"status": "ok" if ok else "degraded", "components": components}, status=200 if ok else 503)
