"""Two runs of a job at once never apply anything twice: the per-tenant lock keeps one out, and where the lock
is bypassed the jobs' conditional claims still let each change happen once."""
from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection

from infra import clock
from infra.embedder import get_embedder, set_embedder
from memory.lifecycle.expire import memories_expire
from memory.lifecycle.forget import memories_forget
from memory.lifecycle.locks import job_lock, job_lock_acquire, job_lock_key, job_lock_release
from memory.lifecycle.merge import memories_merge
from memory.lifecycle.runs import JobResult, job_run
from memory.lifecycle.tasks import memories_merge_task
from memory.models import JobRun, MemoryEvent, MemoryRecord
from tests.memory.lifecycle_support import memory_make

pytestmark = pytest.mark.django_db(transaction=True)


def in_threads(*fns):
    """Start every fn at the same moment; return their results (or raise the first error)."""
    start = threading.Barrier(len(fns))
    results, errors = [None] * len(fns), []

    def run(i, fn):
        try:
            start.wait()
            results[i] = fn()
        except Exception as exc:  # surfaced to the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return results


class GatedEmbedder:
    """The real embedder, but every merge pass waits here until `parties` passes have computed their
    clusters, so both decide before either applies."""

    def __init__(self, inner, parties):
        self.inner, self.model_name, self.dim = inner, inner.model_name, inner.dim
        self.gate = threading.Barrier(parties, timeout=30)
        self.slow = 0.0

    def embed(self, texts):
        out = self.inner.embed(texts)
        if len(texts) > 1 and self.gate is not None:  # cluster embedding, not the outbox's single upserts
            try:
                self.gate.wait()
            except threading.BrokenBarrierError:
                pass
        time.sleep(self.slow)
        return out


@pytest.fixture
def duplicates(alice, alice_user):
    return [memory_make(alice, alice_user, t, kind="preference") for t in (
        "I prefer window seats on flights", "I prefer a window seat on flights.", "On flights I prefer window seats")]


def _merge_outcome(duplicates):
    rows = MemoryRecord.objects.unscoped().filter(pk__in=[d.pk for d in duplicates])
    events = MemoryEvent.objects.unscoped().filter(memory_uuid__in=[d.pk for d in duplicates]).exclude(action="created")
    return (sorted(rows.values_list("status", flat=True)), sorted(events.values_list("action", flat=True)),
            sum(rows.values_list("reinforcement_count", flat=True)))


def test_two_concurrent_task_runs_one_works_one_is_locked_out(alice, duplicates):
    gated = GatedEmbedder(get_embedder(), parties=1)
    gated.slow = 0.5  # hold the lock long enough for the second run to find it taken
    set_embedder(gated)
    try:
        outs = in_threads(lambda: memories_merge_task.apply(kwargs={"tenant_id": str(alice.pk)}).get(),
                          lambda: memories_merge_task.apply(kwargs={"tenant_id": str(alice.pk)}).get())
    finally:
        set_embedder(None)
    assert sorted(o.get("skipped", "ran") for o in outs) == ["locked", "ran"]
    assert sum(o.get("superseded", 0) for o in outs) == 2
    assert _merge_outcome(duplicates) == (["active", "superseded", "superseded"],
                                          ["reinforced", "superseded", "superseded"], 2)
    assert JobRun.objects.unscoped().filter(job="merge", status="done").count() == 1


def test_two_merge_passes_that_bypass_the_lock_still_apply_once(alice, duplicates):
    set_embedder(GatedEmbedder(get_embedder(), parties=2))
    try:
        outs = in_threads(lambda: memories_merge(tenant=alice, limit=500),
                          lambda: memories_merge(tenant=alice, limit=500))
    finally:
        set_embedder(None)
    assert sorted(o.stats["superseded"] for o in outs) == [0, 2]
    assert _merge_outcome(duplicates) == (["active", "superseded", "superseded"],
                                          ["reinforced", "superseded", "superseded"], 2)


def test_concurrent_expire_and_forget_passes_apply_each_record_once(alice, alice_user, settings):
    past = clock.now() - timedelta(minutes=1)
    expiring = [memory_make(alice, alice_user, f"expiring {i}", expires_at=past) for i in range(12)]
    outs = in_threads(*[lambda: memories_expire(tenant=alice, limit=500)] * 3)
    assert sum(o.stats["expired"] for o in outs) == 12
    assert MemoryEvent.objects.unscoped().filter(action="expired").count() == 12

    settings.MEMORY_FORGET_GRACE_DAYS = 0
    outs = in_threads(*[lambda: memories_forget(tenant=alice, limit=500)] * 3)
    assert sum(o.stats["forgotten"] for o in outs) == 12
    assert MemoryEvent.objects.unscoped().filter(action="forgotten").count() == 12
    assert not MemoryRecord.objects.unscoped().filter(pk__in=[m.pk for m in expiring]).exists()


def test_the_lock_is_per_tenant_and_per_job(alice, bob):
    token = job_lock_acquire(tenant_id=alice.pk, job="merge", ttl_seconds=30)
    assert token
    assert job_lock_acquire(tenant_id=alice.pk, job="merge", ttl_seconds=30) is None
    assert job_lock_acquire(tenant_id=bob.pk, job="merge", ttl_seconds=30)
    assert job_lock_acquire(tenant_id=alice.pk, job="expire", ttl_seconds=30)
    assert not job_lock_release(tenant_id=alice.pk, job="merge", token="not-mine")
    assert job_lock_release(tenant_id=alice.pk, job="merge", token=token)
    with job_lock(tenant_id=alice.pk, job="merge", ttl_seconds=30) as held:
        assert held
        from infra.redis_client import get_redis

        assert 0 < get_redis().ttl(job_lock_key(tenant_id=alice.pk, job="merge")) <= 30
    assert job_lock_acquire(tenant_id=alice.pk, job="merge", ttl_seconds=30)


def test_a_run_that_finds_the_lock_taken_does_nothing(alice):
    calls = []
    job_lock_acquire(tenant_id=alice.pk, job="merge", ttl_seconds=30)
    out = job_run(job="merge", tenant=alice, fn=lambda **kw: calls.append(kw) or JobResult())
    assert out["skipped"] == "locked" and calls == [] and not JobRun.objects.unscoped().exists()


def test_a_failed_run_is_recorded_and_releases_its_lock(alice):
    def boom(**kwargs):
        raise RuntimeError("bad data")

    with pytest.raises(RuntimeError):
        job_run(job="decay", tenant=alice, fn=boom)
    run = JobRun.objects.unscoped().get()
    assert run.status == "failed" and "bad data" in run.stats["error"] and run.finished_at
    assert job_lock_acquire(tenant_id=alice.pk, job="decay", ttl_seconds=30)
