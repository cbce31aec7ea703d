"""Lifecycle tasks: fan out per tenant, bounded runs that re-enqueue themselves, JSON results, beat schedules."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from context.tasks import buffers_compact_task
from infra import clock
from memory.lifecycle import tasks
from memory.models import JobRun, MemoryRecord
from tests.memory.lifecycle_support import memory_make

pytestmark = pytest.mark.django_db(transaction=True)

ALL_TASKS = [tasks.memories_merge_task, tasks.memories_decay_task, tasks.memories_expire_task,
             tasks.memories_forget_task, tasks.memories_consolidate_task, buffers_compact_task,
             tasks.vectors_reconcile_task]


def test_beat_run_fans_out_one_task_per_active_tenant(alice, bob, make_tenant, monkeypatch):
    off = make_tenant("Off")
    off.is_active = False
    off.save()
    sent = []
    monkeypatch.setattr(tasks.memories_expire_task, "delay", lambda **kw: sent.append(kw))
    out = tasks.memories_expire_task.apply().get()
    assert out == {"job": "expire", "fanned_out": 2}
    assert sorted(s["tenant_id"] for s in sent) == sorted([str(alice.pk), str(bob.pk)])


def test_a_bounded_run_re_enqueues_itself_with_its_cursor(alice, alice_user, settings, monkeypatch):
    settings.MEMORY_LIFECYCLE_BATCH = 2
    for i in range(3):
        memory_make(alice, alice_user, f"fact {i}", importance=0.5, created_at=clock.now() - timedelta(days=30))
    queued = []
    monkeypatch.setattr(tasks.memories_decay_task, "apply_async", lambda **kw: queued.append(kw))

    out = tasks.memories_decay_task.apply(kwargs={"tenant_id": str(alice.pk)}).get()
    json.dumps(out)
    assert out["checked"] == 2 and out["more"] is True
    (again,) = queued
    assert again["kwargs"]["tenant_id"] == str(alice.pk) and again["kwargs"]["cursor"] == out["cursor"]

    last = tasks.memories_decay_task.apply(kwargs=again["kwargs"]).get()
    assert last["checked"] == 1 and last["more"] is False and len(queued) == 1
    assert JobRun.objects.unscoped().filter(job="decay", tenant=alice, status="done").count() == 2


@pytest.mark.parametrize("task", ALL_TASKS, ids=lambda t: t.name.rsplit(".", 1)[-1])
def test_every_task_runs_for_a_tenant_and_reports_what_it_did(task, alice, alice_user, monkeypatch):
    memory_make(alice, alice_user, "I prefer tea", kind="preference")
    monkeypatch.setattr(task, "apply_async", lambda **kw: None)
    out = task.apply(kwargs={"tenant_id": str(alice.pk)}).get()
    json.dumps(out)
    assert out["tenant_id"] == str(alice.pk) and "run_id" in out
    run = JobRun.objects.unscoped().get(pk=out["run_id"])
    assert run.status == "done" and run.finished_at >= run.started_at


def test_a_task_for_a_tenant_that_is_gone_does_nothing(alice):
    import uuid

    out = tasks.memories_forget_task.apply(kwargs={"tenant_id": str(uuid.uuid4())}).get()
    assert out["skipped"] == "tenant_gone" and not JobRun.objects.unscoped().exists()


def test_tasks_route_to_the_maintenance_queue():
    from config.celery import app

    for task in ALL_TASKS:
        assert app.amqp.router.route({}, task.name)["queue"].name == "maintenance"


def _start_beat_scheduler():
    """What beat does on start: the app's DatabaseScheduler reads CELERY_BEAT_SCHEDULE into the database."""
    from django_celery_beat.schedulers import DatabaseScheduler

    from config.celery import app

    scheduler = DatabaseScheduler(app=app)
    return app, scheduler


def test_starting_beat_schedules_every_job_and_the_minute_tasks(settings):
    from django_celery_beat.models import PeriodicTask

    assert not PeriodicTask.objects.exists()  # transactional tests start from empty tables
    app, scheduler = _start_beat_scheduler()
    app.loader.import_default_modules()
    import memory.outbox  # noqa: F401
    import orchestration.tasks  # noqa: F401

    scheduled = {p.task: p for p in PeriodicTask.objects.filter(enabled=True).select_related("interval")}
    assert set(PeriodicTask.objects.values_list("name", flat=True)) == set(settings.CELERY_BEAT_SCHEDULE)
    assert len(scheduled) == len(settings.CELERY_BEAT_SCHEDULE)
    for task in [*ALL_TASKS, tasks.vectors_vacuum_task]:
        assert task.name in scheduled, task.name
    for name in ("orchestration.tasks.sessions_close_idle_task", "memory.outbox.outbox_flush_task"):
        interval = scheduled[name].interval
        assert (interval.every, interval.period) == (60, "seconds")
    for name, row in scheduled.items():
        assert name in app.tasks, f"beat would send an unregistered task: {name}"
        assert row.name in scheduler.schedule  # and the scheduler runs what it wrote

    _start_beat_scheduler()  # a restart writes the same rows again, nothing more
    assert PeriodicTask.objects.count() == len(scheduled)


def test_starting_beat_takes_over_rows_of_the_same_name_and_keeps_a_pause(settings):
    """A database whose schedules were written before (by name) gets no duplicates: the interval is the settings',
    a job paused in the admin stays paused, and its run history stays."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    names = list(settings.CELERY_BEAT_SCHEDULE)
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=1, period="minutes")
    for name in names:
        PeriodicTask.objects.create(name=name, task=settings.CELERY_BEAT_SCHEDULE[name]["task"], interval=every_minute)
    paused, retimed = names[0], names[1]
    PeriodicTask.objects.filter(name=paused).update(enabled=False, total_run_count=7)

    _start_beat_scheduler()

    assert sorted(PeriodicTask.objects.values_list("name", flat=True)) == sorted(names)
    assert PeriodicTask.objects.get(name=paused).enabled is False
    assert PeriodicTask.objects.get(name=paused).total_run_count == 7
    row = PeriodicTask.objects.select_related("interval").get(name=retimed)
    assert row.enabled and timedelta(seconds=row.interval.every) == settings.CELERY_BEAT_SCHEDULE[retimed]["schedule"]


def test_expire_task_end_to_end(alice, alice_user, monkeypatch):
    m = memory_make(alice, alice_user, "Boarding pass for today", expires_at=clock.now() - timedelta(seconds=1))
    out = tasks.memories_expire_task.apply(kwargs={"tenant_id": str(alice.pk)}).get()
    assert out["expired"] == 1
    assert MemoryRecord.objects.unscoped().get(pk=m.pk).status == "expired"
