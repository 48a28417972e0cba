"""Fragmentation of free GPUs: pure functions over the collector's node and pod dataclasses.

Every number is defined in docs/fragmentation.md with a worked example. In short, for the
schedulable nodes of a node group (Ready, not cordoned, the resource advertised) with `free_n`
units free on node n:

* `largest_free_block` = max(free_n): the most units one pod could get on a single node;
* `placeable[s]` = Σ floor(free_n / s): how many pods of s units fit at once;
* `stranded_gpus[s]` = Σ (free_n mod s): free units no pod of s units could use.

One row per node group. Its `allocatable_gpus`, `allocated_gpus` and `free_gpus` are physical-GPU
equivalents (a whole GPU 1, a MIG instance N/7, a time-sliced replica 1/R, as the ledger shares
them); its block numbers count whole `nvidia.com/gpu` devices, the only unit a multi-GPU pod can
combine. Each row also carries `units`: the same numbers per device resource in that resource's
own unit (whole GPUs, time-sliced/MPS replicas, or instances of one MIG profile).

Nodes whose GPUs DRA claims or HAMi fractions hand out advertise no device-plugin unit (they are never
zero-allocatable) and are counted per physical GPU by the GPU rules (`NodeGpus`):

* a DRA node from its ResourceSlices: published minus held devices (`gpus.dra.capacity`, `free_devices`): a
  GPU with any MIG device held is not a free whole GPU. Its units: `gpu.nvidia.com` (whole GPUs, the
  DeviceClass) and `mig.nvidia.com/<profile>` (MIG devices), in devices;
* a HAMi node from its register and its tenants' shares (`gpus.hami.capacity`): a GPU with any tenant shows
  its free fraction and is not free for a whole-GPU job. Its unit: `nvidia.com/gpu` as GPUs (`fraction`).

Their free whole GPUs join the block numbers like any node's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from apps.capacity.constants import SHAPES
from apps.inventory import gpus
from apps.inventory.gpus import dra, hami
from apps.inventory.gpus.holds import node_gpus, node_mode
from apps.inventory.observations import DraObjects, NodeInfo, PodInfo

# The units of a DRA node (its GPU driver's DeviceClasses: whole GPUs, MIG devices of a profile).
DRA_WHOLE_RESOURCE = "gpu.nvidia.com"
DRA_MIG_RESOURCE_PREFIX = "mig.nvidia.com/"


@dataclass(frozen=True)
class NodeGpus:
    """A DRA or HAMi node's GPUs in physical-GPU equivalents, counted per physical GPU (not per unit)."""

    allocatable: float
    allocated: float
    free: float  # on a schedulable node; 0 otherwise


@dataclass(frozen=True)
class Accelerators:
    """What fragmentation needs to count GPUs DRA claims and HAMi fractions hand out, as the snapshot's hand-out
    (`apps.inventory.handout`) read them: the DRA objects, HAMi nodes' registers, and per HAMi node its GPUs'
    running tenants' shares added up."""

    dra: DraObjects | None = None
    registers: Mapping[str, hami.Register] = field(default_factory=dict)
    hami_shares: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class NodeSlots:
    """One node's view of one NVIDIA device resource, in that resource's unit."""

    node: str
    node_group: str
    gpu_model: str
    resource: str
    unit: str
    physical_gpus: int
    allocatable: int
    allocated: int
    schedulable: bool
    zero_allocatable: bool
    share: float = 1.0  # physical-GPU equivalent of one unit
    labels: dict[str, str] = field(default_factory=dict, compare=False)
    # Its free units are whole GPUs a multi-GPU pod can combine (the block numbers count them).
    whole: bool = False
    # DRA and HAMi nodes: the node's equivalents (the same on each of its slots); None: the sum of its units.
    node_gpus: NodeGpus | None = field(default=None, compare=False)
    mode: str = gpus.AllocationMode.DEVICE_PLUGIN  # how the node hands its GPUs out (gpus.holds.node_mode)

    @property
    def free(self) -> int:
        """Units a new pod could get here: only schedulable nodes offer any."""
        if not self.schedulable:
            return 0
        return max(0, self.allocatable - self.allocated)


