"""Tenant-scoped querysets that fail closed: a query of a tenant-owned model runs only when it is scoped.

A queryset is scoped when it was made by `.for_tenant(tenant)`, when one of its top-level conditions pins the
tenant (`filter(tenant=...)`, or `tenant__in=` a non-empty list: conditions joined by AND, so no OR can widen
them), or when it is a related manager's (`session.messages`, scoped by the parent row it was reached from).
Anything else raises TenantScopeMissing before it reaches the database. A query that must span tenants (the API-key
lookup, a beat job's fan-out, staff tooling) says so with `.unscoped()`, so a reviewer sees every one.
"""
from __future__ import annotations

from django.db import models
from django.db.models.lookups import Exact, In


class TenantScopeMissing(RuntimeError):
    """A tenant-owned model was queried without a tenant: a bug, never a result spanning tenants."""


def tenant_key(tenant) -> object:
    """A tenant given as a row or as its id; None and empty values are refused."""
    value = getattr(tenant, "pk", tenant)
    if value is None or value == "":
        raise TenantScopeMissing("for_tenant() needs a tenant.")
    return value


class TenantQuerySet(models.QuerySet):
    # The model's field that names its tenant (a foreign key, or a plain column for rows that outlive the tenant).
    tenant_field = "tenant"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._tenant_scope: str | None = None

    def _clone(self):
        clone = super()._clone()
        clone._tenant_scope = self._tenant_scope
        return clone

    def for_tenant(self, tenant) -> TenantQuerySet:
        qs = self.filter(**{self._field_name(): tenant_key(tenant)})
        qs._tenant_scope = "tenant"
        return qs

    def unscoped(self) -> TenantQuerySet:
        """Deliberately across tenants; each caller says why."""
        qs = self._chain()
        qs._tenant_scope = "unscoped"
        return qs

    def _field_name(self) -> str:
        return getattr(self.model, "tenant_field", self.tenant_field)

    def _pinned_by_filter(self) -> bool:
        column = self.model._meta.get_field(self._field_name())
        for child in self.query.where.children:  # top-level conjuncts only
            target = getattr(getattr(child, "lhs", None), "target", None)
            if target is not column:
                continue
            if isinstance(child, Exact) and child.rhs is not None:
                return True
            if isinstance(child, In) and child.rhs:
                return True
        return False

    def _require_scope(self) -> None:
        if self._tenant_scope is not None or "instance" in self._hints or self._pinned_by_filter():
            return
        raise TenantScopeMissing(
            f"{self.model.__name__} queried without a tenant: use .for_tenant(tenant), or .unscoped() where the "
            "query must span tenants.")

    # Every way a queryset reaches the database goes through one of these.
    def _fetch_all(self):
        if self._result_cache is None:
            self._require_scope()
        super()._fetch_all()

    def iterator(self, *args, **kwargs):
        self._require_scope()
        return super().iterator(*args, **kwargs)

    def count(self):
        if self._result_cache is None:
            self._require_scope()
        return super().count()

    def exists(self):
        if self._result_cache is None:
            self._require_scope()
        return super().exists()

    def aggregate(self, *args, **kwargs):
        self._require_scope()
        return super().aggregate(*args, **kwargs)

    def update(self, **kwargs):
        self._require_scope()
        return super().update(**kwargs)

    def _update(self, values):
        self._require_scope()
        return super()._update(values)

    def delete(self):
        self._require_scope()
        return super().delete()

    def explain(self, **options):
        self._require_scope()
        return super().explain(**options)


class TenantManager(models.Manager.from_queryset(TenantQuerySet)):
    """The default manager of every tenant-owned model."""
