"""A per-tenant, per-job Redis lock (SET NX EX) so two runs of one job never work on one tenant at once."""
from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from infra.redis_client import Keys, get_redis

# Compare-and-delete: a run whose lock already expired must not release the lock a later run now holds.
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def job_lock_key(*, tenant_id, job: str) -> str:
    return Keys.lock(tenant_id, f"job:{job}")


def job_lock_acquire(*, tenant_id, job: str, ttl_seconds: int) -> str | None:
    """Returns the lock's token when taken, None when another run holds it."""
    token = uuid.uuid4().hex
    taken = get_redis().set(job_lock_key(tenant_id=tenant_id, job=job), token, nx=True, ex=max(1, int(ttl_seconds)))
    return token if taken else None


def job_lock_release(*, tenant_id, job: str, token: str) -> bool:
    return bool(get_redis().eval(_RELEASE, 1, job_lock_key(tenant_id=tenant_id, job=job), token))


@contextlib.contextmanager
def job_lock(*, tenant_id, job: str, ttl_seconds: int) -> Iterator[bool]:
    """Yields True when this run holds the lock; the lock is released on exit only if still ours."""
    token = job_lock_acquire(tenant_id=tenant_id, job=job, ttl_seconds=ttl_seconds)
    try:
        yield token is not None
    finally:
        if token is not None:
            job_lock_release(tenant_id=tenant_id, job=job, token=token)