@dataclass(frozen=True)
class UnitFragmentation:
    """The numbers of one device resource of a node group, in that resource's unit."""

    resource: str
    unit: str
    nodes: int
    allocatable: int
    allocated: int
    free: int
    largest_free_block: int
    placeable: dict[str, int]
    stranded: dict[str, int]

    def as_dict(self) -> dict:
        """JSON-ready, as stored and served."""
        return {
            "resource": self.resource,
            "unit": self.unit,
            "nodes": self.nodes,
            "allocatable": self.allocatable,
            "allocated": self.allocated,
            "free": self.free,
            "largest_free_block": self.largest_free_block,
            "placeable": self.placeable,
            "stranded": self.stranded,
        }


@dataclass(frozen=True)
class GroupFragmentation:
    """The fragmentation numbers of one node group (interfaces.md, /api/v1/fragmentation/)."""

    node_group: str
    gpu_model: str
    nodes: int
    physical_gpus: int
    allocatable_gpus: float
    allocated_gpus: float
    free_gpus: float
    largest_free_block: int
    placeable: dict[str, int]
    stranded_gpus: dict[str, int]
    zero_allocatable_nodes: tuple[str, ...]
    unschedulable_nodes: tuple[str, ...]
    free_per_node: tuple[int, ...]  # free whole GPUs of each schedulable node, largest first
    units: tuple[UnitFragmentation, ...]


# ---- The three numbers ----


def largest_free_block(free: Sequence[int]) -> int:
    """The most units one pod could get on a single node."""
    return max(free, default=0)


