"""Pure ledger arithmetic for one bucket (../shared/spec/ledger.md). No I/O, no Django models.

The collector assembles `BucketInputs` from whatever sources it has (Kubernetes API, kube-state-metrics,
DCGM series); `compute_bucket` turns them into pod and node rows. Keeping this pure is what lets the
tests compare it against the simulator's brute-force oracle.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from apps.usage.signals import SIGNALS

EPS = 1e-9
MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb")
MIG_PROFILE = re.compile(r"^(\d+)g\.")


@dataclass(frozen=True)
class NodeFact:
    """A node during the bucket."""

    name: str
    node_group: str
    gpu_model: str
    physical_gpus: int
    sharing: str  # none | time-slicing | mps | mig-mixed | mig-single
    replicas: dict[str, float]  # resource -> replicas per physical GPU (time-slicing/MPS)
    compute_slices: int  # 7 (A100/H100/H200/B200) or 4 (A30)
    mig_single_slices: int  # compute slices of the single-strategy MIG profile, else 0
    mig_memory_fraction: dict[str, float]  # mig resource -> memory fraction (optional weighting)
    present_seconds: float  # how long the node existed within the bucket
    unavailable: bool  # zero allocatable GPUs, cordoned or NotReady
    price: float | None  # USD per physical GPU-hour


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


@dataclass(frozen=True)
class SeriesFact:
    """One DCGM device (GPU or MIG instance) series carrying a pod's identity, averaged over the bucket."""

    namespace: str
    pod: str
    uuid: str
    gpu_instance_id: str  # "" for a whole GPU
    profile: str  # MIG GPU_I_PROFILE, "" for a whole GPU
    values: dict[str, float]  # signal -> time-average ratio in [0, 1]


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
    price: float | None
    allocated: float
    working: dict[str, float]
    idle: dict[str, float]
    unmeasured: dict[str, float]


@dataclass
class NodeRow:
    fact: NodeFact
    capacity: float
    allocated: float
    unallocated: float
    unavailable: float
    inconsistent: bool


@dataclass
class BucketResult:
    pods: list[PodRow]
    nodes: list[NodeRow]
    warnings: list[str] = field(default_factory=list)
    inconsistent: bool = False


def unit_share(resource: str, node: NodeFact | None, *, by_memory: bool = False) -> float | None:
    """Share of one physical GPU per requested unit of `resource` on `node` (the ledger's table).

    None means the resource is not a GPU resource the ledger knows: it is reported, never counted.
    """
    mig = MIG_RESOURCE.match(resource)
    if mig:
        if by_memory and node and resource in node.mig_memory_fraction:
            return node.mig_memory_fraction[resource]
        slices = node.compute_slices if node and node.compute_slices else 7
        return int(mig.group(1)) / slices
    if resource in ("nvidia.com/gpu", "nvidia.com/gpu.shared"):
        if node is None:
            return 1.0
        if node.sharing == "mig-single" and resource == "nvidia.com/gpu":
            return node.mig_single_slices / (node.compute_slices or 7)
        replicas = node.replicas.get(resource, 1.0)
        if resource == "nvidia.com/gpu.shared" or node.sharing in ("time-slicing", "mps"):
            return 1.0 / max(replicas, 1.0)
        return 1.0
    return None


def _series_slices(profile: str) -> int | None:
    m = MIG_PROFILE.match(profile)
    return int(m.group(1)) if m else None


def _valid_ratio(v: float) -> bool:
    return not math.isnan(v) and -EPS <= v <= 1.0 + 1e-6


def _pod_activity(
    units: list[tuple[str, float]], series: list[SeriesFact], hours: float
) -> tuple[dict[str, float], dict[str, float]]:
    """Working and unmeasured GPU-hours per signal for one pod.

    Each requested unit is matched to at most one device series: MIG units to series of the same
    compute-slice profile, other units to whole-GPU series. Unmatched units are unmeasured.
    """
    working = dict.fromkeys(SIGNALS, 0.0)
    unmeasured = dict.fromkeys(SIGNALS, 0.0)
    for signal in SIGNALS:
        pool = [s for s in series if signal in s.values and _valid_ratio(s.values[signal])]
        for resource, share in units:
            mig = MIG_RESOURCE.match(resource)
            want = int(mig.group(1)) if mig else None
            match = next((s for s in pool if _series_slices(s.profile) == want), None)
            if match is None and want is None:
                match = next((s for s in pool if s.profile == ""), None) or (pool[0] if pool else None)
            if match is None:
                unmeasured[signal] += share * hours
                continue
            pool.remove(match)
            working[signal] += share * hours * min(max(match.values[signal], 0.0), 1.0)
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

    result = BucketResult(pods=[], nodes=[])
    allocated_on: dict[str, float] = defaultdict(float)
    for pod in inputs.pods:
        if pod.held_seconds <= 0:
            continue
        node = nodes.get(pod.node)
        if node is None:
            result.warnings.append(f"pod {pod.namespace}/{pod.name} on unknown node {pod.node!r}")
        units: list[tuple[str, float]] = []
        for resource, count in sorted(pod.requests.items()):
            share = unit_share(resource, node, by_memory=inputs.mig_weight_by_memory)
            if share is None:
                result.warnings.append(f"pod {pod.namespace}/{pod.name}: unknown resource {resource} not counted")
                continue
            if count < 0 or count != int(count):
                result.warnings.append(f"pod {pod.namespace}/{pod.name}: bad quantity {count} for {resource}")
                continue
            units.extend([(resource, share)] * int(count))
        if not units:
            continue
        hours = pod.held_seconds / 3600.0
        gpus = sum(share for _, share in units)
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


def effective_request(containers: list[tuple[str, dict[str, float]]]) -> dict[str, float]:
    """The scheduler's rule: max(sum over app containers and sidecars, max over init containers).

    `containers` holds (kind, resources) with kind "app", "sidecar" or "init".
    """
    total: dict[str, float] = defaultdict(float)
    init_max: dict[str, float] = defaultdict(float)
    for kind, resources in containers:
        for res, qty in resources.items():
            if kind == "init":
                init_max[res] = max(init_max[res], qty)
            else:
                total[res] += qty
    return {r: max(total.get(r, 0.0), init_max.get(r, 0.0)) for r in set(total) | set(init_max)
            if max(total.get(r, 0.0), init_max.get(r, 0.0)) > 0}
