"""Which URLs a tenant may point a webhook at: http(s) only, no credentials in the URL, and (unless
WEBHOOK_ALLOW_PRIVATE_TARGETS) no loopback, private, link-local or otherwise non-public address, so a tenant cannot
make the service call into its own network. Checked when an endpoint is saved (the literal host) and before every
attempt (each address the host resolves to)."""
from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from infra.errors import ValidationFailed

MAX_URL_CHARS = 2000


class TargetRefused(Exception):
    """The URL's host is, or resolves to, an address webhooks may not reach."""


class TargetUnresolved(Exception):
    """The host did not resolve (for now): worth another attempt."""


def _address_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def webhook_url_clean(url) -> str:
    """The URL as stored, or ValidationFailed saying what is wrong with it."""
    if not isinstance(url, str) or not url.strip():
        raise ValidationFailed("url is required.", details={"url": ["This field is required."]})
    url = url.strip()
    if len(url) > MAX_URL_CHARS or any(c.isspace() or ord(c) < 32 for c in url):
        raise ValidationFailed("url is not a valid URL.", code="invalid_url", details={"url": ["Not a valid URL."]})
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # a port out of range raises ValueError
    except ValueError:
        raise ValidationFailed("url is not a valid URL.", code="invalid_url", details={"url": ["Not a valid URL."]})
    if parts.scheme not in ("http", "https") or not host:
        raise ValidationFailed("url must be an http:// or https:// URL with a host.", code="invalid_url",
                               details={"url": ["Use http:// or https:// and a host name."]})
    if parts.username is not None or parts.password is not None:
        raise ValidationFailed("url must not carry credentials; requests are signed instead.", code="invalid_url",
                               details={"url": ["Remove the user:password@ part."]})
    if not settings.WEBHOOK_ALLOW_PRIVATE_TARGETS:
        try:
            literal = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            literal = None
        if host == "localhost" or host.endswith(".localhost") or (literal is not None
                                                                   and not _address_public(str(literal))):
            raise ValidationFailed("url points at a private or loopback address, which webhooks may not reach.",
                                   code="url_not_allowed", details={"url": ["Use a public address."]})
    return url


def webhook_target_check(url: str) -> None:
    """Before an attempt: every address the host resolves to must be public (unless private targets are allowed).
    Raises TargetRefused (permanent) or TargetUnresolved (retry later)."""
    if settings.WEBHOOK_ALLOW_PRIVATE_TARGETS:
        return
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise TargetUnresolved(f"{parts.hostname} did not resolve: {exc}") from exc
    refused = sorted({info[4][0] for info in infos if not _address_public(info[4][0])})
    if refused:
        raise TargetRefused(f"{parts.hostname} resolves to a non-public address ({', '.join(refused)})")
