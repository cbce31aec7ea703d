"""A per-tenant, per-job Redis lock (redis-py's Lock) so two runs of one job never work on one tenant at once."""
from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from infra.redis_client import Keys, get_redis


def job_lock_key(*, tenant_id, job: str) -> str:
    return Keys.lock(tenant_id, f"job:{job}")


def _lock(*, tenant_id, job: str, ttl_seconds: int, token: str | None = None):
    lock = get_redis().lock(job_lock_key(tenant_id=tenant_id, job=job), timeout=max(1, int(ttl_seconds)),
                            blocking=False)
    if token is not None:
        lock.local.token = token.encode()
    return lock


def job_lock_acquire(*, tenant_id, job: str, ttl_seconds: int) -> str | None:
    """Returns the lock's token when taken, None when another run holds it."""
    token = uuid.uuid4().hex
    return token if _lock(tenant_id=tenant_id, job=job, ttl_seconds=ttl_seconds).acquire(token=token) else None


def job_lock_release(*, tenant_id, job: str, token: str) -> bool:
    """Release only while the lock is still this token's: a run whose lock expired leaves a later run's alone."""
    from redis.exceptions import LockError

    try:
        _lock(tenant_id=tenant_id, job=job, ttl_seconds=1, token=token).release()
    except LockError:
        return False
    return True


@contextlib.contextmanager
def job_lock(*, tenant_id, job: str, ttl_seconds: int) -> Iterator[bool]:
    """Yields True when this run holds the lock; the lock is released on exit only if still ours."""
    token = job_lock_acquire(tenant_id=tenant_id, job=job, ttl_seconds=ttl_seconds)
    try:
        yield token is not None
    finally:
        if token is not None:
            job_lock_release(tenant_id=tenant_id, job=job, token=token)
