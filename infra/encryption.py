"""Secrets the service must read back (webhook signing secrets) are stored encrypted, never in the clear.

API keys are hashed because the service only ever compares them; a signing secret must be used again to sign, so
it is sealed with Fernet (AES-128-CBC + HMAC-SHA256, from the `cryptography` package) under a key derived from
SECRET_KEY. SECRET_KEY_FALLBACKS still open what they sealed, so rotating SECRET_KEY the Django way keeps every
stored secret readable.
"""
from __future__ import annotations

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

_INFO = b"continuum sealed secrets v1"


class UnsealFailed(Exception):
    """A sealed value that no current or fallback key opens (the keys changed, or the value was altered)."""


def _fernet_for(secret_key: str) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


@functools.lru_cache(maxsize=8)
def _keys(secret_key: str, fallbacks: tuple[str, ...]) -> MultiFernet:
    if not secret_key:
        raise ImproperlyConfigured("SECRET_KEY is empty: secrets cannot be sealed.")
    return MultiFernet([_fernet_for(k) for k in (secret_key, *fallbacks) if k])


def _current() -> MultiFernet:
    return _keys(settings.SECRET_KEY, tuple(getattr(settings, "SECRET_KEY_FALLBACKS", ()) or ()))


def seal(plain: str) -> str:
    return _current().encrypt(plain.encode()).decode()


def unseal(sealed: str) -> str:
    try:
        return _current().decrypt(sealed.encode()).decode()
    except InvalidToken as exc:
        raise UnsealFailed("A sealed secret could not be opened with SECRET_KEY or its fallbacks.") from exc

