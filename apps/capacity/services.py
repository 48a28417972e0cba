"""Writes of the capacity app: one snapshot per collection, pending work, retention."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import models, transaction

from apps.capacity.constants import FULL_RESOLUTION_DAYS, PendingKind
from apps.capacity.fragmentation import GroupFragmentation, group_fragmentation, node_slots
from apps.capacity.models import CapacityCollection, NodeGroupSnapshot, PendingReasonCount, PendingWork
from apps.capacity.pending import diagnose_request, diagnose_workload, main_resource, node_selector_of, pending_pods
from apps.capacity.retention import ids_to_thin, retention_cutoff
from apps.capacity.teams import TeamResolver
from apps.ingest.collectors.types import ClusterSnapshot
from apps.inventory.models import Cluster

log = logging.getLogger(__name__)
DELETE_CHUNK = 500


@dataclass(frozen=True)
class WorkloadInput:
    """A Kueue workload that needs GPUs, as the queues app hands it over (no Kueue types here)."""

    namespace: str
    name: str
    uid: str
    team: str
    request: dict[str, int]  # device units per pod
    pods: int
    quota_reserved: bool
    admitted: bool
    cluster_queue: str = ""
    local_queue: str = ""
    created: datetime | None = None
    message: str = ""


def _collection(cluster: Cluster, taken_at: datetime) -> CapacityCollection:
    collection, _ = CapacityCollection.objects.get_or_create(cluster=cluster, taken_at=taken_at)
    return collection


# ---- Fragmentation and pending pods (called by the collector at every collection) ----


@transaction.atomic
def record_capacity_snapshot(cluster: Cluster, snapshot: ClusterSnapshot) -> CapacityCollection:
    """Writes fragmentation per node group and diagnosed pending pods for `snapshot.taken_at`.

    1. Get or create the collection (cluster, taken_at).
    2. Replace its node-group rows with the fragmentation of the snapshot.
    3. Replace its pending-pod rows (Kueue workloads are written by `record_pending_workloads`).
    4. Recount pending work by team and reason.
    Re-recording the same snapshot leaves every table identical.
    """
    collection = _collection(cluster, snapshot.taken_at)
    slots = node_slots(snapshot.nodes, snapshot.pods, settings.GPUFINOPS_NODE_GROUP_LABELS)
    groups = group_fragmentation(slots)
    collection.node_groups.all().delete()
    NodeGroupSnapshot.objects.bulk_create([_group_row(collection, g) for g in groups])
    resolver = TeamResolver(cluster, snapshot.namespaces)
    rows = []
    for pod, request in pending_pods(snapshot.pods):
        diagnosis = diagnose_request(request, slots, node_selector_of(pod))
        rows.append(
            PendingWork(
                collection=collection,
                cluster=cluster,
                taken_at=collection.taken_at,
                kind=PendingKind.POD,
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                team=resolver.for_object(pod.labels, pod.namespace),
                reason=diagnosis.reason,
                resource=diagnosis.resource,
                per_pod=diagnosis.per_pod,
                pods=1,
                node_group=diagnosis.node_group,
                cluster_queue=pod.labels.get("kueue.x-k8s.io/cluster-queue-name", ""),
                local_queue=pod.labels.get("kueue.x-k8s.io/queue-name", ""),
                waiting_since=pod.created,
                message=_join(diagnosis.message, pod.scheduling_message),
            )
        )
    collection.pending.filter(kind=PendingKind.POD).delete()
    PendingWork.objects.bulk_create(rows)
    _recount(collection)
    return collection


def _group_row(collection: CapacityCollection, g: GroupFragmentation) -> NodeGroupSnapshot:
    return NodeGroupSnapshot(
        collection=collection,
        cluster_id=collection.cluster_id,
        taken_at=collection.taken_at,
        node_group=g.node_group,
        gpu_model=g.gpu_model,
        nodes=g.nodes,
        physical_gpus=g.physical_gpus,
        allocatable_gpus=g.allocatable_gpus,
        allocated_gpus=g.allocated_gpus,
        free_gpus=g.free_gpus,
        largest_free_block=g.largest_free_block,
        placeable=g.placeable,
        stranded_gpus=g.stranded_gpus,
        zero_allocatable_nodes=list(g.zero_allocatable_nodes),
        unschedulable_nodes=list(g.unschedulable_nodes),
        free_per_node=list(g.free_per_node),
        units=[u.as_dict() for u in g.units],
    )


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)[:2000]


# ---- Pending Kueue workloads (called by apps.queues at every collection) ----


@transaction.atomic
def record_pending_workloads(
    *, cluster: Cluster, taken_at: datetime, workloads: Iterable[WorkloadInput]
) -> CapacityCollection:
    """Replaces the pending-workload rows of the collection at `taken_at` and recounts.

    Only workloads Kueue has not admitted are pending here: without `QuotaReserved=True` the
    reason is quota; with quota but not yet `Admitted` (admission checks) it is other.
    """
    collection = _collection(cluster, taken_at)
    rows = []
    for w in workloads:
        reason = diagnose_workload(quota_reserved=w.quota_reserved, admitted=w.admitted)
        if reason is None or not w.request:
            continue
        resource, per_pod = main_resource(w.request)
        rows.append(
            PendingWork(
                collection=collection,
                cluster=cluster,
                taken_at=collection.taken_at,
                kind=PendingKind.WORKLOAD,
                namespace=w.namespace,
                name=w.name,
                uid=w.uid,
                team=w.team,
                reason=reason,
                resource=resource,
                per_pod=per_pod,
                pods=max(1, w.pods),
                cluster_queue=w.cluster_queue,
                local_queue=w.local_queue,
                waiting_since=w.created,
                message=w.message[:2000],
            )
        )
    collection.pending.filter(kind=PendingKind.WORKLOAD).delete()
    PendingWork.objects.bulk_create(rows)
    _recount(collection)
    return collection


def _recount(collection: CapacityCollection) -> None:
    """Counts pending work by team and reason from the collection's rows (both kinds)."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for item in collection.pending.all():
        bucket = counts[(item.team, item.reason)]
        bucket[0] += 1
        bucket[1] += item.pods
        bucket[2] += item.units
    collection.reason_counts.all().delete()
    PendingReasonCount.objects.bulk_create(
        [
            PendingReasonCount(
                collection=collection,
                cluster_id=collection.cluster_id,
                taken_at=collection.taken_at,
                team=team,
                reason=reason,
                items=items,
                pods=pods,
                units=units,
            )
            for (team, reason), (items, pods, units) in sorted(counts.items())
        ]
    )


# ---- Retention ----


def thin_collections(model: type[models.Model], *, now: datetime | None, keep_days: int) -> int:
    """Thins `model` collections older than `keep_days` to the last one per cluster and hour.

    Shared by capacity and queue history (each a `taken_at`-stamped collection per cluster); returns deletions.
    """
    cutoff = retention_cutoff(now or datetime.now(UTC), keep_days)
    rows = (
        model.objects.filter(taken_at__lt=cutoff)
        .order_by("cluster_id", "taken_at")
        .values_list("id", "cluster_id", "taken_at")
    )
    doomed = ids_to_thin(rows.iterator())
    for i in range(0, len(doomed), DELETE_CHUNK):
        with transaction.atomic():
            model.objects.filter(id__in=doomed[i : i + DELETE_CHUNK]).delete()
    log.info("%s history: thinned %d collections before %s", model.__name__, len(doomed), cutoff.isoformat())
    return len(doomed)


def prune_capacity_history(*, now: datetime | None = None, keep_days: int = FULL_RESOLUTION_DAYS) -> int:
    """Thins capacity collections older than `keep_days` to the last one per cluster and hour."""
    return thin_collections(CapacityCollection, now=now, keep_days=keep_days)
