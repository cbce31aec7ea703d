"""The migration that gives memories learned_at: existing rows learn it from their creation event, and a live
imported memory's expiry moves onto it (with a payload write), while a live turn's memory is left as it is."""
from __future__ import annotations

import importlib
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory.models import MemoryEvent, MemoryRecord, VectorOutbox
from tests.memory.lifecycle_support import memory_make

pytestmark = pytest.mark.django_db(transaction=True)

SAID = datetime(2024, 1, 10, tzinfo=timezone.utc)


def test_backfill_counts_imported_lifetimes_from_their_creation(alice, alice_user):
    migration = importlib.import_module("memory.migrations.0004_lifetimes_from_learned_time")
    imported = memory_make(alice, alice_user, "Ada adopted a greyhound.", kind="event", created_at=SAID,
                           expires_at=SAID + timedelta(days=365))
    live = memory_make(alice, alice_user, "Ada flies on Friday.", kind="event")
    created = MemoryEvent.objects.unscoped().get(memory_uuid=imported.pk, action="created").created_at
    live_expiry = live.created_at + timedelta(days=365)
    # As the rows stood before the migration: no learned time of their own.
    MemoryRecord.objects.unscoped().filter(pk=imported.pk).update(learned_at=SAID)
    MemoryRecord.objects.unscoped().filter(pk=live.pk).update(learned_at=live.created_at, expires_at=live_expiry)
    VectorOutbox.objects.unscoped().all().delete()

    state = MigrationExecutor(connection).loader.project_state([("memory", "0004_lifetimes_from_learned_time")])
    migration.learned_at_backfill(state.apps, None)

    imported.refresh_from_db()
    live.refresh_from_db()
    assert imported.learned_at == created and imported.expires_at == created + timedelta(days=365)
    assert live.expires_at == live_expiry
    assert list(VectorOutbox.objects.unscoped().values_list("memory_uuid", "op")) == [(imported.pk, "payload")]
