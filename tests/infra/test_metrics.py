"""/metrics: memories by status per tenant, job runs and durations, in Prometheus text format."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from memory.models import JobRun, MemoryRecord

pytestmark = pytest.mark.django_db(transaction=True)


def scrape(client=None, **headers) -> dict:
    r = (client or Client()).get("/metrics", **headers)
    assert r.status_code == 200, r.content
    assert r["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(r.content.decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_memories_by_status_per_tenant(alice, bob, alice_user):
    from tenants.services import end_user_create

    for status, n in (("active", 3), ("pending_review", 1), ("deleted", 2)):
        for i in range(n):
            MemoryRecord.objects.unscoped().create(tenant=alice, user=alice_user, kind="fact", text=f"{status} {i}",
                                                   status=status)
    bob_user = end_user_create(tenant=bob, external_id="b")
    MemoryRecord.objects.unscoped().create(tenant=bob, user=bob_user, kind="fact", text="b", status="active")
    m = scrape()
    assert m[("continuum_memories", (("status", "active"), ("tenant", str(alice.pk))))] == 3
    assert m[("continuum_memories", (("status", "pending_review"), ("tenant", str(alice.pk))))] == 1
    assert m[("continuum_memories", (("status", "deleted"), ("tenant", str(alice.pk))))] == 2
    assert m[("continuum_memories", (("status", "active"), ("tenant", str(bob.pk))))] == 1


def test_a_scrape_names_tenants_by_id_never_by_slug_or_name(alice, alice_user):
    MemoryRecord.objects.unscoped().create(tenant=alice, user=alice_user, kind="fact", text="x", status="active")
    text = Client().get("/metrics").content.decode()
    assert str(alice.pk) in text
    assert alice.slug not in text and alice.name not in text


def test_job_runs_and_durations(alice):
    now = timezone.now()
    JobRun.objects.unscoped().create(job="merge", tenant=alice, started_at=now - timedelta(seconds=3), finished_at=now,
                          status="done")
    JobRun.objects.unscoped().create(job="merge", tenant=alice, started_at=now - timedelta(seconds=1), finished_at=now,
                          status="done")
    JobRun.objects.unscoped().create(job="merge", tenant=alice, started_at=now, finished_at=now, status="failed")
    JobRun.objects.unscoped().create(job="expire", tenant=alice, started_at=now, status="running")
    m = scrape()
    assert m[("continuum_job_runs_total", (("job", "merge"), ("status", "done")))] == 2
    assert m[("continuum_job_runs_total", (("job", "merge"), ("status", "failed")))] == 1
    assert m[("continuum_job_runs_total", (("job", "expire"), ("status", "running")))] == 1
    assert m[("continuum_job_duration_seconds_count", (("job", "merge"),))] == 3
    assert m[("continuum_job_duration_seconds_sum", (("job", "merge"),))] == pytest.approx(4.0, abs=0.01)
    assert m[("continuum_job_last_finished_timestamp_seconds", (("job", "merge"),))] == pytest.approx(
        now.timestamp(), abs=1)
    assert ("continuum_job_duration_seconds_count", (("job", "expire"),)) not in m


def test_a_real_job_run_shows_up(alice, alice_user):
    from memory.lifecycle.tasks import memories_expire_task

    memories_expire_task.apply(kwargs={"tenant_id": str(alice.pk)}).get()
    m = scrape()
    assert m[("continuum_job_runs_total", (("job", "expire"), ("status", "done")))] == 1
    assert m[("continuum_job_duration_seconds_count", (("job", "expire"),))] == 1


def test_outbox_backlog_is_reported(alice, alice_user):
    from memory.models import VectorOutbox

    VectorOutbox.objects.unscoped().create(tenant_id_value=alice.pk, memory_uuid=alice_user.pk, op="upsert")
    assert scrape()[("continuum_vector_outbox_pending", (("op", "upsert"),))] == 1


def test_token_protects_the_endpoint_when_set(settings, db):
    settings.METRICS_TOKEN = "s3cret"
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    scrape(HTTP_AUTHORIZATION="Bearer s3cret")


def test_only_get(db):
    assert Client().post("/metrics").status_code == 405
