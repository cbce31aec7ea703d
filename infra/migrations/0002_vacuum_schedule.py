"""No operations: the vacuum's beat schedule is in CELERY_BEAT_SCHEDULE too (see 0001)."""
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("infra", "0001_periodic_schedules")]

    operations = []
