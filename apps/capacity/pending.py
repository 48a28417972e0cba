"""Why GPU work waits: pure diagnosis of pending pods and Kueue workloads (docs/fragmentation.md).

Reasons, in the order they are decided:

1. quota: a Kueue workload has no `QuotaReserved=True` condition (Kueue holds it back);
2. other: a schedulable node already has enough free units for one pod, so GPUs are not what
   blocks it (node selector, taints, CPU or memory), or Kueue reserved quota but an admission
   check is still pending;
3. fragmentation: some node group has enough free units in total, but no single node has
   enough for one pod;
4. capacity: no node group has enough free units in total.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from apps.capacity.constants import KUEUE_QUEUE_LABEL, KUEUE_WORKLOAD_ANNOTATION, PendingReason
from apps.capacity.fragmentation import GroupFragmentation, effective_request
from apps.ingest.collectors.types import PodInfo


@dataclass(frozen=True)
class Diagnosis:
    """The reason one pending pod (or pod of a workload) waits, and where it was looked for."""

    reason: str
    resource: str
    per_pod: int
    node_group: str
    message: str


def main_resource(request: dict[str, int]) -> tuple[str, int]:
    """The device resource a pod asks most of (pods rarely ask for two kinds)."""
    resource = max(sorted(request), key=lambda r: request[r])
    return resource, request[resource]


def diagnose_request(request: dict[str, int], groups: Sequence[GroupFragmentation]) -> Diagnosis:
    """Reason for a pod asking `request` given the current fragmentation rows of its cluster."""
    resource, need = main_resource(request)
    candidates = [g for g in groups if g.resource == resource]
    if not candidates:
        return Diagnosis(PendingReason.CAPACITY, resource, need, "", f"no node offers {resource}")
    fits = [g for g in candidates if g.largest_free_block >= need]
    if fits:
        group = max(fits, key=lambda g: (g.largest_free_block, g.node_group))
        message = (
            f"{group.node_group} has a node with {group.largest_free_block} free; "
            "something other than GPUs blocks the pod"
        )
        return Diagnosis(PendingReason.OTHER, resource, need, group.node_group, message)
    enough = [g for g in candidates if g.free_gpus >= need]
    if enough:
        group = max(enough, key=lambda g: (g.free_gpus, g.node_group))
        message = (
            f"{group.free_gpus} {group.unit} free in {group.node_group}, "
            f"but the largest block on one node is {group.largest_free_block} < {need}"
        )
        return Diagnosis(PendingReason.FRAGMENTATION, resource, need, group.node_group, message)
    group = max(candidates, key=lambda g: (g.free_gpus, g.node_group))
    message = f"needs {need} {group.unit}; at most {group.free_gpus} free in any node group"
    return Diagnosis(PendingReason.CAPACITY, resource, need, group.node_group, message)


def diagnose_workload(*, quota_reserved: bool, admitted: bool) -> str | None:
    """A Kueue workload's reason, or None when Kueue admitted it (its pods are diagnosed instead)."""
    if not quota_reserved:
        return PendingReason.QUOTA
    if not admitted:
        return PendingReason.OTHER
    return None


def is_pending(pod: PodInfo) -> bool:
    """Not bound to a node yet, not being deleted."""
    return pod.phase == "Pending" and not pod.node and pod.deletion is None


def is_held_by_kueue(pod: PodInfo) -> bool:
    """A Kueue-managed pod behind a scheduling gate: its Workload row carries the reason."""
    gated = "scheduling gate" in pod.scheduling_message.lower() or "schedulinggated" in pod.scheduling_message.lower()
    managed = KUEUE_WORKLOAD_ANNOTATION in pod.annotations or KUEUE_QUEUE_LABEL in pod.labels
    return gated and managed


def pending_pods(pods: Iterable[PodInfo]) -> list[tuple[PodInfo, dict[str, int]]]:
    """Pending pods that need device resources, with their effective request."""
    out = []
    for pod in pods:
        if not is_pending(pod) or is_held_by_kueue(pod):
            continue
        request = effective_request(pod.containers)
        if request:
            out.append((pod, request))
    return out
