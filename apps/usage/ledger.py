"""Pure ledger arithmetic for one bucket (docs/numbers.md). No I/O, no Django models.

The collector assembles `BucketInputs` from whatever sources it has (Kubernetes API, kube-state-metrics,
DCGM series); `compute_bucket` turns them into pod and node rows. Keeping this pure is what lets the
tests compare it against the simulator's brute-force oracle.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from apps.inventory.gpus import UNIT_REPLICA, UNKNOWN_NODE, GpuNode, mig_profile, profile_slices
from apps.inventory.gpus.holds import node_mode
from apps.usage.activity import SIGNALS

EPS = 1e-9


@dataclass(frozen=True)
class NodeFact:
    """A node during the bucket: its GPUs as the GPU rules classify them, and how long it was there."""

    name: str
    node_group: str
    gpu: GpuNode
    present_seconds: float  # how long the node existed within the bucket
    unavailable: bool  # zero allocatable GPUs, cordoned or NotReady
    price: Decimal | None  # USD per physical GPU-hour

    @property
    def gpu_model(self) -> str:
        return self.gpu.gpu_model

    @property
    def physical_gpus(self) -> int:
        return self.gpu.physical_gpus


@dataclass(frozen=True)
class PodFact:
    """A pod's hold on GPUs during the bucket."""

    uid: str
    namespace: str
    name: str
    node: str
    team: str
    requests: dict[str, float]  # effective request per NVIDIA resource
    held_seconds: float  # time within the bucket the pod held its GPUs
    cluster_queue: str = ""
    local_queue: str = ""
    workload: str = ""  # `Kind/name` of its top controller (apps/inventory/workloads.py)


@dataclass(frozen=True)
class SeriesFact:
    """One DCGM device (GPU or MIG instance) series carrying a pod's identity, averaged over the bucket."""

    namespace: str
    pod: str
    uuid: str
    gpu_instance_id: str  # "" for a whole GPU
    profile: str  # MIG GPU_I_PROFILE, "" for a whole GPU
    values: dict[str, float]  # signal -> time-average ratio in [0, 1]
    replica: str = ""  # the exporter's `vgpu` label (--kubernetes-virtual-gpus: one series per replica)


@dataclass
class BucketInputs:
    hour: datetime
    seconds: float  # length of the bucket considered (3600, or less while provisional)
    nodes: list[NodeFact]
    pods: list[PodFact]
    series: list[SeriesFact]
    mig_weight_by_memory: bool = False


@dataclass
class PodRow:
    fact: PodFact
    node_group: str
    gpu_model: str
    gpus: float
    price: Decimal | None
    allocated: float
    working: dict[str, float]
    idle: dict[str, float]
    unmeasured: dict[str, float]
    allocation_mode: str = "device_plugin"  # gpus.AllocationMode of what it holds


@dataclass
class NodeRow:
    fact: NodeFact
    capacity: float
    allocated: float
    unallocated: float
    unavailable: float
    inconsistent: bool

    @property
    def allocation_mode(self) -> str:
        """How the node hands its GPUs out (gpus.holds.node_mode)."""
        return str(node_mode(self.fact.gpu.sharing))


@dataclass
class BucketResult:
    pods: list[PodRow]
    nodes: list[NodeRow]
    warnings: list[str] = field(default_factory=list)
    inconsistent: bool = False
    series: int = 0  # DCGM series carrying a pod identity in the bucket
    signals: set[str] = field(default_factory=set)  # the signals those series had


def _valid_ratio(v: float) -> bool:
    return not math.isnan(v) and -EPS <= v <= 1.0 + 1e-6


@dataclass(frozen=True)
class Unit:
    """One requested unit of a pod: its resource, its share of a physical GPU and what it is."""

    resource: str
    share: float
    kind: str  # gpus.UNIT_GPU, gpus.UNIT_REPLICA or "mig-<profile>"


