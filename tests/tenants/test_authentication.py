"""Bearer key resolution: each way a key can fail names its reason, and a good key costs one query."""
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework import exceptions

from tenants.authentication import tenant_from_bearer
from tenants.models import TenantApiKey

pytestmark = pytest.mark.django_db


def _fails_with(header, message):
    with pytest.raises(exceptions.AuthenticationFailed) as caught:
        tenant_from_bearer(header)
    assert str(caught.value.detail) == message


def test_good_key_resolves_to_its_tenant_in_one_query(alice, django_assert_num_queries):
    with django_assert_num_queries(1):
        tenant, key = tenant_from_bearer(f"Bearer {alice.plain_key}")
        assert tenant.slug == alice.slug  # the tenant came with the key, no second query
    assert key.prefix == alice.plain_key.partition(".")[0]


def test_wrong_secret_behind_a_real_prefix_is_invalid(alice):
    prefix = alice.plain_key.partition(".")[0]
    _fails_with(f"Bearer {prefix}.not-the-secret", "Invalid or revoked API key.")
    _fails_with(f"Bearer {prefix}", "Invalid or revoked API key.")


def test_revoked_key_is_invalid(alice):
    TenantApiKey.objects.unscoped().filter(tenant=alice).update(revoked=True)
    _fails_with(f"Bearer {alice.plain_key}", "Invalid or revoked API key.")


def test_expired_key_says_so(alice):
    TenantApiKey.objects.unscoped().filter(tenant=alice).update(expiry_date=timezone.now() - timedelta(seconds=1))
    _fails_with(f"Bearer {alice.plain_key}", "API key has expired.")
    TenantApiKey.objects.unscoped().filter(tenant=alice).update(expiry_date=timezone.now() + timedelta(days=1))
    assert tenant_from_bearer(f"Bearer {alice.plain_key}")[0].pk == alice.pk


def test_disabled_tenant_is_refused(alice):
    type(alice).objects.filter(pk=alice.pk).update(is_active=False)
    _fails_with(f"Bearer {alice.plain_key}", "Tenant is disabled.")


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer   ", "Token abc.def"])
def test_missing_bearer_is_not_authenticated(header):
    with pytest.raises(exceptions.NotAuthenticated):
        tenant_from_bearer(header)
