"""Each memory records when Continuum learned it (learned_at). Existing rows take the time of their creation event.
A live memory learned well after it was said (imported history) had its expiry counted from when it was said: it is
moved by the same TTL onto learned_at, with a payload write so its point follows. A live turn's memory is learned
within minutes of its message, so a day's gap tells the two apart without rewriting every row."""

from datetime import timedelta

import django.utils.timezone
from django.db import migrations, models
from django.db.models import F, OuterRef, Subquery
from django.db.models.functions import Coalesce

LIVE = ("active", "pending_review")


def learned_at_backfill(apps, schema_editor):
    Record = apps.get_model("memory", "MemoryRecord")
    Event = apps.get_model("memory", "MemoryEvent")
    Outbox = apps.get_model("memory", "VectorOutbox")
    created = (Event.objects.filter(memory_uuid=OuterRef("pk"), action="created").order_by("created_at")
               .values("created_at")[:1])
    Record.objects.update(learned_at=Coalesce(Subquery(created), F("created_at")))
    moved = Record.objects.filter(status__in=LIVE, expires_at__isnull=False,
                                  learned_at__gt=F("created_at") + timedelta(days=1))
    batch = []
    for record in moved.only("pk", "tenant_id", "created_at", "learned_at", "expires_at").iterator(chunk_size=1000):
        Record.objects.filter(pk=record.pk).update(
            expires_at=record.expires_at + (record.learned_at - record.created_at))
        batch.append(Outbox(tenant_id_value=record.tenant_id, memory_uuid=record.pk, op="payload"))
        if len(batch) >= 1000:
            Outbox.objects.bulk_create(batch)
            batch = []
    Outbox.objects.bulk_create(batch)


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0003_assistant_source'),
    ]

    operations = [
        migrations.AddField(
            model_name='memoryrecord',
            name='learned_at',
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.RunPython(learned_at_backfill, migrations.RunPython.noop),
    ]
