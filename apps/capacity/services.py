"""Writes of the capacity app: one snapshot per collection, pending work, retention."""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from apps.capacity.constants import PendingKind
from apps.capacity.fragmentation import Accelerators, GroupFragmentation, NodeSlots, group_fragmentation, node_slots
from apps.capacity.models import CapacityCollection, NodeGroupSnapshot, PendingReasonCount, PendingWork
from apps.capacity.pending import diagnose_request, diagnose_workload, main_resource, pending_pods, unit_share
from apps.common.retention import FULL_RESOLUTION_DAYS, thin_collections
from apps.common.snapshots import snapshot_row, stamp
from apps.inventory.handout import hand_out
from apps.inventory.models import Cluster
from apps.inventory.observations import (
    KUEUE_CLUSTER_QUEUE_LABEL,
    KUEUE_QUEUE_LABEL,
    ClusterSnapshot,
    KueueObjects,
    PodInfo,
    PodSetInfo,
    WorkloadInfo,
)
from apps.inventory.services import record_teams
from apps.inventory.teams import TeamRule

log = logging.getLogger(__name__)


def _collection(cluster: Cluster, taken_at: datetime) -> CapacityCollection:
    collection, _ = CapacityCollection.objects.get_or_create(cluster=cluster, taken_at=taken_at)
    return collection


# ---- Fragmentation and pending pods (called by the collector at every collection) ----


@transaction.atomic
def record_capacity_snapshot(cluster: Cluster, snapshot: ClusterSnapshot) -> CapacityCollection:
    """Writes fragmentation per node group and diagnosed pending work for `snapshot.taken_at`.

    1. Get or create the collection (cluster, taken_at).
    2. Replace its node-group rows with the fragmentation of the snapshot.
    3. Replace its pending rows: pods the scheduler has not bound, and Kueue workloads Kueue has not admitted.
    4. Recount pending work by team and reason.
    Re-recording the same snapshot leaves every table identical. When Kueue could not be read
    (`snapshot.kueue_error`), the collection's pending workloads are left as they were.
    """
    collection = _collection(cluster, snapshot.taken_at)
    slots = node_slots(snapshot.nodes, snapshot.pods, settings.GPUFINOPS_NODE_GROUP_LABELS, accelerators(snapshot))
    groups = group_fragmentation(slots)
    collection.node_groups.all().delete()
    NodeGroupSnapshot.objects.bulk_create([_group_row(collection, g) for g in groups])
    rule = TeamRule.for_cluster(cluster, snapshot.namespace_labels)
    rows = []
    for pod, request in pending_pods(snapshot.pods):
        diagnosis = diagnose_request(request, slots, pod.node_selector)
        rows.append(_pending_row(
            collection, pod, rule, kind=PendingKind.POD, reason=diagnosis.reason, resource=diagnosis.resource,
            per_pod=diagnosis.per_pod, share=unit_share(diagnosis.resource, slots, diagnosis.node_group),
            node_group=diagnosis.node_group, cluster_queue=pod.labels.get(KUEUE_CLUSTER_QUEUE_LABEL, ""),
            local_queue=pod.labels.get(KUEUE_QUEUE_LABEL, ""), message=_join(diagnosis.message, pod.scheduling_message),
        ))
    collection.pending.filter(kind=PendingKind.POD).delete()
    PendingWork.objects.bulk_create(rows)
    if not snapshot.kueue_error:
        _replace_pending_workloads(collection, snapshot.kueue, rule, slots)
    _recount(collection)
    record_teams(cluster, {r.team for r in collection.pending.all()}, snapshot.taken_at)
    return collection


def accelerators(snapshot: ClusterSnapshot) -> Accelerators:
    """The snapshot's DRA objects, HAMi's registers and its GPUs' running tenants' shares for fragmentation, as
    the snapshot's hand-out read them (the same reading the inventory and the ledger use)."""
    hand = hand_out(snapshot)
    return Accelerators(dra=snapshot.dra, registers=hand.registers, hami_shares=hand.hami_shares)


def _group_row(collection: CapacityCollection, g: GroupFragmentation) -> NodeGroupSnapshot:
    return snapshot_row(
        NodeGroupSnapshot, collection, g,
        zero_allocatable_nodes=list(g.zero_allocatable_nodes), unschedulable_nodes=list(g.unschedulable_nodes),
        free_per_node=list(g.free_per_node), units=[u.as_dict() for u in g.units],
    )


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)[:2000]


# ---- Pending Kueue workloads ----


def _replace_pending_workloads(
    collection: CapacityCollection, kueue: KueueObjects | None, rule: TeamRule, slots: list[NodeSlots]
) -> None:
    """The collection's pending-workload rows, from the workloads Kueue has not admitted (none without Kueue)."""
    rows = _pending_workloads(collection, kueue, rule, slots) if kueue is not None else []
    collection.pending.filter(kind=PendingKind.WORKLOAD).delete()
    PendingWork.objects.bulk_create(rows)


def _pending_workloads(
    collection: CapacityCollection, kueue: KueueObjects, rule: TeamRule, slots: list[NodeSlots]
) -> list[PendingWork]:
    """Without `QuotaReserved=True` the reason is quota; with quota but not yet `Admitted` (admission
    checks) it is other. A workload is diagnosed by its largest GPU pod set.
    """
    rows = []
    for w in kueue.workloads:
        reason = diagnose_workload(
            quota_reserved=w.condition_true("QuotaReserved"), admitted=w.condition_true("Admitted")
        )
        main = _main_pod_set(w)
        if reason is None or w.condition_true("Finished") or main is None:
            continue
        resource, per_pod = main_resource(main.request)
        quota = w.conditions.get("QuotaReserved")
        rows.append(_pending_row(
            collection, w, rule, kind=PendingKind.WORKLOAD, reason=reason, resource=resource, per_pod=per_pod,
            share=unit_share(resource, slots), pods=max(1, main.count),
            cluster_queue=w.cluster_queue or kueue.cluster_queue_of(w.namespace, w.queue_name),
            local_queue=w.queue_name,
            message=(quota.message if quota is not None and quota.status != "True" else "")[:2000],
        ))
    return rows


def _pending_row(collection: CapacityCollection, item: PodInfo | WorkloadInfo, rule: TeamRule, **fields: Any
                 ) -> PendingWork:
    """A pending pod or workload of the collection: who it is (namespace, name, uid), whose team, since when, and
    `fields`."""
    return snapshot_row(
        PendingWork, collection, item, team=rule.team_of(item.labels, item.namespace), waiting_since=item.created,
        **fields,
    )


def _main_pod_set(w: WorkloadInfo) -> PodSetInfo | None:
    return max(w.gpu_pod_sets, key=lambda ps: (max(ps.request.values()), ps.count), default=None)


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
                **stamp(collection),
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


def prune_capacity_history(*, now: datetime | None = None, keep_days: int = FULL_RESOLUTION_DAYS) -> int:
    """Thins capacity collections older than `keep_days` to the last one per cluster and hour."""
    return thin_collections(CapacityCollection, now=now, keep_days=keep_days)
