"""Beat schedule for the vector store's vacuum (deleted memories leave Qdrant Edge's segment files within the hour)."""
import importlib

from django.db import migrations

first = importlib.import_module("infra.migrations.0001_periodic_schedules")

SCHEDULES = [("vectors: vacuum deleted points", "memory.lifecycle.tasks.vectors_vacuum_task", 60)]


def create_schedules(apps, schema_editor):
    first.create_schedules(apps, schema_editor, schedules=SCHEDULES, source="0002_vacuum_schedule")


def remove_schedules(apps, schema_editor):
    first.remove_schedules(apps, schema_editor, schedules=SCHEDULES)


class Migration(migrations.Migration):
    dependencies = [("infra", "0001_periodic_schedules")]

    operations = [migrations.RunPython(create_schedules, remove_schedules)]
