"""Sealed secrets: stored unreadable, opened with SECRET_KEY or one of its fallbacks, and never with another key."""
from __future__ import annotations

import pytest

from infra.encryption import UnsealFailed, seal, unseal


def test_a_sealed_secret_opens_to_itself_and_does_not_show_it():
    sealed = seal("whsec_c2VjcmV0")
    assert "whsec_c2VjcmV0" not in sealed and "c2VjcmV0" not in sealed
    assert unseal(sealed) == "whsec_c2VjcmV0"
    assert seal("whsec_c2VjcmV0") != sealed  # a fresh IV each time


def test_after_a_secret_key_rotation_the_fallback_still_opens_it(settings):
    sealed = seal("whsec_c2VjcmV0")
    old = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-secret-key", [old]
    assert unseal(sealed) == "whsec_c2VjcmV0"
    settings.SECRET_KEY_FALLBACKS = []
    with pytest.raises(UnsealFailed):
        unseal(sealed)


def test_an_altered_value_does_not_open():
    sealed = seal("whsec_c2VjcmV0")
    with pytest.raises(UnsealFailed):
        unseal(sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:])
