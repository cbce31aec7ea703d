"""Fixtures for the admin tests: the sessions tests' small deterministic embedder (no model loads), a superuser and
an end user of Alice's."""
from __future__ import annotations

import pytest

from tests.sessions.conftest import word_embedder  # noqa: F401  (autouse: no model loads)


@pytest.fixture
def root():
    from django.contrib.auth.models import User

    return User.objects.create_superuser(username="root", password="pw")


@pytest.fixture
def dana(alice):
    from tenants.services import end_user_create

    return end_user_create(tenant=alice, external_id="dana-1", display_name="Dana")
