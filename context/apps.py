"""What the model reads of a session: its buffer in Redis, summary anchors, bridges, links and the composer."""
from django.apps import AppConfig


class ContextConfig(AppConfig):
    name = "context"
    verbose_name = "Context"

    def ready(self):
        # Registers the app's tasks, so services can queue them by name (infra/task_queue.py).
        from . import tasks  # noqa: F401
