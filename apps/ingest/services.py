"""Collection: read a cluster's sources and hand what they show to the domains that own it.

A cycle (beat, every 5 minutes) or a `collect` run, per cluster:
1. reads the Kubernetes API once (nodes, GPU pods, namespaces, Kueue) and records the snapshot: nodes in
   the inventory, pod observations in the ledger, fragmentation and pending work in capacity, queues;
2. picks the buckets to (re)compute (`apps.usage.selectors.due_hours`) unless given;
3. per bucket, lets the ledger collect it from the Prometheus source (`apps.usage.services.collect_bucket`).
A failure marks only that cluster's buckets failed; other clusters are never touched.

This module is the adapter layer's only orchestration: it calls domain services and holds no rule.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.capacity import services as capacity
from apps.common.decoding import GC_PAUSED
from apps.findings import services as findings
from apps.ingest.collectors.kubernetes import KubernetesError, api_client_for, read_snapshot
from apps.ingest.collectors.prometheus import PrometheusError, PrometheusSource
from apps.inventory import services as inventory
from apps.inventory.models import Cluster
from apps.inventory.observations import ClusterSnapshot
from apps.monitoring import services as monitoring
from apps.monitoring.logs import log_context
from apps.queues import services as queues
from apps.savings import services as savings
from apps.usage import services as ledger
from apps.usage.models import Bucket
from apps.usage.selectors import due_hours
from apps.usage.sources import MetricsSource

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class CollectReport:
    cluster: str
    written: list[datetime] = field(default_factory=list)
    failed: dict[datetime, str] = field(default_factory=dict)
    degraded: dict[datetime, str] = field(default_factory=dict)  # stored rows kept: the source brought less
    skipped: list[datetime] = field(default_factory=list)  # another worker held them
    not_attempted: list[datetime] = field(default_factory=list)  # the run stopped at an unreachable source
    findings_failed: dict[datetime, str] = field(default_factory=dict)  # written, but its findings were kept
    queries: int = 0
    samples: int = 0

    @property
    def ok(self) -> bool:
        """Nothing failed, nothing was kept back, nothing left undone."""
        return not (self.failed or self.degraded or self.not_attempted)


def record_snapshot(cluster: Cluster, snap: ClusterSnapshot) -> None:
    """Everything one read of the Kubernetes API shows: nodes, pod observations, then the side snapshots.

    Nodes and observations are written under the cluster's lock (the ledger's per-cluster serialization): two
    first collections of a cluster at once would otherwise both create its nodes (uniq_node, seen in CI)."""
    with transaction.atomic():
        ledger.lock_cluster(cluster)
        inventory.nodes_sync(cluster, snap.nodes, snap.taken_at, snap=snap)
        ledger.record_pod_observations(cluster, snap)
    record_side_snapshots(cluster, snap)


def record_side_snapshots(cluster: Cluster, snap: ClusterSnapshot) -> None:
    """Capacity and queue snapshots ride on the same observation (same time, so pending pods and pending
    workloads land in one collection); their failure never fails the ledger."""
    try:
        capacity.record_capacity_snapshot(cluster, snap)
    except Exception:
        log.exception("capacity snapshot failed for %s", cluster.name)
    if snap.kueue_error:
        return  # Kueue is installed but unreadable: keep the previous queue snapshots as they are
    try:
        queues.record_queue_snapshot(cluster, snap)
    except Exception:
        log.exception("queue snapshot failed for %s", cluster.name)
    try:
        findings.record_snapshot(cluster, snap.taken_at)
    except Exception:
        log.exception("findings of the snapshot failed for %s", cluster.name)


def record_findings(cluster: Cluster, hour: datetime, outcome: ledger.BucketOutcome, source: MetricsSource) -> str:
    """The written bucket's findings (and the pods' framebuffer savings right-sizes by), from its own data and the
    same source. A failure never fails the ledger:
    the hour's findings stay as they were (the next collection of the hour tries again); returns the error."""
    if outcome.assembled is None or outcome.result is None:
        return ""
    try:
        with log_context(bucket=hour.isoformat()):
            findings.record_bucket(cluster, hour, assembled=outcome.assembled, result=outcome.result, source=source)
            savings.record_bucket(cluster, hour, seconds=outcome.assembled.inputs.seconds, result=outcome.result,
                                  source=source)
    except Exception as exc:
        log.exception("findings of bucket %s %s failed", cluster.name, hour.isoformat(),
                      extra={"cluster": cluster.name, "bucket": hour.isoformat()})
        return f"{type(exc).__name__}: {exc}"
    return ""