def placeable(free: Sequence[int], shapes: Sequence[int] = SHAPES) -> dict[str, int]:
    """For each shape s: how many pods of s units fit at once, Σ floor(free_n / s)."""
    return {str(s): sum(f // s for f in free) for s in shapes}


def stranded(free: Sequence[int], shapes: Sequence[int] = SHAPES) -> dict[str, int]:
    """For each shape s: free units that no pod of s units could use, Σ (free_n mod s)."""
    return {str(s): sum(f % s for f in free) for s in shapes}


# ---- Reading nodes and pods ----


def holds_devices(pod: PodInfo) -> bool:
    """A pod bound to a node and not terminated holds its devices there."""
    return bool(pod.node) and pod.phase not in TERMINAL_PHASES


def node_slots(nodes: Iterable[NodeInfo], pods: Iterable[PodInfo], group_labels: Sequence[str],
               accelerators: Accelerators | None = None) -> list[NodeSlots]:
    """Each GPU node's allocatable, allocated and schedulability per device resource.

    A node is reported for each device resource it advertises a non-zero capacity or allocatable
    of. A GPU node that advertises none (device plugin not registered) gets one row for its first
    listed resource, else `nvidia.com/gpu`, with zero allocatable, so it is still counted and named.
    A node a DRA driver publishes GPUs of, or HAMi registered GPUs on, is counted from those instead
    (`accelerator_slots`).
    """
    acc = accelerators or Accelerators()
    allocated: dict[tuple[str, str], int] = defaultdict(int)
    for pod in pods:
        if holds_devices(pod):
            for resource, amount in gpus.device_request(pod.containers).items():
                allocated[(pod.node, resource)] += amount
    slots: list[NodeSlots] = []
    for node in nodes:
        special = accelerator_slots(node, group_labels, acc)
        if special is not None:
            slots.extend(special)
            continue
        listed = sorted(r for r in {*node.capacity, *node.allocatable} if gpus.is_device_resource(r))
        resources = [r for r in listed if gpus.to_count(node.capacity.get(r)) or gpus.to_count(node.allocatable.get(r))]
        if not resources:
            resources = [gpus.NVIDIA_GPU if gpus.NVIDIA_GPU in listed or not listed else listed[0]]
        gpu = gpus.classify_node(node.labels, node.capacity or node.allocatable)
        group = gpus.node_group(node.labels, gpu.gpu_model, group_labels)
        zero = gpus.is_zero_allocatable(node.allocatable)
        for resource in resources:
            alloc = gpus.to_count(node.allocatable.get(resource))
            slots.append(
                NodeSlots(
                    node=node.name,
                    node_group=group,
                    gpu_model=gpu.gpu_model,
                    resource=resource,
                    unit=gpu.unit_kind(resource),
                    physical_gpus=gpu.physical_gpus,
                    allocatable=alloc,
                    allocated=allocated[(node.name, resource)],
                    schedulable=node.ready and not node.unschedulable and alloc > 0,
                    zero_allocatable=zero,
                    share=gpu.unit_share(resource) or 0.0,
                    labels=node.labels,
                    whole=resource == gpus.NVIDIA_GPU and gpu.unit_kind(resource) == gpus.UNIT_GPU,
                    mode=node_mode(gpu.sharing),
                )
            )
    return slots


# ---- Nodes whose GPUs DRA claims or HAMi fractions hand out ----


def accelerator_slots(node: NodeInfo, group_labels: Sequence[str], acc: Accelerators) -> list[NodeSlots] | None:
    """A DRA node's or a HAMi node's slots (None for any other node): equivalents per physical GPU, whole-GPU
    blocks from the GPUs nothing of which is held; never zero-allocatable."""
    dra_node = acc.dra.inventory.nodes.get(node.name) if acc.dra is not None else None
    register = acc.registers.get(node.name)
    gpu = node_gpus(node.labels, node.capacity or node.allocatable, dra_node=dra_node, register=register)
    if gpu.sharing not in gpus.NOT_DEVICE_PLUGIN:
        return None
    group = gpus.node_group(node.labels, gpu.gpu_model, group_labels)
    ready = node.ready and not node.unschedulable

    def slot(resource: str, unit: str, allocatable: int, allocated: int, share: float, figures: NodeGpus,
             mode: str, whole: bool) -> NodeSlots:
        return NodeSlots(node=node.name, node_group=group, gpu_model=gpu.gpu_model, resource=resource, unit=unit,
                         physical_gpus=gpu.physical_gpus, allocatable=allocatable, allocated=allocated,
                         schedulable=ready and allocatable > 0, zero_allocatable=False, share=share,
                         labels=node.labels, whole=whole, node_gpus=figures, mode=mode)

    if gpu.sharing == gpus.DRA_CLAIMS and dra_node is not None:
        names = acc.dra.held.get(node.name, frozenset()) if acc.dra is not None else frozenset()
        held = {d.key for d in dra_node.devices if d.name in names}
        cap = dra.capacity(dra_node, held)
        figures = NodeGpus(cap.allocatable, cap.allocated, cap.free.gpus if ready else 0.0)
        whole = [d for d in dra_node.devices if d.type == dra.TYPE_GPU]
        out = [slot(DRA_WHOLE_RESOURCE, gpus.UNIT_GPU, len(whole), len(whole) - cap.whole_free, 1.0, figures,
                    gpus.AllocationMode.DRA, True)] if whole else []
        profiles = Counter(d.profile for d in dra_node.devices if d.type == dra.TYPE_MIG)
        free_mig = cap.free.mig_by_profile()
        for profile, published in sorted(profiles.items()):
            out.append(slot(DRA_MIG_RESOURCE_PREFIX + profile, gpus.mig_unit(profile), published,
                            published - free_mig.get(profile, 0), gpu.instance_share(profile) or 0.0, figures,
                            gpus.AllocationMode.DRA, False))
        return out or [slot(DRA_WHOLE_RESOURCE, gpus.UNIT_GPU, 0, 0, 1.0, figures, gpus.AllocationMode.DRA, True)]
    if register is None:
        return None
    cap_h = hami.capacity(register, acc.hami_shares.get(node.name, {}))
    figures = NodeGpus(cap_h.allocatable, cap_h.allocated, cap_h.free if ready else 0.0)
    n = len(register.gpus)
    return [slot(gpus.NVIDIA_GPU, gpus.UNIT_FRACTION, n, n - cap_h.whole_free, 1.0, figures,
                 gpus.AllocationMode.HAMI, True)]


# ---- Per node group ----


def group_fragmentation(slots: Iterable[NodeSlots], shapes: Sequence[int] = SHAPES) -> list[GroupFragmentation]:
    """Sums node slots into one row per node group, sorted by name."""
    groups: dict[str, list[NodeSlots]] = defaultdict(list)
    for slot in slots:
        groups[slot.node_group].append(slot)
    return [_one_group(members, shapes) for _, members in sorted(groups.items())]


def _one_group(members: list[NodeSlots], shapes: Sequence[int]) -> GroupFragmentation:
    """1. Count each node once. 2. Sum equivalents. 3. Block numbers over whole GPUs. 4. Per-unit rows."""
    nodes = {m.node: m for m in members}
    models: Counter[str] = Counter()
    for m in nodes.values():
        models[m.gpu_model] += m.physical_gpus
    whole = sorted((m.free for m in members if m.whole and m.schedulable), reverse=True)
    per_unit = [m for m in members if m.node_gpus is None]
    per_gpu = [m.node_gpus for m in nodes.values() if m.node_gpus is not None]
    units: dict[tuple[str, str], list[NodeSlots]] = defaultdict(list)
    for m in members:
        units[(m.resource, m.unit)].append(m)
    return GroupFragmentation(
        node_group=members[0].node_group,
        gpu_model=models.most_common(1)[0][0] if models else "",
        nodes=len(nodes),
        physical_gpus=sum(m.physical_gpus for m in nodes.values()),
        allocatable_gpus=_round(sum(m.allocatable * m.share for m in per_unit) + sum(g.allocatable for g in per_gpu)),
        allocated_gpus=_round(sum(m.allocated * m.share for m in per_unit) + sum(g.allocated for g in per_gpu)),
        free_gpus=_round(sum(m.free * m.share for m in per_unit) + sum(g.free for g in per_gpu)),
        largest_free_block=largest_free_block(whole),
        placeable=placeable(whole, shapes),
        stranded_gpus=stranded(whole, shapes),
        zero_allocatable_nodes=tuple(sorted(n for n, m in nodes.items() if m.zero_allocatable)),
        unschedulable_nodes=tuple(
            sorted(n for n, m in nodes.items() if not m.zero_allocatable and not _node_schedulable(n, members))
        ),
        free_per_node=tuple(whole),
        units=tuple(_one_unit(key, slots, shapes) for key, slots in sorted(units.items())),
    )


def _node_schedulable(node: str, members: list[NodeSlots]) -> bool:
    return any(m.schedulable for m in members if m.node == node)


def _one_unit(key: tuple[str, str], slots: list[NodeSlots], shapes: Sequence[int]) -> UnitFragmentation:
    free = [m.free for m in slots if m.schedulable]
    return UnitFragmentation(
        resource=key[0],
        unit=key[1],
        nodes=len({m.node for m in slots}),
        allocatable=sum(m.allocatable for m in slots),
        allocated=sum(m.allocated for m in slots),
        free=sum(free),
        largest_free_block=largest_free_block(free),
        placeable=placeable(free, shapes),
        stranded=stranded(free, shapes),
    )


def _round(value: float) -> float:
    """Equivalents are sums of sevenths and quarters: round off float noise."""
    return round(value, 9)


def cluster_fragmentation(
    nodes: Iterable[NodeInfo], pods: Iterable[PodInfo], group_labels: Sequence[str],
    accelerators: Accelerators | None = None,
) -> list[GroupFragmentation]:
    """Nodes and pods as collected → one fragmentation row per node group."""
    return group_fragmentation(node_slots(nodes, pods, group_labels, accelerators))
