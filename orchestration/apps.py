"""The orchestration layer owns a message's and a turn's fan-out across sessions, context and memory."""
from django.apps import AppConfig


class OrchestrationConfig(AppConfig):
    name = "orchestration"
    verbose_name = "Orchestration"

    def ready(self):
        # Registers the app's tasks, so services can queue them by name (infra/task_queue.py).
        from . import tasks  # noqa: F401
