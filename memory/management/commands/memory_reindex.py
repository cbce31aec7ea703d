"""Rebuild every memory's Qdrant point from the database (the truth), with a progress bar.

Without --clean the rebuild never leaves retrieval empty: points are overwritten in place (deterministic ids)
and orphans are removed afterwards. With --clean each tenant's points are dropped first.
"""
from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from memory.lifecycle.reconcile import orphan_points_delete
from memory.models import MemoryRecord, MemoryStatus
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Re-embed and upsert every memory into the vector store, then remove orphan points."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", action="append", default=[],
                            help="Tenant slug or id (repeatable); default all.")
        parser.add_argument("--batch-size", type=int, default=128)
        parser.add_argument("--clean", action="store_true", help="Delete each tenant's points before rebuilding.")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, tenant, batch_size, clean, no_progress, **options):
        from infra.vector_store import Scope, get_vector_store
        from memory.points import points_for_records

        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        tenants = list(Tenant.objects.order_by("slug"))
        if tenant:
            wanted = set(tenant)
            tenants = [t for t in tenants if t.slug in wanted or str(t.pk) in wanted]
            missing = wanted - {t.slug for t in tenants} - {str(t.pk) for t in tenants}
            if missing:
                raise CommandError(f"Unknown tenant(s): {', '.join(sorted(missing))}")
        store = get_vector_store()
        store.ensure_collection()
        live = MemoryRecord.objects.unscoped().exclude(status=MemoryStatus.DELETED)  # every tenant's memories
        total = live.filter(tenant__in=tenants).count()
        upserted = orphans = 0
        with tqdm(total=total, unit="memory", desc="reindex", disable=no_progress, file=sys.stderr) as bar:
            for t in tenants:
                scope = Scope(tenant_id=str(t.pk))
                if clean:
                    store.delete_scope(scope)
                last = None
                while True:
                    qs = live.filter(tenant=t).order_by("pk")
                    if last is not None:
                        qs = qs.filter(pk__gt=last)
                    batch = list(qs[:batch_size])
                    if not batch:
                        break
                    store.upsert(points_for_records(batch))
                    upserted += len(batch)
                    bar.update(len(batch))
                    last = batch[-1].pk
                if not clean:
                    orphans += self._sweep(store, scope, t)
        self.stdout.write(f"reindexed {upserted} memories across {len(tenants)} tenant(s); "
                          f"removed {orphans} orphan point(s)")

    @staticmethod
    def _sweep(store, scope, tenant) -> int:
        removed, offset = 0, None
        while True:
            _, gone, offset = orphan_points_delete(tenant, store, scope, limit=512, offset=offset)
            removed += gone
            if offset is None:
                return removed
