"""Writes of the queues app: one Kueue snapshot per collection, workloads, retention."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from apps.common.retention import FULL_RESOLUTION_DAYS, thin_collections
from apps.common.snapshots import snapshot_row
from apps.inventory.models import Cluster
from apps.inventory.observations import ClusterSnapshot, KueueObjects, WorkloadInfo
from apps.inventory.services import record_teams
from apps.inventory.teams import TeamRule
from apps.queues.models import ClusterQueueSnapshot, LocalQueueSnapshot, QueueCollection, QuotaSnapshot, Workload
from apps.usage.services import lock_cluster

log = logging.getLogger(__name__)


def record_queue_snapshot(cluster: Cluster, snap: ClusterSnapshot) -> QueueCollection:
    """Records the snapshot's Kueue objects as the queue collection at `snap.taken_at`.

    The same `taken_at` as the capacity snapshot's, so queue quota and pending work line up. A cluster
    without Kueue records an empty collection.
    """
    return record_kueue_objects(
        cluster=cluster, at=snap.taken_at, objects=snap.kueue, rule=TeamRule.for_cluster(cluster, snap.namespace_labels)
    )


@transaction.atomic
def record_kueue_objects(
    *, cluster: Cluster, at: datetime, objects: KueueObjects | None, rule: TeamRule
) -> QueueCollection:
    """Replaces the queue rows of the collection (cluster, at) and upserts workloads.

    1. Get or create the collection; empty it.
    2. Write each ClusterQueue with one quota row per flavor and resource, and each LocalQueue with its team.
    3. Upsert every workload (creation, quota reservation, admission, finish times).
    Re-recording the same objects at the same time leaves every table identical.
    """
    # Writers of one cluster's queue rows take turns (a collection and a replay, or two demo workers, both
    # upserting the same workloads would otherwise race on uniq_workload and lose the later snapshot).
    lock_cluster(cluster)
    collection, _ = QueueCollection.objects.get_or_create(cluster=cluster, taken_at=at)
    collection.api_version = objects.version if objects is not None else ""
    collection.save(update_fields=["api_version"])
    collection.cluster_queues.all().delete()
    collection.local_queues.all().delete()
    if objects is None:
        return collection
    _write_queues(collection, objects, rule)
    _upsert_workloads(cluster, at, objects, rule)
    teams = {rule.team_of({}, lq.namespace) for lq in objects.local_queues}
    record_teams(cluster, teams | {rule.team_of(w.labels, w.namespace) for w in objects.workloads}, at)
    return collection


def _write_queues(collection: QueueCollection, objects: KueueObjects, rule: TeamRule) -> None:
    cq_rows = ClusterQueueSnapshot.objects.bulk_create(
        [snapshot_row(ClusterQueueSnapshot, collection, cq) for cq in objects.cluster_queues]
    )
    QuotaSnapshot.objects.bulk_create(
        [
            snapshot_row(QuotaSnapshot, collection, q, cluster_queue=row)
            for row, cq in zip(cq_rows, objects.cluster_queues, strict=True)
            for q in cq.quotas
        ]
    )
    LocalQueueSnapshot.objects.bulk_create(
        [
            snapshot_row(LocalQueueSnapshot, collection, lq, team=rule.team_of({}, lq.namespace))
            for lq in objects.local_queues
        ]
    )


def _upsert_workloads(cluster: Cluster, at: datetime, objects: KueueObjects, rule: TeamRule) -> None:
    """One row per workload uid; times once known are kept when a later snapshot no longer shows them."""
    workloads: list[WorkloadInfo] = list(objects.workloads)
    existing = {w.uid: w for w in Workload.objects.filter(cluster=cluster, uid__in=[w.uid for w in workloads])}
    to_create: list[Workload] = []
    to_update: list[Workload] = []
    for info in workloads:
        pod_sets = info.gpu_pod_sets
        row = existing.get(info.uid) or Workload(cluster=cluster, uid=info.uid, first_seen=at, last_seen=at)
        row.namespace, row.name = info.namespace, info.name
        row.team = rule.team_of(info.labels, info.namespace)
        row.local_queue = info.queue_name
        row.cluster_queue = (
            info.cluster_queue or objects.cluster_queue_of(info.namespace, info.queue_name) or row.cluster_queue
        )
        row.pods = sum(ps.count for ps in pod_sets)
        row.gpus = sum(ps.count * sum(ps.request.values()) for ps in pod_sets)
        row.created = info.created
        row.quota_reserved_at = info.since("QuotaReserved") or row.quota_reserved_at
        row.admitted_at = info.since("Admitted") or row.admitted_at
        row.finished_at = info.since("Finished") or row.finished_at
        row.first_seen, row.last_seen = min(row.first_seen, at), max(row.last_seen, at)
        (to_update if row.pk else to_create).append(row)
    Workload.objects.bulk_create(to_create)
    fields = [
        "namespace", "name", "team", "local_queue", "cluster_queue", "pods", "gpus", "created",
        "quota_reserved_at", "admitted_at", "finished_at", "first_seen", "last_seen",
    ]  # fmt: skip
    Workload.objects.bulk_update(to_update, fields, batch_size=500)


# ---- Retention ----


def prune_queue_history(*, now: datetime | None = None, keep_days: int = FULL_RESOLUTION_DAYS) -> int:
    """Thins queue collections older than `keep_days` to the last one per cluster and hour; returns deletions.

    Workload rows are kept: they are one per workload and carry the admission-wait history.
    """
    return thin_collections(QueueCollection, now=now, keep_days=keep_days)
