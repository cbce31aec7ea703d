"""Per-tenant quotas: requests and tokens a minute, counted atomically in Redis; input size checked before LLM calls."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import redis
from django.conf import settings

from . import clock
from .errors import RateLimited, ServiceUnavailable, ValidationFailed
from .redis_client import Keys, get_redis
from .tokens import count_tokens

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60
# What a refused client is told to wait while the quota store is unreachable: short, a restart takes seconds.
QUOTA_STORE_RETRY_AFTER = 5

# Sliding-window counter: the previous fixed window's count is weighted by how much of it still overlaps the
# last 60 s. Estimate and increment happen in one script, so parallel requests cannot both take the last slot,
# and a refused request is not counted (a client hammering a closed quota does not push its own reopening back).
# KEYS: current window, previous window. ARGV: limit, cost, fraction of the current window elapsed (0..1),
# window seconds, enforce (1 refuses over the limit; 0 records the cost anyway, e.g. tokens already spent).
# Returns {admitted (1|0), current window count, previous window count} (counts before this cost when refused).
_SLIDING_WINDOW_LUA = """
local limit = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local frac = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local enforce = ARGV[5] == '1'
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
local estimate = prev * (1 - frac) + cur
if enforce and estimate + cost > limit then
  return {0, cur, prev}
end
cur = redis.call('INCRBY', KEYS[1], cost)
redis.call('EXPIRE', KEYS[1], window * 2 + 5)
return {1, cur, prev}
"""


@dataclass(frozen=True)
class QuotaDecision:
    admitted: bool
    limit: int
    used: float  # the sliding estimate including this cost
    retry_after: int  # seconds until the cost would fit; 0 when admitted


def _retry_after(*, limit: int, cost: int, prev: float, cur: float, frac: float, window: int) -> int:
    """Seconds until prev*(1-frac') + cur + cost <= limit, assuming no further traffic."""
    room = limit - cost - cur
    if room >= 0 and prev > 0:
        # Still inside this window: wait for enough of the previous window to slide out.
        x = max(0.0, (1 - frac) - room / prev)
        return max(1, math.ceil(x * window))
    # This window alone is over: after it ends it becomes the weighted previous one.
    wait = (1 - frac) * window
    if cur > 0 and limit - cost < cur:
        wait += (1 - (limit - cost) / cur) * window
    return max(1, math.ceil(wait))


def _consume(*, tenant_id, name: str, limit: int, cost: int, enforce: bool) -> QuotaDecision:
    now = clock.now().timestamp()
    window_index = int(now // WINDOW_SECONDS)
    frac = (now - window_index * WINDOW_SECONDS) / WINDOW_SECONDS
    cur_key = Keys.quota(tenant_id, name, window_index)
    prev_key = Keys.quota(tenant_id, name, window_index - 1)
    script = get_redis().register_script(_SLIDING_WINDOW_LUA)  # EVALSHA, loading the script on first use
    admitted, cur, prev = script(keys=[cur_key, prev_key],
                                 args=[limit, cost, repr(frac), WINDOW_SECONDS, 1 if enforce else 0])
    if admitted:
        return QuotaDecision(True, limit, prev * (1 - frac) + cur, 0)
    return QuotaDecision(False, limit, prev * (1 - frac) + cur + cost, _retry_after(
        limit=limit, cost=cost, prev=prev, cur=cur, frac=frac, window=WINDOW_SECONDS))


def _guarded(fn, *, what: str, tenant_id):
    """Run a quota operation. When Redis is down the quota cannot be counted: refuse with a retryable 503, unless an
    operator set CONTINUUM_QUOTA_FAIL_OPEN, in which case the request is admitted and the outage logged."""
    try:
        return fn()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        if not settings.CONTINUUM_QUOTA_FAIL_OPEN:
            log.warning("quota store unavailable, refusing %s for tenant %s: %s", what, tenant_id, exc)
            raise ServiceUnavailable("The rate limiter is unavailable, so requests are refused; retry shortly.",
                                     headers={"Retry-After": str(QUOTA_STORE_RETRY_AFTER)}) from exc
        log.warning("quota store unavailable, admitting %s for tenant %s: %s", what, tenant_id, exc)
        return None


def _refuse(decision: QuotaDecision, *, name: str) -> None:
    unit = "requests" if name == "requests" else "tokens"
    raise RateLimited(
        f"Quota exceeded: at most {decision.limit} {unit} per minute. Retry in {decision.retry_after} s.",
        code="rate_limited",
        details={"quota": f"{unit}_per_minute", "limit": decision.limit, "retry_after_seconds": decision.retry_after},
        headers={"Retry-After": str(decision.retry_after)},
    )


def quota_charge_request(*, tenant) -> None:
    """Count one API request against the tenant's requests_per_minute; raise RateLimited (429) when over."""
    limit = int(tenant.requests_per_minute)
    decision = _guarded(lambda: _consume(tenant_id=tenant.id, name="requests", limit=limit, cost=1, enforce=True),
                        what="request", tenant_id=tenant.id)
    if decision is not None and not decision.admitted:
        _refuse(decision, name="requests")


def quota_charge_tokens(*, tenant, tokens: int, enforce: bool = True) -> None:
    """Charge LLM tokens against the tenant's tokens_per_minute before the call is made.

    Raises RateLimited (429, Retry-After) when the charge does not fit in the last minute's budget, and
    ValidationFailed (400) when it could never fit. With enforce=False the tokens are recorded without refusing
    (for completion tokens learned after a call that was already admitted).
    """
    tokens = int(tokens)
    if tokens <= 0:
        return
    limit = int(tenant.tokens_per_minute)
    if enforce and tokens > limit:
        raise ValidationFailed(
            f"This request needs {tokens} tokens; the tenant's quota is {limit} tokens per minute.",
            code="exceeds_token_quota", details={"tokens": tokens, "limit": limit})
    decision = _guarded(
        lambda: _consume(tenant_id=tenant.id, name="tokens", limit=limit, cost=tokens, enforce=enforce),
        what=f"{tokens} tokens", tenant_id=tenant.id)
    if decision is not None and not decision.admitted:
        _refuse(decision, name="tokens")


def input_tokens_check(*, tenant, text: str) -> int:
    """Refuse (400, before any LLM call) input longer than the tenant's max_input_tokens; return its token count."""
    tokens = count_tokens(text or "")
    limit = int(tenant.max_input_tokens)
    if tokens > limit:
        raise ValidationFailed(
            f"Input is {tokens} tokens; the limit is {limit}.",
            code="too_many_tokens", details={"tokens": tokens, "limit": limit})
    return tokens
