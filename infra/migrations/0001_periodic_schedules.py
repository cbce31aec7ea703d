"""No operations: the beat schedules are CELERY_BEAT_SCHEDULE in config/settings/base.py.

django-celery-beat's DatabaseScheduler writes them into its tables when beat starts, by name, so rows that an earlier
version of this migration made are taken over, not duplicated. The migration stays so that databases which applied it
keep a whole graph.
"""
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("django_celery_beat", "0019_alter_periodictasks_options")]

    operations = []
