"""The Redis adapter: one connection pool from REDIS_URL, and the one builder of every key we write."""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import redis
from django.conf import settings

from .errors import ServiceUnavailable


@functools.lru_cache(maxsize=1)
def _pool() -> redis.ConnectionPool:
    return redis.ConnectionPool.from_url(
        settings.REDIS_URL, socket_connect_timeout=1.0, socket_timeout=2.0, health_check_interval=30
    )


def get_redis() -> redis.Redis:
    return _client(_pool())


@functools.lru_cache(maxsize=4)
def _client(pool: redis.ConnectionPool) -> redis.Redis:
    # Building a client costs more than a round trip (its callback table); clients are thread-safe, share one.
    return redis.Redis(connection_pool=pool, decode_responses=False)


@contextlib.contextmanager
def held_lock(key: str, *, timeout: float) -> Iterator[bool]:
    """redis-py's Lock, taken without waiting: yields whether this caller holds it. It expires after `timeout` if
    the holder dies, and is released on exit only while it is still this caller's (redis-py checks its token)."""
    lock = get_redis().lock(key, timeout=max(1, timeout), blocking=False)
    try:
        held = lock.acquire(blocking=False)
    except redis.exceptions.RedisError as exc:  # no lock store: the work waits for it rather than running unlocked
        raise ServiceUnavailable("The lock store is unavailable; retry shortly.", code="lock_store_unavailable",
                                 headers={"Retry-After": "5"}) from exc
    try:
        yield held
    finally:
        if held:
            try:
                lock.release()
            except (redis.exceptions.LockError, redis.exceptions.RedisError):
                pass  # it expired (another caller may hold it now) or Redis went away: it frees itself


def reset_pool() -> None:
    """Drop pooled connections (after a Redis restart in tests, or a fork)."""
    if _pool.cache_info().currsize:
        _pool().disconnect()
    _pool.cache_clear()


class Keys:
    """Every Redis key is tenant-prefixed and built here, so erase and audits can find them all."""

    @staticmethod
    def _root() -> str:
        return settings.REDIS_KEY_PREFIX

    @classmethod
    def tenant_pattern(cls, tenant_id) -> str:
        return f"{cls._root()}:t:{tenant_id}:*"

    @classmethod
    def user_pattern(cls, tenant_id, user_id) -> str:
        return f"{cls._root()}:t:{tenant_id}:u:{user_id}:*"

    @classmethod
    def session_buffer(cls, tenant_id, user_id, session_id) -> str:
        return f"{cls._root()}:t:{tenant_id}:u:{user_id}:buf:{session_id}"

    @classmethod
    def lock(cls, tenant_id, name: str) -> str:
        """A tenant-wide lock (a lifecycle job's). A lock on one user's data is a user_lock."""
        return f"{cls._root()}:t:{tenant_id}:lock:{name}"

    @classmethod
    def user_lock(cls, tenant_id, user_id, name: str) -> str:
        """A lock or flag on one user's data (their memory writes, a session's fold, a message's extraction): it
        carries the user, so erasing the user finds it by name."""
        return f"{cls._root()}:t:{tenant_id}:u:{user_id}:lock:{name}"

    @classmethod
    def idempotency(cls, tenant_id, user_id, key_digest: str) -> str:
        """A request's Idempotency-Key and the response it got: it carries the user, so erasing them drops it."""
        return f"{cls._root()}:t:{tenant_id}:u:{user_id}:idem:{key_digest}"

    @classmethod
    def anchor_fold_lock(cls, tenant_id, user_id, session_id) -> str:
        return cls.user_lock(tenant_id, user_id, f"anchor-fold:{session_id}")

    @classmethod
    def anchor_queued_flag(cls, tenant_id, user_id, session_id) -> str:
        return cls.user_lock(tenant_id, user_id, f"anchor-queued:{session_id}")

    @classmethod
    def extract_lock(cls, tenant_id, user_id, message_id) -> str:
        return cls.user_lock(tenant_id, user_id, f"extract:{message_id}")

    @classmethod
    def import_backlog_flag(cls, tenant_id, user_id) -> str:
        """Set while the user's import backlog chain is queued or running (orchestration/imports.py)."""
        return cls.user_lock(tenant_id, user_id, "import-backlog")

    @classmethod
    def memory_writes_lock(cls, tenant_id, user_id) -> str:
        return cls.user_lock(tenant_id, user_id, "memory-writes")

    @classmethod
    def quota(cls, tenant_id, name: str, window: int) -> str:
        return f"{cls._root()}:t:{tenant_id}:quota:{name}:{window}"

    @classmethod
    def global_lock(cls, name: str) -> str:
        return f"{cls._root()}:lock:{name}"
