"""The Celery application: Redis broker, JSON only, late acks, three queues."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("continuum")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Lifecycle jobs live in a package below the memory app, out of autodiscovery's default reach.
app.autodiscover_tasks(["memory.lifecycle"])

import infra.worker_wakeup  # noqa: E402,F401  (connects its worker_ready handler in every worker)
