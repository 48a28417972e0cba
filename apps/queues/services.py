"""Writes of the queues app: one Kueue snapshot per collection, workloads, retention."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from kubernetes import client

from apps.capacity.constants import FULL_RESOLUTION_DAYS
from apps.capacity.services import WorkloadInput, record_pending_workloads, thin_collections
from apps.capacity.teams import TeamResolver
from apps.ingest.collectors.types import NamespaceInfo
from apps.inventory.models import Cluster
from apps.queues.collectors import KueueObjects, WorkloadInfo, read_kueue, read_namespaces
from apps.queues.models import ClusterQueueSnapshot, LocalQueueSnapshot, QueueCollection, QuotaSnapshot, Workload

log = logging.getLogger(__name__)


def record_queue_snapshot(cluster: Cluster, api_client: client.ApiClient, at: datetime) -> QueueCollection:
    """Reads Kueue through `api_client` and records it as the collection at `at`.

    Pass the same `at` as the capacity snapshot's `taken_at`, so pending pods and pending
    workloads land in one collection. A cluster without Kueue records an empty collection.
    Raises `apps.queues.collectors.KueueError` when Kueue is installed but cannot be read; the
    previous collections are left untouched then.
    """
    objects = read_kueue(api_client)
    namespaces = read_namespaces(api_client) if objects is not None else []
    return record_kueue_objects(cluster=cluster, at=at, objects=objects, namespaces=namespaces)


@transaction.atomic
def record_kueue_objects(
    *, cluster: Cluster, at: datetime, objects: KueueObjects | None, namespaces: Iterable[NamespaceInfo]
) -> QueueCollection:
    """Replaces the queue rows of the collection (cluster, at), upserts workloads, records pending ones.

    1. Get or create the collection; empty it.
    2. Write each ClusterQueue with one quota row per flavor and resource, and each LocalQueue with its team.
    3. Upsert every workload (creation, quota reservation, admission, finish times).
    4. Hand the workloads Kueue has not admitted to `apps.capacity` as pending work.
    Re-recording the same objects at the same time leaves every table identical.
    """
    collection, _ = QueueCollection.objects.get_or_create(cluster=cluster, taken_at=at)
    collection.api_version = objects.version if objects is not None else ""
    collection.save(update_fields=["api_version"])
    collection.cluster_queues.all().delete()
    collection.local_queues.all().delete()
    if objects is None:
        record_pending_workloads(cluster=cluster, taken_at=at, workloads=[])
        return collection
    resolver = TeamResolver(cluster, namespaces)
    _write_queues(collection, objects, resolver)
    lq_to_cq = {(lq.namespace, lq.name): lq.cluster_queue for lq in objects.local_queues}
    inputs = [_workload_input(w, lq_to_cq, resolver) for w in objects.workloads if not w.condition_true("Finished")]
    _upsert_workloads(cluster, at, objects.workloads, lq_to_cq, resolver)
    record_pending_workloads(cluster=cluster, taken_at=at, workloads=inputs)
    return collection


def _write_queues(collection: QueueCollection, objects: KueueObjects, resolver: TeamResolver) -> None:
    common = {"collection": collection, "cluster_id": collection.cluster_id, "taken_at": collection.taken_at}
    cq_rows = ClusterQueueSnapshot.objects.bulk_create(
        [
            ClusterQueueSnapshot(
                **common,
                name=cq.name,
                cohort=cq.cohort,
                pending_workloads=cq.pending_workloads,
                reserving_workloads=cq.reserving_workloads,
                admitted_workloads=cq.admitted_workloads,
            )
            for cq in objects.cluster_queues
        ]
    )
    QuotaSnapshot.objects.bulk_create(
        [
            QuotaSnapshot(
                cluster_queue=row,
                cluster_id=collection.cluster_id,
                taken_at=collection.taken_at,
                flavor=q.flavor,
                resource=q.resource,
                nominal_quota=q.nominal_quota,
                borrowing_limit=q.borrowing_limit,
                lending_limit=q.lending_limit,
                reserved=q.reserved,
                used=q.used,
                borrowed=q.borrowed,
            )
            for row, cq in zip(cq_rows, objects.cluster_queues, strict=True)
            for q in cq.quotas
        ]
    )
    LocalQueueSnapshot.objects.bulk_create(
        [
            LocalQueueSnapshot(
                **common,
                namespace=lq.namespace,
                name=lq.name,
                cluster_queue=lq.cluster_queue,
                team=resolver.for_namespace(lq.namespace),
                pending_workloads=lq.pending_workloads,
                reserving_workloads=lq.reserving_workloads,
                admitted_workloads=lq.admitted_workloads,
            )
            for lq in objects.local_queues
        ]
    )


def _gpu_pod_sets(w: WorkloadInfo):  # type: ignore[no-untyped-def]
    return [ps for ps in w.pod_sets if ps.request]


def _workload_input(w: WorkloadInfo, lq_to_cq: dict[tuple[str, str], str], resolver: TeamResolver) -> WorkloadInput:
    """The workload as capacity's pending diagnosis sees it: its largest GPU pod set."""
    pod_sets = _gpu_pod_sets(w)
    main = max(pod_sets, key=lambda ps: (max(ps.request.values()), ps.count), default=None)
    quota = w.conditions.get("QuotaReserved")
    message = quota.message if quota is not None and quota.status != "True" else ""
    return WorkloadInput(
        namespace=w.namespace,
        name=w.name,
        uid=w.uid,
        team=resolver.for_object(w.labels, w.namespace),
        request=dict(main.request) if main else {},
        pods=main.count if main else 0,
        quota_reserved=w.condition_true("QuotaReserved"),
        admitted=w.condition_true("Admitted"),
        cluster_queue=w.cluster_queue or lq_to_cq.get((w.namespace, w.queue_name), ""),
        local_queue=w.queue_name,
        created=w.created,
        message=message,
    )


def _upsert_workloads(
    cluster: Cluster,
    at: datetime,
    workloads: Iterable[WorkloadInfo],
    lq_to_cq: dict[tuple[str, str], str],
    resolver: TeamResolver,
) -> None:
    """One row per workload uid; times once known are kept when a later snapshot no longer shows them."""
    workloads = list(workloads)
    existing = {w.uid: w for w in Workload.objects.filter(cluster=cluster, uid__in=[w.uid for w in workloads])}
    to_create, to_update = [], []
    for info in workloads:
        pod_sets = _gpu_pod_sets(info)
        row = existing.get(info.uid) or Workload(cluster=cluster, uid=info.uid, first_seen=at, last_seen=at)
        row.namespace, row.name = info.namespace, info.name
        row.team = resolver.for_object(info.labels, info.namespace)
        row.local_queue = info.queue_name
        row.cluster_queue = (
            info.cluster_queue or lq_to_cq.get((info.namespace, info.queue_name), "") or row.cluster_queue
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
