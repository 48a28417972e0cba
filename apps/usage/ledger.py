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

from apps.inventory.gpus import NOT_DEVICE_PLUGIN, UNIT_REPLICA, UNKNOWN_NODE, GpuNode, mig_profile, profile_slices
from apps.inventory.gpus.dra_claims import claim_workload
from apps.inventory.gpus.holds import Hold, node_mode
from apps.inventory.gpus.vocabulary import AllocationMode
from apps.usage.activity import SIGNALS
from apps.usage.holding import ClaimSpan, Held, HolderSpan, held_time, hold_seconds

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
    holds: tuple[Hold, ...] = ()  # DRA devices through its claims, HAMi fractions (gpus.holds)
    span: tuple[float, float] | None = None  # when it held, seconds from the bucket's start; None: the first
    allocation_mode: str = "device_plugin"  # gpus.AllocationMode

    @property
    def held_span(self) -> tuple[float, float]:
        return self.span if self.span is not None else (0.0, self.held_seconds)


@dataclass(frozen=True)
class ClaimFact:
    """A ResourceClaim allocated during the bucket (as the collector saw it)."""

    uid: str
    namespace: str
    name: str
    node: str
    team: str
    devices: tuple[Hold, ...]
    allocated: tuple[tuple[float, float], ...]  # seconds from the bucket's start


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
    device_uuid: str = ""  # a DRA MIG device's own UUID (the exporter's `dra_mig_device_uuid`)


@dataclass
class BucketInputs:
    hour: datetime
    seconds: float  # length of the bucket considered (3600, or less while provisional)
    nodes: list[NodeFact]
    pods: list[PodFact]
    series: list[SeriesFact]
    mig_weight_by_memory: bool = False
    claims: list[ClaimFact] = field(default_factory=list)
    # (pod uid, GPU UUID) -> signal -> its GPU's value over the pod's held part (HAMi tenants: no pod series)
    gpu_values: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)


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
    # HAMi GPUs (node, UUID) whose tenants' shares added past 1 -> (seconds, the most they added to)
    oversubscribed: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    # DRA nodes whose claims' devices were held and no DRA series named a holder: dcgm-exporter without DRA
    # attribution (KUBERNETES_ENABLE_DRA); their hours are unmeasured
    unattributed_dra_nodes: set[str] = field(default_factory=set)


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


def _dra_series(hold: Hold, pool: list[SeriesFact]) -> SeriesFact | None:
    """The pod's series of a DRA device, taken out of `pool`: a MIG device's by its own UUID (else its GPU's
    UUID and profile), a whole GPU's by its UUID."""
    if hold.profile:
        want = profile_slices(hold.profile)
        match = next((s for s in pool if s.device_uuid and s.device_uuid == hold.device_uuid), None) or next(
            (s for s in pool if s.uuid == hold.gpu_uuid and not s.device_uuid and profile_slices(s.profile) == want),
            None)
    else:
        match = next((s for s in pool if s.uuid == hold.gpu_uuid and s.profile == ""), None)
    if match is not None:
        pool.remove(match)
    return match


@dataclass
class _HeldActivity:
    allocated: float
    working: dict[str, float]
    unmeasured: dict[str, float]
    series: list[SeriesFact]  # the pod's series no hold took
    dra_matched: bool | None  # None: no DRA device held; else whether any had its series


def _held_activity(pod: PodFact, held: Held, series: list[SeriesFact],
                   gpu_values: dict[tuple[str, str], dict[str, float]]) -> _HeldActivity:
    """GPU-hours of the pod's DRA and HAMi holds, and what they worked: a DRA device by its own series (the
    exporter's DRA attribution names the pod), a HAMi fraction by its GPU's value x its share (ledger.md)."""
    out = _HeldActivity(0.0, dict.fromkeys(SIGNALS, 0.0), dict.fromkeys(SIGNALS, 0.0), list(series), None)
    for hold, share_seconds in hold_seconds(held, pod.uid, pod.holds):
        hours = share_seconds / 3600.0
        out.allocated += hours
        if hold.mode == AllocationMode.HAMI:
            values = gpu_values.get((pod.uid, hold.gpu_uuid), {})
        else:
            match = _dra_series(hold, out.series)
            values = match.values if match is not None else {}
            if hours > 0:
                out.dra_matched = bool(out.dra_matched) or match is not None
        for signal in SIGNALS:
            v = values.get(signal)
            if v is None or not _valid_ratio(v):
                out.unmeasured[signal] += hours
            else:
                out.working[signal] += hours * min(max(v, 0.0), 1.0)
    return out


