"""Prometheus metrics at /metrics: memories by status per tenant, lifecycle job runs and their durations,
and the vector outbox backlog. Read from the database at scrape time, so every web process reports the same
numbers and nothing is lost when a worker restarts."""
from __future__ import annotations

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Sum
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from infra.operator_token import operator_token_given


class ContinuumCollector:
    """One scrape = a handful of aggregate queries."""

    def collect(self):
        from memory.models import JobRun, MemoryRecord, VectorOutbox

        # Tenants are labelled by id: a slug or name is the tenant's own data (often a customer's name), and a
        # scrape travels to monitoring systems the tenants never agreed to share it with.
        memories = GaugeMetricFamily("continuum_memories", "Memory records by tenant and status.",
                                     labels=["tenant", "status"])
        # Aggregates over every tenant: the operator's view.
        for row in MemoryRecord.objects.unscoped().values("tenant_id", "status").annotate(n=Count("pk")).order_by():
            memories.add_metric([str(row["tenant_id"]), row["status"]], row["n"])
        yield memories

        runs = CounterMetricFamily("continuum_job_runs", "Lifecycle job runs by job and outcome.",
                                   labels=["job", "status"])
        for row in JobRun.objects.unscoped().values("job", "status").annotate(n=Count("pk")).order_by():
            runs.add_metric([row["job"], row["status"]], row["n"])
        yield runs

        took = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
        durations = SummaryMetricFamily("continuum_job_duration_seconds", "Durations of finished job runs.",
                                        labels=["job"])
        last = GaugeMetricFamily("continuum_job_last_finished_timestamp_seconds",
                                 "When each job last finished a run.", labels=["job"])
        finished = (JobRun.objects.unscoped().filter(finished_at__isnull=False).values("job")
                    .annotate(n=Count("pk"), total=Sum(took), latest=Max("finished_at")).order_by())
        for row in finished:
            total = row["total"].total_seconds() if row["total"] is not None else 0.0
            durations.add_metric([row["job"]], count_value=row["n"], sum_value=total)
            last.add_metric([row["job"]], row["latest"].timestamp())
        yield durations
        yield last

        pending = GaugeMetricFamily("continuum_vector_outbox_pending", "Vector writes waiting for Qdrant.",
                                    labels=["op"])
        rows = VectorOutbox.objects.unscoped().filter(done_at__isnull=True).values("op").annotate(n=Count("pk"))
        for row in rows.order_by():
            pending.add_metric([row["op"]], row["n"])
        yield pending


def metrics_text() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ContinuumCollector())
    return generate_latest(registry)


@require_GET
def metrics(request):
    # Open only where no token is configured, which the production settings refuse (config/settings/production.py).
    if settings.METRICS_TOKEN and not operator_token_given(request):
        return HttpResponse("unauthorized\n", status=401, content_type="text/plain")
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)
