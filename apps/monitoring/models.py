"""What the collector did, kept where every process can read it.

The web process serves `/metrics` but never collects; Celery workers collect but are never scraped. So each
collection run is written to the database (`CollectionRun`, pruned after `GPUFINOPS_COLLECTION_RUN_DAYS`)
and tallied into never-pruned running totals (`CollectionTotals`), from which `/metrics` computes everything
at scrape time. Nothing here needs prometheus_client's multiprocess mode.
"""

from __future__ import annotations

from django.db import models

from apps.inventory.models import Cluster


class CollectionRun(models.Model):
    """One `collect_cluster` run for one cluster: when, how long, and what became of its buckets."""

    class Outcome(models.TextChoices):
        OK = "ok"  # every bucket attempted was written (or held by another worker)
        PARTIAL = "partial"  # some buckets written, some failed, degraded or left for the next run
        FAILED = "failed"  # nothing written: a source was unreachable, or the run raised

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="collection_runs")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    duration_seconds = models.FloatField()
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    written = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    degraded = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    not_attempted = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)  # the first failure's reason (or the exception), cut to 2,000 characters

    class Meta:
        ordering = ["cluster", "-finished_at"]
        indexes = [models.Index(fields=["cluster", "finished_at"]), models.Index(fields=["cluster", "outcome",
                                                                                           "finished_at"])]

    def __str__(self) -> str:
        return f"{self.cluster_id}@{self.finished_at:%Y-%m-%dT%H:%M:%S} {self.outcome} {self.duration_seconds:.1f}s"


class CollectionTotals(models.Model):
    """Running totals per cluster and outcome since the cluster was added (Prometheus counters: never
    decrease, never pruned). Incremented with one UPDATE per run."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="collection_totals")
    outcome = models.CharField(max_length=10, choices=CollectionRun.Outcome.choices)
    runs = models.PositiveBigIntegerField(default=0)
    duration_seconds = models.FloatField(default=0.0)
    buckets_written = models.PositiveBigIntegerField(default=0)
    buckets_failed = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "outcome"], name="uniq_collection_totals")]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.outcome}: {self.runs} runs"


class PreflightRun(models.Model):
    """One preflight of a cluster (`manage.py check_cluster`, also run by `add_cluster`): every check with what
    was found, its status and its fix (`checks`: a list of objects, apps/ingest/preflight/checks.py `Check`).
    Only the newest per cluster is shown; older ones stay for comparison and are few (one per run by hand)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="preflight_runs")
    ran_at = models.DateTimeField()
    ok = models.BooleanField()  # no check failed: nothing would leave hours unmeasured or unattributed
    checks = models.JSONField(default=list)

    class Meta:
        ordering = ["cluster", "-ran_at"]
        indexes = [models.Index(fields=["cluster", "ran_at"])]

    def __str__(self) -> str:
        return f"{self.cluster_id}@{self.ran_at:%Y-%m-%dT%H:%M:%S} {'ok' if self.ok else 'failing'}"
