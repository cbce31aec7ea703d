"""Webhook signatures in the Standard Webhooks format (https://www.standardwebhooks.com), with the stdlib only.

Every request carries three headers:
    webhook-id         the event id; the same on every retry, so a receiver drops what it has already handled
    webhook-timestamp  Unix seconds when this attempt was signed
    webhook-signature  "v1,<base64 HMAC-SHA256>", space-separated when a rotated secret is still valid

The signature is HMAC-SHA256 over "{webhook-id}.{webhook-timestamp}.{body}", keyed with the base64 part of the
endpoint's secret ("whsec_<base64>"). Signing the id as well as the timestamp and body means a captured request
cannot be replayed under a fresh id to slip past a receiver's duplicate check. A receiver refuses a timestamp more
than TOLERANCE_SECONDS away from its clock (the replay window).

`webhook_verify` is what a receiver runs; it imports nothing outside the standard library, so it can be copied
as is. The official Standard Webhooks libraries (and Svix's) verify these requests too.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable, Mapping

SECRET_PREFIX = "whsec_"
TOLERANCE_SECONDS = 5 * 60


class WebhookVerificationError(Exception):
    """The request is not a valid, fresh webhook from the holder of the secret."""


def webhook_secret_generate() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def webhook_signature(*, secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One "v1,<base64>" signature of this attempt."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(_key(secret), signed, hashlib.sha256).digest()).decode()


def webhook_headers(*, signing_secrets: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers of one attempt, signed with every secret given (the current one first)."""
    signatures = " ".join(webhook_signature(secret=s, msg_id=msg_id, timestamp=timestamp, body=body)
                          for s in signing_secrets)
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": signatures}


def webhook_verify(*, secret: str, headers: Mapping[str, str], body: bytes | str,
                   tolerance: int = TOLERANCE_SECONDS, now: float | None = None) -> None:
    """Raise WebhookVerificationError unless `body` with these headers was signed with `secret` within
    `tolerance` seconds of now. Pass the body exactly as received (bytes), before any JSON parsing."""
    lower = {k.lower(): v for k, v in headers.items()}
    msg_id, stamp, signatures = (lower.get("webhook-id"), lower.get("webhook-timestamp"),
                                 lower.get("webhook-signature"))
    if not (msg_id and stamp and signatures):
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is outside the replay window")
    raw = body.encode() if isinstance(body, str) else body
    try:
        expected = webhook_signature(secret=secret, msg_id=msg_id, timestamp=timestamp, body=raw).split(",", 1)[1]
    except ValueError:
        raise WebhookVerificationError("the secret is not a whsec_<base64> secret") from None
    for candidate in signatures.split():
        version, _, value = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), expected.encode()):
            return
    raise WebhookVerificationError("no signature matches")
