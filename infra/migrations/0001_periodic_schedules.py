"""Beat schedules for the lifecycle jobs, idle-session closing and the vector outbox flush.

Rows in django-celery-beat's tables, so operators can pause or retime a job in the admin without a deploy.
The infra app has no models of its own; this migration only depends on django-celery-beat's tables.
"""
from django.db import migrations
from django.utils import timezone

# (name, task, every N minutes)
SCHEDULES = [
    ("lifecycle: merge near-duplicates", "memory.lifecycle.tasks.memories_merge_task", 60),
    ("lifecycle: decay importance", "memory.lifecycle.tasks.memories_decay_task", 360),
    ("lifecycle: expire by TTL", "memory.lifecycle.tasks.memories_expire_task", 5),
    ("lifecycle: forget", "memory.lifecycle.tasks.memories_forget_task", 60),
    ("lifecycle: consolidate events", "memory.lifecycle.tasks.memories_consolidate_task", 60),
    ("lifecycle: compact idle buffers", "memory.lifecycle.tasks.buffers_compact_task", 5),
    ("lifecycle: reconcile database and Qdrant", "memory.lifecycle.tasks.vectors_reconcile_task", 30),
    ("sessions: close idle sessions", "sessions.tasks.sessions_close_idle_task", 1),
    ("vectors: flush the outbox", "memory.outbox.outbox_flush_task", 1),
]


def create_schedules(apps, schema_editor, schedules=SCHEDULES, source="0001_periodic_schedules"):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    for name, task, minutes in schedules:
        interval, _ = IntervalSchedule.objects.get_or_create(every=minutes, period="minutes")
        PeriodicTask.objects.update_or_create(
            name=name, defaults={"task": task, "interval": interval, "enabled": True, "args": "[]", "kwargs": "{}",
                                 "description": f"Created by infra/migrations/{source}."})
    # Historical models send no signals: tell a running beat that its schedule changed.
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def remove_schedules(apps, schema_editor, schedules=SCHEDULES):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    PeriodicTask.objects.filter(name__in=[name for name, _, _ in schedules]).delete()
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


class Migration(migrations.Migration):
    dependencies = [("django_celery_beat", "0019_alter_periodictasks_options")]

    operations = [migrations.RunPython(create_schedules, remove_schedules)]
