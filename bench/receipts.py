"""Context receipts benchmark: a memory-service turn's latency (GET /api/v1/sessions/{id}/context, retrieval and
composition included) with receipts on and off, interleaved in one run so both see the same machine.

Against the Redis of REDIS_URL (the broker receipts are handed to) and a scratch database; the embedder is the
configured one. No worker runs: a receipt's cost on the request path is building it and handing it to the
background thread, which is what the turn could pay for; the write itself is a task's.

    .venv/bin/python bench/receipts.py [--database-url URL] [--turns 60] [--memories 60] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.django_env import bench_django_start, report_write  # noqa: E402

TOPICS = ["hiking boots", "trail maps", "mountain huts", "camping stoves", "rain jackets", "water filters",
          "sleeping bags", "trekking poles", "head torches", "first aid kits", "tent pegs", "route planning",
          "train tickets", "hotel in Zermatt", "travel insurance", "sunscreen"]
QUESTIONS = ["What did I pack for the Alps hike?", "Which hotel did I book?", "Did I buy travel insurance?",
             "What gear do I still need?", "How do I get to the trailhead?"]


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database-url", default="", help="scratch database (default: SQLite in a temp folder)")
    p.add_argument("--turns", type=int, default=60, help="turns measured with receipts on, and as many off")
    p.add_argument("--memories", type=int, default=60)
    p.add_argument("--json", dest="json_path")
    p.add_argument("--show", action="store_true", help="also print one turn's receipt as the API returns it")
    p.add_argument("--quick", action="store_true", help="seconds, a few turns: checks the bench still runs")
    args = p.parse_args(argv)
    if args.quick:
        args.turns, args.memories = 4, 10
    return args


def _setup_django(args, workdir: Path) -> None:
    # No query rewrite: the figures must not depend on a model.
    bench_django_start(workdir=workdir, database_url=args.database_url, env={"LLM_BASE_URL": "", "LLM_MODEL": ""})


def _ms(values: list[float]) -> dict:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))]
    return {"p50_ms": round(statistics.median(values) * 1000, 2), "p95_ms": round(p95 * 1000, 2),
            "mean_ms": round(statistics.fmean(values) * 1000, 2), "n": len(values)}


def main(argv=None) -> dict:
    args = _args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="continuum-bench-receipts-"))
    _setup_django(args, workdir)
    from django.conf import settings
    from rest_framework.test import APIClient

    from memory.actions import memory_create
    from memory.outbox import outbox_apply
    from orchestration import tasks
    from orchestration.receipts import receipts_wait
    from orchestration.sessions import session_open
    from tenants.services import apikey_create, end_user_create, tenant_create

    tenant = tenant_create(name="Bench", slug=f"bench-{uuid.uuid4().hex[:6]}")
    _, key = apikey_create(tenant=tenant)
    user = end_user_create(tenant=tenant, external_id="bench-user", display_name="Ada")
    earlier, _ = session_open(tenant=tenant, user=user, title="trip planning")
    for i in range(args.memories):
        topic = TOPICS[i % len(TOPICS)]
        memory_create(tenant=tenant, user=user, kind="fact", session_id=earlier.pk,
                      text=f"For the Alps hike (day {i // len(TOPICS) + 1}) Ada sorted out the {topic}.")
    while outbox_apply():
        pass
    session, _ = session_open(tenant=tenant, user=user)

    published = []
    real_delay = tasks.context_receipt_write_task.delay

    def delay(payload):  # the broker push as it happens, counted
        published.append(payload["id"])
        return real_delay(payload)

    tasks.context_receipt_write_task.delay = delay
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    url = f"/api/v1/sessions/{session.pk}/context"
    for q in QUESTIONS:  # warm up: the embedder, connections, caches
        assert client.get(url, {"input": q}).status_code == 200
    receipts_wait(timeout=30)
    published.clear()
    timings = {True: [], False: []}
    for i in range(args.turns * 2):
        on = i % 2 == 0
        settings.CONTINUUM_RECEIPTS = on
        question = QUESTIONS[(i // 2) % len(QUESTIONS)]
        started = time.perf_counter()
        r = client.get(url, {"input": question})
        timings[on].append(time.perf_counter() - started)
        assert r.status_code == 200, r.content
    receipts_wait(timeout=60)
    # What the request thread itself spends on a receipt: building it from the composed context.
    from orchestration import context as composing
    from orchestration.receipts import receipt_build

    captured = {}
    settings.CONTINUUM_RECEIPTS = True
    real_build = composing.receipt_build
    composing.receipt_build = lambda **kw: captured.update(kw) or real_build(**kw)
    composing.turn_context(tenant=tenant, session=session, new_input=QUESTIONS[0])
    composing.receipt_build = real_build
    builds = []
    for _ in range(200):
        started = time.perf_counter()
        receipt_build(**captured)
        builds.append(time.perf_counter() - started)
    out = {"receipt_build": {**_ms(builds), "items": len(real_build(**captured)["items"])},
           "turn": "GET /context (retrieval + composition)", "memories": args.memories,
           "receipts_on": _ms(timings[True]), "receipts_off": _ms(timings[False]),
           "receipts_published": len(published), "database": settings.DATABASES["default"]["ENGINE"].rsplit(".")[-1],
           "embedder": settings.EMBEDDING_MODEL}
    out["p50_delta_ms"] = round(out["receipts_on"]["p50_ms"] - out["receipts_off"]["p50_ms"], 2)
    print(json.dumps(out, indent=2))
    if args.show:  # one receipt written where it is made (the task run eagerly), read back through the API
        settings.CELERY_TASK_ALWAYS_EAGER = settings.CONTINUUM_RECEIPTS = True
        tasks.context_receipt_write_task.delay = real_delay
        client.get(url, {"input": QUESTIONS[0]})
        receipt = client.get(f"/api/v1/sessions/{session.pk}/receipts", {"limit": 1}).json()["results"][0]
        print(json.dumps(receipt, indent=2))
    report_write(out, args.json_path)
    return out


if __name__ == "__main__":
    main()
