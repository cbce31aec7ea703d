"""The signature a receiver checks: Standard Webhooks' format, and every way a forged or stale request fails."""
from __future__ import annotations

import time

import pytest

from webhooks.signing import (
    TOLERANCE_SECONDS,
    WebhookVerificationError,
    webhook_headers,
    webhook_secret_generate,
    webhook_signature,
    webhook_verify,
)

BODY = b'{"id":"e1","type":"memory.created","data":{"memory_id":"m1"}}'


def _signed(secret, *, body=BODY, msg_id="evt_1", at=None):
    return webhook_headers(signing_secrets=[secret], msg_id=msg_id, timestamp=int(at or time.time()), body=body)


def test_the_signature_matches_the_standard_webhooks_reference_vector():
    # The example of the Standard Webhooks specification and its libraries' tests.
    assert webhook_signature(secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", msg_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
                             timestamp=1614265330, body=b'{"test": 2432232314}') == \
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_a_signed_request_verifies_with_headers_in_any_case():
    secret = webhook_secret_generate()
    headers = {k.title(): v for k, v in _signed(secret).items()}
    webhook_verify(secret=secret, headers=headers, body=BODY)
    webhook_verify(secret=secret, headers=headers, body=BODY.decode())


def test_a_wrong_secret_fails():
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        webhook_verify(secret=webhook_secret_generate(), headers=_signed(webhook_secret_generate()), body=BODY)


def test_a_tampered_body_fails():
    secret = webhook_secret_generate()
    with pytest.raises(WebhookVerificationError):
        webhook_verify(secret=secret, headers=_signed(secret), body=BODY.replace(b"m1", b"m2"))


def test_a_replayed_request_under_another_event_id_fails():
    secret = webhook_secret_generate()
    headers = {**_signed(secret), "webhook-id": "evt_2"}
    with pytest.raises(WebhookVerificationError):
        webhook_verify(secret=secret, headers=headers, body=BODY)


@pytest.mark.parametrize("age", [TOLERANCE_SECONDS + 5, -(TOLERANCE_SECONDS + 5)], ids=["old", "future"])
def test_a_timestamp_outside_the_replay_window_fails(age):
    secret = webhook_secret_generate()
    headers = _signed(secret, at=time.time() - age)
    with pytest.raises(WebhookVerificationError, match="replay window"):
        webhook_verify(secret=secret, headers=headers, body=BODY)


def test_a_timestamp_inside_the_window_passes():
    secret = webhook_secret_generate()
    webhook_verify(secret=secret, headers=_signed(secret, at=time.time() - TOLERANCE_SECONDS + 5), body=BODY)


@pytest.mark.parametrize("drop", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_fails(drop):
    secret = webhook_secret_generate()
    headers = _signed(secret)
    del headers[drop]
    with pytest.raises(WebhookVerificationError, match="missing"):
        webhook_verify(secret=secret, headers=headers, body=BODY)


def test_a_garbled_timestamp_or_signature_fails():
    secret = webhook_secret_generate()
    with pytest.raises(WebhookVerificationError):
        webhook_verify(secret=secret, headers={**_signed(secret), "webhook-timestamp": "soon"}, body=BODY)
    with pytest.raises(WebhookVerificationError):
        webhook_verify(secret=secret, headers={**_signed(secret), "webhook-signature": "v2,abc"}, body=BODY)


def test_during_a_rotation_either_secret_verifies_the_same_request():
    old, new = webhook_secret_generate(), webhook_secret_generate()
    headers = webhook_headers(signing_secrets=[new, old], msg_id="evt_1", timestamp=int(time.time()), body=BODY)
    assert len(headers["webhook-signature"].split()) == 2
    webhook_verify(secret=old, headers=headers, body=BODY)
    webhook_verify(secret=new, headers=headers, body=BODY)


def test_secrets_are_random_and_in_the_whsec_format():
    a, b = webhook_secret_generate(), webhook_secret_generate()
    assert a != b and a.startswith("whsec_") and len(a) > 40
