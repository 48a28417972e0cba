"""Why GPU work waits: pure diagnosis of pending pods and Kueue workloads (docs/fragmentation.md).

Reasons, in the order they are decided:

1. quota: a Kueue workload has no `QuotaReserved=True` condition (Kueue holds it back);
2. other: no node offering the resource matches the pod's node selector; or a schedulable node
   already has enough free units for one pod, so GPUs are not what blocks it (taints, CPU or
   memory); or Kueue reserved quota but an admission check is still pending;
3. fragmentation: some matching node group has enough free units in total, but no single node
   has enough for one pod;
4. capacity: no matching node group has enough free units in total (or no node offers the
   resource at all).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from apps.capacity.constants import PendingReason
from apps.capacity.fragmentation import NodeSlots
from apps.inventory.gpus import UNKNOWN_NODE, device_request
from apps.inventory.observations import KUEUE_QUEUE_LABEL, KUEUE_WORKLOAD_ANNOTATION, PodInfo


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


def selector_matches(labels: dict[str, str], selector: dict[str, str] | None) -> bool:
    """A node selector (label equality) matches the node's labels."""
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def diagnose_request(
    request: dict[str, int], slots: Sequence[NodeSlots], selector: dict[str, str] | None = None
) -> Diagnosis:
    """Reason for a pod asking `request`, given every node's slots and the pod's node selector.

    Only nodes that offer the pod's device resource and match its node selector are considered;
    free units count on schedulable nodes only.
    """
    resource, need = main_resource(request)
    offering = [s for s in slots if s.resource == resource]
    if not offering:
        return Diagnosis(PendingReason.CAPACITY, resource, need, "", f"no node offers {resource}")
    matching = [s for s in offering if selector_matches(s.labels, selector)]
    if not matching:
        message = f"no node offering {resource} matches the pod's node selector"
        return Diagnosis(PendingReason.OTHER, resource, need, "", message)
    free: dict[str, list[int]] = defaultdict(list)
    for s in matching:
        free[s.node_group].append(s.free)
    totals = {group: (sum(f), max(f)) for group, f in free.items()}  # (free in total, largest block)
    fits = [g for g, (_, largest) in totals.items() if largest >= need]
    if fits:
        group = max(fits, key=lambda g: (totals[g][1], g))
        message = f"a node of {group} has {totals[group][1]} free; something other than GPUs blocks the pod"
        return Diagnosis(PendingReason.OTHER, resource, need, group, message)
    enough = [g for g, (total, _) in totals.items() if total >= need]
    if enough:
        group = max(enough, key=lambda g: (totals[g][0], g))
        total, largest = totals[group]
        message = f"{total} free in {group}, but the largest block on one node is {largest} < {need}"
        return Diagnosis(PendingReason.FRAGMENTATION, resource, need, group, message)
    group = max(totals, key=lambda g: (totals[g][0], g))
    message = f"needs {need}; at most {totals[group][0]} free in any matching node group"
    return Diagnosis(PendingReason.CAPACITY, resource, need, group, message)


def unit_share(resource: str, slots: Sequence[NodeSlots], node_group: str = "") -> float:
    """Physical-GPU equivalent of one unit of `resource` for work waiting for it: the GPU rules' share
    (NodeSlots.share) on the nodes of `node_group` that offer it, else on any node that does (the share most of
    them give, the larger on a tie: nodes of one resource rarely differ), else on a node the rules know nothing
    about (whole GPUs, a MIG slice of 7)."""
    offering = [s for s in slots if s.resource == resource]
    nodes = [s for s in offering if s.node_group == node_group] or offering
    shares = Counter(s.share for s in nodes if s.share > 0)
    if shares:
        return max(shares, key=lambda share: (shares[share], share))
    known = UNKNOWN_NODE.unit_share(resource)
    return 1.0 if known is None else known


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
        request = device_request(pod.containers)
        if request:
            out.append((pod, request))
    return out
