"""Idempotency-Key on the OpenAI surface: a request sent again with the key it was first sent with gets the first
response back, and its turn does not run (or store anything) twice.

A key is claimed before the turn, held while it runs, and keeps the finished response for a day. The same key with
another request body is refused; a second request while the first still runs is told to retry. A turn that fails
frees its key, so the retry runs it."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from django.conf import settings

from infra.errors import Conflict, ValidationFailed
from infra.redis_client import Keys, get_redis

KEEP_SECONDS = 24 * 3600
MAX_KEY_CHARS = 255


@dataclass(frozen=True)
class Claim:
    redis_key: str
    fingerprint: str

    def keep(self, *, body: str, content_type: str, headers: dict) -> None:
        """The finished response, for the key's retries."""
        get_redis().set(self.redis_key, json.dumps({"state": "done", "fp": self.fingerprint, "body": body,
                                                    "content_type": content_type, "headers": headers}),
                        ex=KEEP_SECONDS)

    def release(self) -> None:
        get_redis().delete(self.redis_key)


@dataclass(frozen=True)
class Replay:
    body: str
    content_type: str
    headers: dict


def idempotency_key_parse(value: str | None) -> str | None:
    value = (value or "").strip()
    if not value:
        return None
    if len(value) > MAX_KEY_CHARS or not value.isprintable():
        raise ValidationFailed(f"Idempotency-Key must be printable text of at most {MAX_KEY_CHARS} characters.",
                               code="invalid_idempotency_key", details={"param": "Idempotency-Key"})
    return value


def idempotency_claim(*, tenant_id, user_id, key: str, request_parts: list[bytes | str]) -> Claim | Replay:
    """Claim `key` for this request, or the response its first request got."""
    fingerprint = hashlib.sha256(b"\0".join(p.encode() if isinstance(p, str) else p for p in request_parts)).hexdigest()
    redis_key = Keys.idempotency(tenant_id, user_id, hashlib.sha256(key.encode()).hexdigest())
    r = get_redis()
    pending = json.dumps({"state": "pending", "fp": fingerprint})
    for _ in range(2):  # the first holder may free the key between our two reads
        if r.set(redis_key, pending, nx=True, ex=int(settings.ASSISTANT_WALL_CLOCK_SECONDS) + 60):
            return Claim(redis_key=redis_key, fingerprint=fingerprint)
        raw = r.get(redis_key)
        if raw is None:
            continue
        held = json.loads(raw)
        if held.get("fp") != fingerprint:
            raise ValidationFailed("This Idempotency-Key was used with a different request; use a new key for a new "
                                   "request.", code="idempotency_key_reused", status=422,
                                   details={"param": "Idempotency-Key"})
        if held.get("state") != "done":
            raise Conflict("A request with this Idempotency-Key is still running; retry shortly.",
                           code="idempotency_in_progress", headers={"Retry-After": "2"})
        return Replay(body=held["body"], content_type=held["content_type"], headers=held.get("headers") or {})
    raise Conflict("A request with this Idempotency-Key is still running; retry shortly.",
                   code="idempotency_in_progress", headers={"Retry-After": "2"})
