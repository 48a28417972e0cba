"""`GET /metrics`: the service's own Prometheus metrics, computed from the database at scrape time.

Every web worker answers the same numbers, whichever process collected (gunicorn workers and Celery
workers share nothing but the database), so no prometheus_client multiprocess directory is needed.
Labels name clusters, bucket states and signals only: never a team, namespace or pod.

| metric | type | labels |
|---|---|---|
| gpufinops_info | gauge (1) | version, default_signal |
| gpufinops_last_successful_collection_timestamp_seconds | gauge | cluster |
| gpufinops_last_collection_timestamp_seconds | gauge | cluster |
| gpufinops_last_collection_duration_seconds | gauge | cluster |
| gpufinops_collection_duration_seconds | summary (_count, _sum) | cluster |
| gpufinops_collection_runs_total | counter | cluster, outcome |
| gpufinops_bucket_lag_hours | gauge | cluster |
| gpufinops_buckets | gauge | cluster, status, state (hours of the last GPUFINOPS_METRICS_WINDOW_DAYS) |
| gpufinops_buckets_abandoned_total | counter | cluster |
| gpufinops_missing_signal | gauge (0/1) | cluster, signal |
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from importlib import metadata

from django.conf import settings
from django.db.models import Count, Max
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from apps.common.timeutils import HOUR
from apps.inventory.models import Cluster
from apps.monitoring.models import CollectionRun, CollectionTotals
from apps.usage.activity import SIGNALS, default_signal
from apps.usage.models import Bucket
from apps.usage.selectors import clusters_missing_signal


def _version() -> str:
    try:
        return metadata.version("gpufinops")
    except metadata.PackageNotFoundError:
        return "unknown"


def _ts(value: datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0


class LedgerCollector(Collector):
    """A custom collector: reads clusters, buckets and collection runs on each scrape."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now

    def collect(self) -> Iterator[Metric]:
        now = self.now or timezone.now()
        clusters = list(Cluster.objects.order_by("name").values_list("id", "name", "created_at"))

        info = GaugeMetricFamily("gpufinops_info", "Version and default activity signal of this gpufinops.",
                                 labels=["version", "default_signal"])
        info.add_metric([_version(), default_signal()], 1.0)
        yield info

        # ---- Collection runs ----
        last_ok = dict(CollectionRun.objects.filter(outcome=CollectionRun.Outcome.OK)
                       .values("cluster_id").annotate(t=Max("finished_at")).values_list("cluster_id", "t"))
        # Before any run was recorded (an upgrade), the newest OK bucket's write stands in for it.
        ok_written = dict(Bucket.objects.filter(status=Bucket.Status.OK, collected_at__isnull=False)
                          .values("cluster_id").annotate(t=Max("collected_at")).values_list("cluster_id", "t"))
        success = GaugeMetricFamily(
            "gpufinops_last_successful_collection_timestamp_seconds",
            "When the last collection run that failed no bucket ended (Unix time; 0: never).", labels=["cluster"])
        for pk, name, _ in clusters:
            success.add_metric([name], _ts(last_ok.get(pk) or ok_written.get(pk)))
        yield success

        last_run = GaugeMetricFamily("gpufinops_last_collection_timestamp_seconds",
                                     "When the last collection run ended, whatever its outcome (Unix time).",
                                     labels=["cluster"])
        last_duration = GaugeMetricFamily("gpufinops_last_collection_duration_seconds",
                                          "Duration of the last collection run.", labels=["cluster"])
        for pk, name, _ in clusters:
            run = (CollectionRun.objects.filter(cluster_id=pk).order_by("-finished_at")
                   .values_list("finished_at", "duration_seconds").first())
            if run is not None:
                last_run.add_metric([name], _ts(run[0]))
                last_duration.add_metric([name], run[1])
        yield last_run
        yield last_duration

        totals: dict[int, dict[str, tuple[int, float]]] = defaultdict(dict)
        for pk, outcome, runs, seconds in CollectionTotals.objects.values_list(
            "cluster_id", "outcome", "runs", "duration_seconds"
        ):
            totals[pk][outcome] = (runs, seconds)
        durations = SummaryMetricFamily("gpufinops_collection_duration_seconds",
                                        "Collection runs and their total duration.", labels=["cluster"])
        runs_total = CounterMetricFamily("gpufinops_collection_runs", "Collection runs by outcome.",
                                         labels=["cluster", "outcome"])
        for pk, name, _ in clusters:
            by_outcome = totals.get(pk, {})
            durations.add_metric([name], count_value=sum(r for r, _ in by_outcome.values()),
                                 sum_value=sum(s for _, s in by_outcome.values()))
            for outcome in CollectionRun.Outcome.values:
                runs_total.add_metric([name, outcome], by_outcome.get(outcome, (0, 0.0))[0])
        yield durations
        yield runs_total

        # ---- Buckets ----
        newest_final = dict(Bucket.objects.filter(state=Bucket.State.FINAL, status=Bucket.Status.OK)
                            .values("cluster_id").annotate(h=Max("hour")).values_list("cluster_id", "h"))
        lag = GaugeMetricFamily(
            "gpufinops_bucket_lag_hours",
            "Hours from the end of the newest final OK bucket to now (from when the cluster was added, while it "
            "has none).", labels=["cluster"])
        for pk, name, created in clusters:
            end = newest_final[pk] + HOUR if pk in newest_final else created
            lag.add_metric([name], max((now - end).total_seconds(), 0.0) / 3600.0)
        yield lag

        since = now - timedelta(days=settings.GPUFINOPS_METRICS_WINDOW_DAYS)
        counts = {
            (pk, status, state): n
            for pk, status, state, n in Bucket.objects.filter(hour__gte=since)
            .values("cluster_id", "status", "state").annotate(n=Count("id"))
            .values_list("cluster_id", "status", "state", "n")
        }
        buckets = GaugeMetricFamily(
            "gpufinops_buckets",
            f"Hourly buckets of the last {settings.GPUFINOPS_METRICS_WINDOW_DAYS} days by status and state.",
            labels=["cluster", "status", "state"])
        for pk, name, _ in clusters:
            for status in Bucket.Status.values:
                for state in Bucket.State.values:
                    buckets.add_metric([name, status, state], counts.get((pk, status, state), 0))
        yield buckets

        abandoned = dict(Bucket.objects.filter(status=Bucket.Status.ABANDONED).values("cluster_id")
                         .annotate(n=Count("id")).values_list("cluster_id", "n"))
        abandoned_total = CounterMetricFamily(
            "gpufinops_buckets_abandoned",
            "Buckets given up after failing for GPUFINOPS_ABANDON_AFTER_DAYS (all time).", labels=["cluster"])
        for pk, name, _ in clusters:
            abandoned_total.add_metric([name], abandoned.get(pk, 0))
        yield abandoned_total

        # ---- Signals ----
        missing = GaugeMetricFamily(
            "gpufinops_missing_signal",
            "1 when the cluster's DCGM series of the last 24 hours lack the signal (its hours are unmeasured "
            "under it).", labels=["cluster", "signal"])
        for signal in SIGNALS:
            lacking = {m.cluster for m in clusters_missing_signal(visible_teams=None, signal=signal)}
            for _pk, name, _ in clusters:
                missing.add_metric([name, signal], 1.0 if name in lacking else 0.0)
        yield missing
