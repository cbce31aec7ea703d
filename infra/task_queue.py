"""Hand work to a Celery task by its registered name.

A service that queues follow-up work would otherwise import the tasks module that wraps it, and that module
imports the service: a circle. Naming the task keeps the import pointing one way (tasks → services). Each app
registers its tasks when Django starts (its AppConfig.ready), so a name resolves in the web process too.
"""
from __future__ import annotations

from celery import current_app
from django.db import transaction


def task_get(name: str):
    """The registered task called `name` ("orchestration.tasks.message_extract_task"); KeyError when unknown."""
    return current_app.tasks[name]


def task_enqueue(name: str, *args, countdown: float | None = None, **kwargs):
    """Queue the task now (eagerly run when CELERY_TASK_ALWAYS_EAGER)."""
    task = task_get(name)
    if countdown is None:
        return task.delay(*args, **kwargs)
    return task.apply_async(args, kwargs, countdown=countdown)


def task_enqueue_on_commit(name: str, *args, **kwargs) -> None:
    """Queue the task once the current transaction commits (at once outside one)."""
    task_get(name)  # an unknown name fails here, in the caller's transaction, not silently after commit
    transaction.on_commit(lambda: task_enqueue(name, *args, **kwargs))
