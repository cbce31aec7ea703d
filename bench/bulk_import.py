"""Bulk import benchmark: a 10,000-message import timed in messages/s, with a live user's turns measured beside it.

In one process, as the embedded topology runs (the Celery worker's threads beside the request code, Qdrant Edge
in a scratch folder, the real local embedder, no LLM):
  * the export: the LoCoMo dev set repeated with new sample ids (so new external ids) up to --messages messages;
  * the import goes in through the API's service (validated, a job, conversations_import_task on the bulk queue,
    chunk after chunk), then its backlog (bridges and extraction of the imported sessions) through the paced
    per-user chain;
  * a live user of the same tenant, with an open session and memories, the whole time: its turn context
    (orchestration/context.py turn_context, what GET /context and every assistant turn compose) every --every-ms,
    and a new message every 2 s whose extraction lag (stored -> extracted by the llm queue) is measured;
  * printed, in one run: import messages/s (job created -> done), backlog work per second, and the live user's
    context latency and extraction lag p50/p95 while idle (before), during the import's writes and during its
    backlog.

    .venv/bin/python bench/bulk_import.py --database-url postgres://…/<scratch> [--messages 10000]
        [--backlog-seconds 60] [--json out.json]

--quick: the short conversation shipped in bench/data repeated to 48 messages, a second idle, at most 5 s of backlog
(seconds: shows the bench runs, not its figures).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.django_env import AS_DEPLOYED, NO_LLM, bench_django_start, report_write  # noqa: E402
from bench.locomo import DEFAULT_DATASET, QUICK_DATASET  # noqa: E402

LIVE_FACTS = ["I prefer aisle seats on long flights.", "My favourite cuisine is Ethiopian food.",
              "I am allergic to peanuts.", "I work as a marine biologist in Porto.",
              "My daughter plays the cello.", "I never drink coffee after noon."]


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database-url", required=True, help="a scratch PostgreSQL database")
    p.add_argument("--dataset", default=str(DEFAULT_DATASET))
    p.add_argument("--messages", type=int, default=10_000)
    p.add_argument("--idle-seconds", type=float, default=20.0, help="live measurements before the import")
    p.add_argument("--backlog-seconds", type=float, default=60.0, help="live measurements during the backlog")
    p.add_argument("--every-ms", type=float, default=100.0, help="pause between two live context reads")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--quick", action="store_true", help="48 messages of the conversation in bench/data, short phases")
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(dataset=str(QUICK_DATASET), messages=48, idle_seconds=1.0, backlog_seconds=5.0)
        args = p.parse_args(argv)
    return args


def _setup(args, workdir: Path) -> None:
    # The worker is started below, without beat's unrelated jobs.
    bench_django_start(workdir=workdir, database_url=args.database_url, env={
        "QDRANT_URL": "", "CONTINUUM_EMBEDDED_WORKER": "false", "CELERY_TASK_ALWAYS_EAGER": "false", **NO_LLM,
    }, defaults=AS_DEPLOYED)


def build_export(dataset: Path, messages: int) -> tuple[bytes, int]:
    """The dev set's samples repeated under new sample ids until `messages` turns, the last session cut to fit."""
    data = json.loads(dataset.read_text())
    out, total, round_ = [], 0, 0
    while total < messages:
        round_ += 1
        for sample in data:
            if total >= messages:
                break
            conv = dict(sample["conversation"])
            n = 1
            while f"session_{n}" in conv or f"session_{n}_date_time" in conv:
                turns = conv.get(f"session_{n}") or []
                keep = max(0, min(len(turns), messages - total))
                if f"session_{n}" in conv:
                    conv[f"session_{n}"] = turns[:keep]
                total += keep
                n += 1
            out.append({"sample_id": f"{sample['sample_id']}-r{round_}", "conversation": conv})
    return json.dumps(out).encode(), total


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    xs = sorted(values)
    return round(xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))], 2)