def compute_bucket(inputs: BucketInputs) -> BucketResult:
    """Pod and node rows for one bucket.

    1. Each pod's units get their share of a physical GPU from the node it runs on; its DRA and HAMi holds
       their share-seconds (a shared claim split among its consumers, an oversubscribed GPU scaled: holding.py).
    2. allocated = share x hours held; activity splits it into working, idle and unmeasured per signal.
    3. A claim allocated with no running consumer: its own row, all idle (workload `ResourceClaim/<name>`).
    4. Node capacity = physical GPUs x hours present; unallocated = capacity - allocated (flagged, not
       clamped silently, when negative).
    """
    nodes = {n.name: n for n in inputs.nodes}
    by_pod: dict[tuple[str, str], list[SeriesFact]] = defaultdict(list)
    for s in inputs.series:
        by_pod[(s.namespace, s.pod)].append(s)

    result = BucketResult(pods=[], nodes=[], series=len(inputs.series))
    result.signals = {signal for s in inputs.series for signal in s.values}
    allocated_on: dict[str, float] = defaultdict(float)
    held = held_time([HolderSpan(p.uid, p.held_span, p.holds) for p in inputs.pods if p.holds and p.held_seconds > 0],
                     [ClaimSpan(c.uid, c.devices, c.allocated) for c in inputs.claims], inputs.seconds)
    dra_matched: dict[str, bool] = {}
    gpu_node: dict[str, str] = {}
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
                if not (pod.holds and gpu.sharing in NOT_DEVICE_PLUGIN):  # a vGPU or a claim's resource
                    result.warnings.append(f"pod {pod.namespace}/{pod.name}: unknown resource {resource} not counted")
                continue
            if count < 0 or count != int(count):
                result.warnings.append(f"pod {pod.namespace}/{pod.name}: bad quantity {count} for {resource}")
                continue
            units.extend([Unit(resource, share, gpu.unit_kind(resource))] * int(count))
        if not units and not pod.holds:
            continue
        hours = pod.held_seconds / 3600.0
        extra = _held_activity(pod, held, by_pod.get((pod.namespace, pod.name), []), inputs.gpu_values)
        if extra.dra_matched is not None:
            dra_matched[pod.node] = dra_matched.get(pod.node, False) or extra.dra_matched
        for h in pod.holds:
            gpu_node[h.gpu_uuid] = pod.node
        allocated = sum(u.share for u in units) * hours + extra.allocated
        if allocated <= 0:
            continue
        working, unmeasured = _pod_activity(units, extra.series, hours)
        for signal in SIGNALS:
            working[signal] += extra.working[signal]
            unmeasured[signal] += extra.unmeasured[signal]
        idle = {signal: max(allocated - working[signal] - unmeasured[signal], 0.0) for signal in SIGNALS}
        price = node.price if node else None
        result.pods.append(
            PodRow(
                fact=pod,
                node_group=node.node_group if node else "",
                gpu_model=node.gpu_model if node else "",
                gpus=allocated / hours,
                price=price,
                allocated=allocated,
                working=working,
                idle=idle,
                unmeasured=unmeasured,
                allocation_mode=pod.allocation_mode,
            )
        )
        allocated_on[pod.node] += allocated
    for claim in inputs.claims:
        row = _claim_row(claim, held, nodes.get(claim.node))
        if row is not None:
            result.pods.append(row)
            allocated_on[claim.node] += row.allocated
    result.unattributed_dra_nodes = {n for n, matched in dra_matched.items() if not matched}
    result.oversubscribed = {(gpu_node.get(g, ""), g): (seconds, held.peak.get(g, 0.0))
                             for g, seconds in held.oversubscribed.items()}

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


def _claim_row(claim: ClaimFact, held: Held, node: NodeFact | None) -> PodRow | None:
    """A claim's hours with no running consumer: idle, charged to its namespace and team (ledger.md)."""
    share_seconds = held.claim_idle.get(claim.uid, 0.0)
    seconds = held.claim_idle_seconds.get(claim.uid, 0.0)
    if share_seconds <= 0 or seconds <= 0:
        return None
    allocated = share_seconds / 3600.0
    fact = PodFact(uid=claim.uid, namespace=claim.namespace, name="", node=claim.node, team=claim.team,
                   requests={}, held_seconds=seconds, workload=claim_workload(claim.name),
                   allocation_mode=AllocationMode.DRA)
    return PodRow(fact=fact, node_group=node.node_group if node else "", gpu_model=node.gpu_model if node else "",
                  gpus=share_seconds / seconds, price=node.price if node else None, allocated=allocated,
                  working=dict.fromkeys(SIGNALS, 0.0), idle=dict.fromkeys(SIGNALS, allocated),
                  unmeasured=dict.fromkeys(SIGNALS, 0.0), allocation_mode=AllocationMode.DRA)
