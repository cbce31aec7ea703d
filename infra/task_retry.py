"""Which task failures are worth a retry: outages are (a later attempt may get past them), bugs and refusals are not.

An AppError says itself whether it is retryable; database and Redis connection errors are outages. Tasks declare
`autoretry_for=RETRY_ON` and wrap their body with `retry_outages`, so a permanent error fails the task at once
instead of being retried with backoff for minutes.
"""
from __future__ import annotations

import functools

import redis
from django.db import InterfaceError, OperationalError

from .errors import AppError


class RetryableFailure(Exception):
    """An outage met by a task (a dependency down); raised in place of a retryable AppError."""


RETRY_ON = (RetryableFailure, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OperationalError,
            InterfaceError)


def retry_outages(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AppError as exc:
            if exc.retryable:
                raise RetryableFailure(f"{exc.code}: {exc.message}") from exc
            raise
    return wrapper


def service_task(*, max_retries: int = 5, backoff_max: int = 300, retry_on: tuple = RETRY_ON, **options):
    """A Celery task that wraps one service, with the project's one retry policy: late acks (a task lost with its
    worker runs again, so every task is idempotent), outages retried with capped, jittered backoff, and anything
    else failing at once. The task is bound: its first argument is the task itself."""
    from celery import shared_task

    def decorate(fn):
        return shared_task(bind=True, acks_late=True, autoretry_for=retry_on, retry_backoff=True,
                           retry_backoff_max=backoff_max, retry_jitter=True, max_retries=max_retries,
                           **options)(retry_outages(fn))
    return decorate
