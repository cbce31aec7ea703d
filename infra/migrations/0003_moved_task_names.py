"""Two scheduled tasks moved with their code: compacting buffers to the context package, closing idle sessions to
the orchestration layer. Existing schedules follow them (and go back on a reverse migration)."""
from django.db import migrations

MOVED = {
    "memory.lifecycle.tasks.buffers_compact_task": "context.tasks.buffers_compact_task",
    "sessions.tasks.sessions_close_idle_task": "orchestration.tasks.sessions_close_idle_task",
}


def forwards(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for old, new in MOVED.items():
        PeriodicTask.objects.filter(task=old).update(task=new)


def backwards(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for old, new in MOVED.items():
        PeriodicTask.objects.filter(task=new).update(task=old)


class Migration(migrations.Migration):
    dependencies = [("infra", "0002_vacuum_schedule")]
    operations = [migrations.RunPython(forwards, backwards)]
