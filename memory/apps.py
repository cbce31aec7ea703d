"""Long-term memory: records with provenance and history, the vector store, extraction and retrieval."""
from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Registers the app's tasks, so services can queue them by name (infra/task_queue.py).
        from . import tasks  # noqa: F401
        from .lifecycle import tasks as lifecycle_tasks  # noqa: F401