def summary(values: list[float]) -> dict:
    return {"n": len(values), "p50": pct(values, 0.5), "p95": pct(values, 0.95),
            "mean": round(statistics.mean(values), 2) if values else None}


class Live:
    """The live user: context reads in a loop, a message every 2 s, each message's extraction lag."""

    def __init__(self, tenant, session, every_ms: float):
        self.tenant, self.session, self.every = tenant, session, every_ms / 1000
        self.phase = "idle"
        self.context_ms: dict[str, list[float]] = {}
        self.pending: list[tuple[str, str, float]] = []  # (phase, message id, stored at)
        self.lag_s: dict[str, list[float]] = {}
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        from django.db import connection

        from orchestration.context import turn_context
        from orchestration.messages import messages_append
        from sessions.models import Message
        from sessions.services import NewMessage

        last_message, n = 0.0, 0
        try:
            while not self.stop.is_set():
                phase = self.phase
                start = time.perf_counter()
                turn_context(tenant=self.tenant, session=self.session, new_input="What do you remember about "
                             "my travel and food preferences?", rewrite_query=False)
                self.context_ms.setdefault(phase, []).append((time.perf_counter() - start) * 1000)
                now = time.monotonic()
                if now - last_message >= 2.0:
                    last_message, n = now, n + 1
                    row = messages_append(tenant=self.tenant, session_id=self.session.pk, items=[NewMessage(
                        role="user", content=f"{LIVE_FACTS[n % len(LIVE_FACTS)]} (note {n})")])[0]
                    self.pending.append((phase, str(row.pk), time.monotonic()))
                done = set(Message.objects.for_tenant(self.tenant).filter(
                    pk__in=[p[1] for p in self.pending], extracted_at__isnull=False).values_list("pk", flat=True))
                for item in [p for p in self.pending if uuid.UUID(p[1]) in done]:
                    self.lag_s.setdefault(item[0], []).append(time.monotonic() - item[2])
                    self.pending.remove(item)
                time.sleep(self.every)
        except Exception as exc:  # reported, and the run fails
            self.errors.append(f"{exc.__class__.__name__}: {exc}")
        finally:
            connection.close()