@monitoring.collection_run  # records the run for /metrics; log lines of the run carry `cluster` (and `bucket`)
def collect_cluster(
    cluster: Cluster,
    hours: list[datetime] | None = None,
    *,
    now: datetime | None = None,
    progress: Progress | None = None,
    source: MetricsSource | None = None,
    accept_loss: bool = False,
) -> CollectReport:
    """One collection for one cluster: observe Kubernetes, then (re)write the given or due buckets.

    A source that fails a bucket (unreachable, timing out, answering garbage) stops this cluster's run
    there: the remaining hours are left for the next run instead of each waiting out the same timeout.
    `accept_loss` lets rows measured with less replace stored ones (an operator's explicit choice).
    """
    now = now or timezone.now()
    report = CollectReport(cluster.name)
    owner = worker_id()
    if hours is None:
        hours = due_hours(cluster, now, limit=settings.GPUFINOPS_MAX_BUCKETS_PER_RUN)
    hours = [h for h in sorted(set(hours)) if h < now]
    # The first bucket's round of Prometheus queries needs nothing from Kubernetes: started now, Prometheus answers
    # it while this thread reads and records the snapshot. Errors keep their order: an unreadable cluster fails the
    # buckets first (the round is stopped), then an unusable Prometheus; a failed query surfaces in the bucket.
    source_error: PrometheusError | None = None
    ahead: PrometheusSource | None = None
    if source is None:
        try:
            source = ahead = PrometheusSource(cluster)
        except PrometheusError as exc:
            source_error = exc
    if ahead is not None and hours:
        ahead.prefetch_ahead(hours[0], ledger.bucket_end(hours[0], now))
    try:
        # The garbage collector is paused while the snapshot is read and recorded: the LIST pages, the observations
        # and the rows compared with them are tens of thousands of objects without cycles, and the collections their
        # allocations triggered walk the whole heap (a cProfile of the 10,000-GPU bench's steady state: `_to_pod`'s
        # dict comprehension of a pod's few conditions, 115 us a pod; bench/README.md, 2026-12-02, last).
        with GC_PAUSED:
            try:
                snap = read_snapshot(cluster, api_client_for(cluster))
            except KubernetesError as exc:
                ledger.mark_unreachable(cluster, hours, owner, str(exc), status=Bucket.Status.FAILED, now=now)
                report.failed.update(dict.fromkeys(hours, str(exc)))
                return report
            record_snapshot(cluster, snap)
        if source is None:
            assert source_error is not None
            ledger.mark_unreachable(cluster, hours, owner, str(source_error), status=Bucket.Status.SOURCE_MISSING,
                                    now=now)
            report.failed.update(dict.fromkeys(hours, str(source_error)))
            return report
        collect_buckets(cluster, hours, report, now=now, owner=owner, source=source, snap=snap, progress=progress,
                        accept_loss=accept_loss)
    finally:
        if ahead is not None:
            ahead.stop_ahead()  # no thread outlives the collection (a no-op once the first bucket used the round)
    report.queries, report.samples = source.queries, source.samples
    return report


def collect_buckets(cluster: Cluster, hours: list[datetime], report: CollectReport, *, now: datetime, owner: str,
                    source: MetricsSource, snap: ClusterSnapshot, progress: Progress | None,
                    accept_loss: bool) -> None:
    """`collect_cluster`'s buckets, oldest first, into `report`; one failed bucket ends the run (circuit breaker)."""
    for i, h in enumerate(hours, 1):
        # The garbage collector is paused for the bucket and its findings too, as for the snapshot: the answers,
        # facts, rows and findings are tens of thousands of objects without cycles, and the collections their
        # allocations triggered walked the whole heap (cProfile of the 10,000-GPU bench's steady state: 2.4 s a
        # round inside `pod_history`'s own loops; bench/README.md, 2026-12-02, branch `bucket`). One bucket at a
        # time: a catch-up collects between buckets.
        with GC_PAUSED:
            with log_context(bucket=h.isoformat()):
                outcome = ledger.collect_bucket(
                    cluster, h, now=now, source=source, namespace_labels=snap.namespace_labels, owner=owner,
                    accept_loss=accept_loss,
                )
            error = record_findings(cluster, h, outcome, source) if outcome.state == "written" else ""
        if outcome.state == "written":
            report.written.append(h)
            if error:
                report.findings_failed[h] = error
        elif outcome.state == "skipped":
            report.skipped.append(h)
        elif outcome.state == "degraded":
            report.degraded[h] = outcome.error
        else:
            report.failed[h] = outcome.error
        if progress:
            words = {"written": "ok", "skipped": "held by another worker", "degraded": "kept: " + outcome.error}
            progress(f"[{i}/{len(hours)}] {cluster.name} {h:%Y-%m-%dT%H:00Z} "
                     f"{words.get(outcome.state, 'failed: ' + outcome.error)}")
        if outcome.state == "failed":
            report.not_attempted = hours[i:]  # circuit breaker: one failed bucket ends this cluster's run
            if report.not_attempted and progress:
                progress(f"{cluster.name}: stopped after a failed bucket; {len(report.not_attempted)} hours left "
                         "for the next run")
            break
