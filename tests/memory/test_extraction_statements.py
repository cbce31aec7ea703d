"""What one message's extraction asks of the database: the writes it must make, and no read it can do without."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.actions import memory_id_for
from memory.models import MemoryRecord
from orchestration.messages import message_extract
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_endpoint_create

from .memory_support import record_turns

pytestmark = pytest.mark.django_db(transaction=True)

# One message, several memories: the episode and the rules' facts and preferences.
FLIGHT = "I need a flight from SFO to NYC next Tuesday under $400. I prefer aisle seats and I never fly United."


def _extract_capturing(tenant, user):
    _, (message,) = record_turns(tenant, user, [("user", FLIGHT)], extract=False)
    with CaptureQueriesContext(connection) as queries:
        result = message_extract(tenant_id=tenant.pk, message_id=message.pk)
    assert result.status == "done"
    return message, [q["sql"] for q in queries.captured_queries]


def test_the_endpoints_are_read_once_however_many_memories_a_message_writes(alice, alice_user, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    webhook_endpoint_create(tenant=alice, url="https://hooks.example.com/continuum")
    _, statements = _extract_capturing(alice, alice_user)
    written = MemoryRecord.objects.for_tenant(alice).filter(user=alice_user).count()
    assert written >= 3
    # Every memory is still announced (read once, not skipped).
    assert WebhookDelivery.objects.for_tenant(alice).filter(event_type="memory.created").count() == written
    endpoint_reads = [s for s in statements if s.startswith("SELECT") and '"webhooks_webhookendpoint"' in s]
    assert len(endpoint_reads) == 1, endpoint_reads


def test_a_first_extraction_does_not_look_for_rows_its_claim_proves_absent(alice, alice_user):
    message, statements = _extract_capturing(alice, alice_user)
    first_insert = next(i for i, s in enumerate(statements) if s.startswith('INSERT INTO "memory_memoryrecord"'))
    own_ids = {memory_id_for(str(message.pk), n).hex for n in range(3)}
    lookups = [s for s in statements[:first_insert] if s.startswith("SELECT") and '"memory_memoryrecord"' in s
               and any(i in s.replace("-", "") for i in own_ids)]
    assert lookups == []


def test_the_points_are_applied_with_one_read_of_the_outbox(alice, alice_user):
    _, statements = _extract_capturing(alice, alice_user)
    outbox_reads = [s for s in statements if s.startswith("SELECT") and '"memory_vectoroutbox"' in s]
    assert len(outbox_reads) == 1, outbox_reads


def test_a_messages_history_rows_are_inserted_in_one_statement(alice, alice_user):
    from memory.models import MemoryEvent

    _, statements = _extract_capturing(alice, alice_user)
    written = MemoryRecord.objects.for_tenant(alice).filter(user=alice_user).count()
    assert written >= 3
    # Every change still has its history row, with who and what.
    created = MemoryEvent.objects.for_tenant(alice).filter(action=MemoryEvent.Action.CREATED)
    assert created.count() == written and all(e.after for e in created)
    history_inserts = [s for s in statements if s.startswith('INSERT INTO "memory_memoryevent"')]
    assert len(history_inserts) == 1, history_inserts


def test_a_change_outside_a_batch_writes_its_history_at_once(alice, alice_user):
    """Only a caller that asks for it defers the rows: a single change's history is there when it returns."""
    from memory.actions import memory_create
    from memory.models import MemoryEvent

    record = memory_create(tenant=alice, user=alice_user, kind="fact", text="Ada's seat preference is aisle.",
                           source_type="user_stated")
    record = record[0] if isinstance(record, tuple) else record
    assert MemoryEvent.objects.for_tenant(alice).filter(memory_uuid=record.pk).count() == 1