def _pod_activity(
    units: list[Unit], series: list[SeriesFact], hours: float
) -> tuple[dict[str, float], dict[str, float]]:
    """Working and unmeasured GPU-hours per signal for one pod.

    * A whole GPU or a MIG instance is matched to a distinct device series (MIG by compute-slice profile).
    * Replicas of shared GPUs are measured by the whole-GPU series the pod has: one per replica with
      `--kubernetes-virtual-gpus`, else one per physical GPU and pod, which then measures every replica the
      pod holds on that GPU (spread evenly over the pod's GPUs: the exporter does not say which replica is
      where). A shared GPU's value is the device's; each replica is charged its share of it, never a sum.
    Units left without a series are unmeasured, never guessed.
    """
    working = dict.fromkeys(SIGNALS, 0.0)
    unmeasured = dict.fromkeys(SIGNALS, 0.0)
    replicas = [u for u in units if u.kind == UNIT_REPLICA]
    devices = [u for u in units if u.kind != UNIT_REPLICA]
    for signal in SIGNALS:
        pool = [s for s in series if signal in s.values and _valid_ratio(s.values[signal])]
        matched: list[tuple[Unit, SeriesFact | None]] = []
        for unit in devices:
            profile = mig_profile(unit.resource)
            want = profile_slices(profile) if profile else None
            match = next((s for s in pool if profile_slices(s.profile) == want), None)
            if match is None and want is None:
                match = next((s for s in pool if s.profile == ""), None) or (pool[0] if pool else None)
            if match is not None:
                pool.remove(match)
            matched.append((unit, match))
        whole = [s for s in pool if s.profile == ""]
        matched += [(unit, whole[i % len(whole)] if whole else None) for i, unit in enumerate(replicas)]
        for unit, match in matched:
            if match is None:
                unmeasured[signal] += unit.share * hours
            else:
                working[signal] += unit.share * hours * min(max(match.values[signal], 0.0), 1.0)
    return working, unmeasured


def compute_bucket(inputs: BucketInputs) -> BucketResult:
    """Pod and node rows for one bucket.

    1. Each pod's units get their share of a physical GPU from the node it runs on.
    2. allocated = share x hours held; activity splits it into working, idle and unmeasured per signal.
    3. Node capacity = physical GPUs x hours present; unallocated = capacity - allocated (flagged, not
       clamped silently, when negative).
    """
    nodes = {n.name: n for n in inputs.nodes}
    by_pod: dict[tuple[str, str], list[SeriesFact]] = defaultdict(list)
    for s in inputs.series:
        by_pod[(s.namespace, s.pod)].append(s)

    result = BucketResult(pods=[], nodes=[], series=len(inputs.series))
    result.signals = {signal for s in inputs.series for signal in s.values}
    allocated_on: dict[str, float] = defaultdict(float)
    for pod in inputs.pods:
        if pod.held_seconds <= 0:
            continue
        node = nodes.get(pod.node)
        if node is None:
            result.warnings.append(f"pod {pod.namespace}/{pod.name} on unknown node {pod.node!r}")
        units: list[Unit] = []
        gpu = node.gpu if node else UNKNOWN_NODE
        for resource, count in sorted(pod.requests.items()):
            share = gpu.unit_share(resource, by_memory=inputs.mig_weight_by_memory)
            if share is None:
                result.warnings.append(f"pod {pod.namespace}/{pod.name}: unknown resource {resource} not counted")
                continue
            if count < 0 or count != int(count):
                result.warnings.append(f"pod {pod.namespace}/{pod.name}: bad quantity {count} for {resource}")
                continue
            units.extend([Unit(resource, share, gpu.unit_kind(resource))] * int(count))
        if not units:
            continue
        hours = pod.held_seconds / 3600.0
        gpus = sum(u.share for u in units)
        allocated = gpus * hours
        working, unmeasured = _pod_activity(units, by_pod.get((pod.namespace, pod.name), []), hours)
        idle = {s: max(allocated - working[s] - unmeasured[s], 0.0) for s in SIGNALS}
        price = node.price if node else None
        result.pods.append(
            PodRow(
                fact=pod,
                node_group=node.node_group if node else "",
                gpu_model=node.gpu_model if node else "",
                gpus=gpus,
                price=price,
                allocated=allocated,
                working=working,
                idle=idle,
                unmeasured=unmeasured,
            )
        )
        allocated_on[pod.node] += allocated

    for node in inputs.nodes:
        capacity = node.physical_gpus * node.present_seconds / 3600.0
        allocated = allocated_on.pop(node.name, 0.0)
        unallocated = capacity - allocated
        inconsistent = unallocated < -1e-6
        if inconsistent:
            result.inconsistent = True
            result.warnings.append(
                f"node {node.name}: allocated {allocated:.6f} exceeds capacity {capacity:.6f} GPU-hours"
            )
        result.nodes.append(
            NodeRow(
                fact=node,
                capacity=capacity,
                allocated=allocated,
                unallocated=max(unallocated, 0.0),
                unavailable=capacity if node.unavailable else 0.0,
                inconsistent=inconsistent,
            )
        )
    return result