def main(argv=None) -> dict:
    args = _args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="bulk-bench-"))
    _setup(args, workdir)

    from django.conf import settings

    from config.celery import app
    from config.embedded_worker import start_embedded_worker
    from infra.embedder import get_embedder
    from orchestration.imports import import_job_create, imports_backlog_pending
    from orchestration.messages import message_extract, messages_append
    from orchestration.models import ImportJob
    from orchestration.sessions import session_open
    from sessions.services import NewMessage
    from tenants.services import end_user_create, tenant_create

    payload, total = build_export(Path(args.dataset), args.messages)
    print(f"export: {total} messages, {len(payload) / 1e6:.1f} MB ({args.dataset} repeated with new sample ids)",
          flush=True)
    get_embedder().embed(["warm up"])
    app.control.purge()  # this broker db holds nothing of anyone else's
    start_embedded_worker()  # the worker's threads in this process, as in embedded mode (beat too)

    tenant = tenant_create(name="bulk bench", slug=f"bulk-{uuid.uuid4().hex[:6]}",
                           memory_ttl_days={"event": None, "goal": None})
    live_user = end_user_create(tenant=tenant, external_id="live", display_name="Lena")
    importer = end_user_create(tenant=tenant, external_id="imported", display_name="Caroline")
    session, _ = session_open(tenant=tenant, user=live_user, title="live")
    for fact in LIVE_FACTS:
        row = messages_append(tenant=tenant, session_id=session.pk, enqueue_extraction=False,
                              items=[NewMessage(role="user", content=fact)])[0]
        message_extract(tenant_id=tenant.pk, message_id=row.pk)
    session, _ = session_open(tenant=tenant, user=live_user, title="live, now")  # memories from another session
    live = Live(tenant, session, args.every_ms)
    thread = threading.Thread(target=live.run, name="live-user", daemon=True)
    thread.start()
    time.sleep(args.idle_seconds)

    live.phase = "import"
    started = time.perf_counter()
    job = import_job_create(tenant=tenant, user=importer, fmt="locomo", payload=payload)
    validated = time.perf_counter() - started
    jobs = ImportJob.objects.for_tenant(tenant)
    while jobs.get(pk=job.pk).status not in ("done", "failed"):
        time.sleep(0.2)
    import_seconds = time.perf_counter() - started
    job = jobs.defer("payload").get(pk=job.pk)

    live.phase = "backlog"
    backlog_start = imports_backlog_pending(tenant_id=tenant.pk, user_id=importer.pk)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.backlog_seconds:
        time.sleep(1.0)
        left = imports_backlog_pending(tenant_id=tenant.pk, user_id=importer.pk)
        if not any(left.values()):
            break
    backlog_seconds = time.perf_counter() - t0
    backlog_left = imports_backlog_pending(tenant_id=tenant.pk, user_id=importer.pk)
    live.stop.set()
    thread.join(timeout=30)

    steps = sum(backlog_start.values()) - sum(backlog_left.values())
    result = {
        "messages": total, "export_mb": round(len(payload) / 1e6, 2), "job_status": job.status,
        "messages_created": job.messages_created, "sessions_created": job.sessions_created,
        "validate_seconds": round(validated, 2), "import_seconds": round(import_seconds, 2),
        "import_messages_per_s": round(job.messages_created / import_seconds, 1),
        "chunk_messages": settings.CONTINUUM_IMPORT_CHUNK_MESSAGES,
        "chunk_pause_s": settings.CONTINUUM_IMPORT_CHUNK_PAUSE_SECONDS,
        "backlog": {"at_start": backlog_start, "left": backlog_left, "seconds": round(backlog_seconds, 1),
                    "steps_per_s": round(steps / backlog_seconds, 2) if backlog_seconds else None,
                    "batch": settings.CONTINUUM_IMPORT_BACKLOG_BATCH,
                    "pause_s": settings.CONTINUUM_IMPORT_BACKLOG_PAUSE_SECONDS},
        "live_context_ms": {phase: summary(v) for phase, v in live.context_ms.items()},
        "live_extraction_lag_s": {phase: summary(v) for phase, v in live.lag_s.items()},
        "live_messages_unextracted_at_end": len(live.pending),
        "errors": live.errors,
    }
    print(json.dumps(result, indent=2))
    ctx, lag = result["live_context_ms"], result["live_extraction_lag_s"]
    print(f"\nbulk import figure: {job.messages_created} messages in {import_seconds:.1f} s "
          f"({result['import_messages_per_s']} messages/s, {job.sessions_created} sessions); live context "
          f"p50/p95 ms idle {ctx.get('idle', {}).get('p50')}/{ctx.get('idle', {}).get('p95')}, during the import "
          f"{ctx.get('import', {}).get('p50')}/{ctx.get('import', {}).get('p95')}, during the backlog "
          f"{ctx.get('backlog', {}).get('p50')}/{ctx.get('backlog', {}).get('p95')}; live extraction lag p50/p95 s "
          f"idle {lag.get('idle', {}).get('p50')}/{lag.get('idle', {}).get('p95')}, import "
          f"{lag.get('import', {}).get('p50')}/{lag.get('import', {}).get('p95')}, backlog "
          f"{lag.get('backlog', {}).get('p50')}/{lag.get('backlog', {}).get('p95')}; backlog "
          f"{result['backlog']['steps_per_s']} steps/s", flush=True)
    report_write(result, args.json_path)
    if live.errors or job.status != "done":
        raise SystemExit(f"the run failed: job {job.status} {job.error!r}, live errors {live.errors}")
    return result


if __name__ == "__main__":
    main()
    os._exit(0)  # the embedded worker's threads do not stop on their own
