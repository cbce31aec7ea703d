"""One writer at a time on a user's memories.

Verification reads what the user already has (the slot's value, the nearest memory) and the write builds on what it
read, so two writers for one user (extractions running side by side, the remember tool during a turn) would both
create the same memory or both supersede one slot value. The lock spans verification, the transaction and the
vector writes applied after commit, so the next writer's nearest-memory search sees the new point. It lives in Redis
so that every topology (embedded threads, worker processes, web processes) shares it.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager

from django.conf import settings
from redis import exceptions as redis_errors

from infra.errors import ServiceUnavailable
from infra.redis_client import Keys, get_redis

log = logging.getLogger(__name__)


@contextmanager
def user_memory_lock(*, tenant_id, user_id):
    """Hold the user's memory-write lock. Raises ServiceUnavailable (retryable, Retry-After) when another writer
    keeps it past the wait, and when Redis cannot be asked: an unlocked write could duplicate or double-supersede a
    memory, so the extraction task retries later and a request answers 503 instead of writing unguarded."""
    lock = get_redis().lock(Keys.memory_writes_lock(tenant_id, user_id),
                            timeout=settings.MEMORY_USER_LOCK_SECONDS,
                            blocking_timeout=settings.MEMORY_USER_LOCK_WAIT_SECONDS,
                            # A holder keeps it for milliseconds; redis-py's default poll (0.1 s) would add up to that.
                            sleep=0.005)
    try:
        acquired = lock.acquire()
    except redis_errors.RedisError as exc:
        log.warning("memory write lock unavailable for user %s, the write waits: %s", user_id, exc)
        raise ServiceUnavailable("The lock store is unavailable, so this user's memories cannot be updated safely; "
                                 "retry shortly.", code="service_unavailable", headers={"Retry-After": "5"}) from exc
    if not acquired:
        raise ServiceUnavailable("Another update of this user's memories is still running; retry shortly.",
                                 headers={"Retry-After": "1"})
    try:
        yield
    finally:
        try:
            lock.release()
        except (redis_errors.LockError, redis_errors.RedisError):  # expired or Redis gone: it frees itself
            log.warning("memory write lock of user %s was not released cleanly", user_id)
