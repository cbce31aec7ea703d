"""The bearer token (METRICS_TOKEN) that guards what only operators may read: /metrics and /readyz's detail."""
from __future__ import annotations

import hmac

from django.conf import settings


def operator_token_given(request) -> bool:
    """True when the request carries "Authorization: Bearer <METRICS_TOKEN>" and a token is configured."""
    token = settings.METRICS_TOKEN
    if not token:
        return False
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
