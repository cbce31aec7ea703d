"""Tenancy fails closed in the ORM: every model with a tenant foreign key refuses an unscoped query."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.apps import apps
from django.db import models

from tenants.models import Tenant
from tenants.scoping import TenantScopeMissing

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db


def tenant_owned_models():
    found = []
    for model in apps.get_models():
        path = Path(model._meta.app_config.path)
        if not path.is_relative_to(ROOT) or ".venv" in path.parts:
            continue  # Django's own apps and installed packages
        fields = [f for f in model._meta.get_fields() if isinstance(f, models.ForeignKey) and f.related_model is Tenant]
        if fields or getattr(model, "tenant_field", None):
            found.append(model)
    return found


def test_the_walk_finds_every_tenant_owned_model():
    names = {m.__name__ for m in tenant_owned_models()}
    assert {"EndUser", "TenantApiKey", "Session", "Message", "SummaryAnchor", "BridgeSummary", "SessionLink",
            "ImportJob", "ContextReceipt", "MemoryRecord", "MemoryEvent", "JobRun", "VectorOutbox"} <= names


@pytest.mark.parametrize("model", tenant_owned_models(), ids=lambda m: m.__name__)
def test_an_unscoped_query_raises(model):
    manager = model.objects
    reads = [
        lambda: list(manager.all()),
        lambda: manager.filter(pk__isnull=False).first(),
        lambda: manager.count(),
        lambda: manager.exists(),
        lambda: manager.filter(pk="00000000-0000-0000-0000-000000000000" if model._meta.pk.get_internal_type()
                               == "UUIDField" else 0).update(),
        lambda: manager.all().delete(),
        lambda: list(manager.values_list("pk", flat=True)),
        lambda: list(manager.all().iterator()),
    ]
    for read in reads:
        with pytest.raises(TenantScopeMissing):
            read()


@pytest.mark.parametrize("model", tenant_owned_models(), ids=lambda m: m.__name__)
def test_a_scoped_query_runs_and_a_bypass_is_spelled_out(model, alice):
    def names_alice(qs) -> bool:
        _, params = qs.query.sql_with_params()
        return any(str(p).replace("-", "") == alice.pk.hex for p in params)

    scoped, unscoped = model.objects.for_tenant(alice), model.objects.unscoped()
    assert names_alice(scoped) and not names_alice(unscoped)  # the scope is a filter on alice, the bypass is none
    assert isinstance(scoped.count(), int) and isinstance(unscoped.count(), int)  # both run
    with pytest.raises(TenantScopeMissing):
        model.objects.for_tenant(None)


def test_an_or_cannot_widen_a_tenant_filter(alice, bob, alice_user):
    from django.db.models import Q

    from tenants.models import EndUser

    assert EndUser.objects.filter(tenant=alice).count() == 1  # a top-level tenant condition scopes the query
    with pytest.raises(TenantScopeMissing):
        EndUser.objects.filter(Q(tenant=alice) | Q(external_id="x")).count()
    with pytest.raises(TenantScopeMissing):
        EndUser.objects.exclude(tenant=bob).count()


def test_a_read_by_primary_key_alone_raises(alice, alice_session):
    from sessions.models import Session

    with pytest.raises(TenantScopeMissing):
        Session.objects.get(pk=alice_session.pk)
    assert Session.objects.for_tenant(alice).get(pk=alice_session.pk) == alice_session


def test_related_managers_are_scoped_by_their_parent_row(alice_session):
    from orchestration.messages import messages_append
    from sessions.services import NewMessage

    messages_append(tenant=alice_session.tenant, session_id=alice_session.pk,
                    items=[NewMessage(role="user", content="hello there")], enqueue_extraction=False)
    assert [m.content for m in alice_session.messages.all()] == ["hello there"]
