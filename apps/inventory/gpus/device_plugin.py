"""GPUs handed out by the NVIDIA device plugin: how gpufinops reads them off Kubernetes nodes and pods
(ledger.md "Capacity", "Node groups", "Allocation"). Part of the one home of the GPU rules
(`apps.inventory.gpus`, which re-exports these names); pure (no queries, no I/O).

`GpuNode` is also what the DRA and HAMi rules (`dra.py`, `hami.py`) make of their nodes (sharing
`DRA_CLAIMS` / `HAMI_FRACTIONS`), so capacity and the ledger read every node through one type; on those
nodes no device-plugin resource is a unit (`GpuNode.unit_share` is None): their pods' GPUs come from claims
and from HAMi's annotation.

Traps of real GPU Feature Discovery labels (restated, with their sources, in tests/fixtures/gfd_labels.py):

* MIG *single* strategy: `nvidia.com/gpu.count` counts MIG devices and the product carries a
  `-MIG-<profile>` suffix. Physical GPUs = devices / instances per GPU of that profile.
* Time-slicing with `renameByDefault: false`: the product carries a `-SHARED` suffix. The GPU model (and
  so the price key) is the product without it.
* A MIG *mixed* node may list `nvidia.com/gpu: 0` beside its MIG resources: not zero-allocatable.
* `mig.strategy=single` with `mig.config=all-disabled` is a plain whole-GPU node (no suffix).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from apps.inventory.gpus.vocabulary import (
    DEFAULT_COMPUTE_SLICES,
    HAMI_FRACTIONS,
    MIG_MIXED,
    MIG_SINGLE,
    MPS,
    NOT_DEVICE_PLUGIN,
    REPLICATED,
    TIME_SLICING,
    UNIT_FRACTION,
    UNIT_GPU,
    UNIT_REPLICA,
    WHOLE,
    compute_slices,
    mig_unit,
    profile_slices,
)

# ---- Names Kubernetes and GPU Feature Discovery use ----

NVIDIA_PREFIX = "nvidia.com/"
NVIDIA_GPU = "nvidia.com/gpu"
NVIDIA_GPU_SHARED = "nvidia.com/gpu.shared"
NVIDIA_MIG_PREFIX = "nvidia.com/mig-"

LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_MEMORY = "nvidia.com/gpu.memory"
LABEL_SHARING = "nvidia.com/gpu.sharing-strategy"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
# The node labels these rules read: what kube-state-metrics history must carry to rebuild a node.
GPU_NODE_LABELS: tuple[str, ...] = (
    LABEL_PRODUCT, LABEL_COUNT, LABEL_REPLICAS, LABEL_MEMORY, LABEL_SHARING, LABEL_MIG_STRATEGY,
)

_MIG_SUFFIX = re.compile(r"-MIG-(\d+g\.[0-9a-z.+]+)$", re.IGNORECASE)
_SHARED_SUFFIX = "-SHARED"


# ---- Quantities and names ----


def to_count(value: object) -> int:
    """An extended-resource quantity or a count label as a whole number; junk, NaN and negatives count 0."""
    try:
        number = float(str(value))
    except (TypeError, ValueError):
        return 0
    if not math.isfinite(number) or number < 0:
        return 0
    return int(number)


def is_nvidia_resource(resource: str) -> bool:
    """Any `nvidia.com/...` resource: what the collectors keep (unknown ones are reported, never counted)."""
    return resource.startswith(NVIDIA_PREFIX)


def is_device_resource(resource: str) -> bool:
    """NVIDIA resources that are devices a pod holds: whole or shared GPUs and MIG instances."""
    return resource in (NVIDIA_GPU, NVIDIA_GPU_SHARED) or resource.startswith(NVIDIA_MIG_PREFIX)


def mig_profile(resource: str) -> str | None:
    """`nvidia.com/mig-1g.10gb` -> `1g.10gb`; None for anything else."""
    return resource.removeprefix(NVIDIA_MIG_PREFIX) if resource.startswith(NVIDIA_MIG_PREFIX) else None


def gpu_model(product: str) -> str:
    """The GPU model (and price key) of a GFD product label: without `-SHARED` and `-MIG-<profile>`."""
    return _MIG_SUFFIX.sub("", product.removesuffix(_SHARED_SUFFIX))


def node_group(labels: Mapping[str, str], model: str, group_labels: Sequence[str]) -> str:
    """The first node-pool label present among `group_labels` (a setting), else the GPU model."""
    for key in group_labels:
        if labels.get(key):
            return labels[key]
    return model or "unknown"


def is_gpu_node(labels: Mapping[str, str], resources: Mapping[str, object]) -> bool:
    """A node with NVIDIA GPUs: GFD's count or product label, or NVIDIA resources in its capacity."""
    return LABEL_COUNT in labels or LABEL_PRODUCT in labels or any(is_nvidia_resource(r) for r in resources)


def is_zero_allocatable(allocatable: Mapping[str, object], sharing: str = WHOLE) -> bool:
    """No device resource is allocatable (device plugin not registered). A MIG mixed node's
    `nvidia.com/gpu: 0` beside allocatable MIG instances is not zero-allocatable, nor is a node whose GPUs
    DRA or HAMi hand out (`sharing` of its GpuNode): no device-plugin resource is expected there."""
    if sharing in NOT_DEVICE_PLUGIN:
        return False
    return sum(to_count(v) for r, v in allocatable.items() if is_device_resource(r)) == 0


# ---- One node ----


@dataclass(frozen=True)
class GpuNode:
    """What the rules make of one node's GPUs."""

    gpu_model: str
    physical_gpus: int
    sharing: str  # WHOLE | TIME_SLICING | MPS | MIG_MIXED | MIG_SINGLE | DRA_CLAIMS | HAMI_FRACTIONS
    compute_slices: int
    replicas: Mapping[str, float] = field(default_factory=dict)  # resource -> replicas per GPU (shared)
    mig_single_profile: str = ""  # the node's MIG profile under the single strategy
    mig_memory_fraction: Mapping[str, float] = field(default_factory=dict)  # MIG resource -> memory share

    @property
    def mig_single_slices(self) -> int:
        return profile_slices(self.mig_single_profile) or 0

    def instance_share(self, profile: str) -> float | None:
        """Share of one of this node's GPUs that a MIG instance of `profile` (`3g.40gb`, or a DCGM
        `GPU_I_PROFILE`) is, by compute slices; None when the profile names no slices."""
        slices = profile_slices(profile)
        return slices / self.compute_slices if slices else None

    def unit_share(self, resource: str, *, by_memory: bool = False) -> float | None:
        """Share of one physical GPU per unit of `resource` here (the ledger's table); None: not a GPU
        resource the ledger knows (reported, never counted), and every device-plugin resource on a DRA or
        HAMi node: there an `nvidia.com/gpu` request is a vGPU or an extended resource a claim serves."""
        if self.sharing in NOT_DEVICE_PLUGIN:
            return None
        profile = mig_profile(resource)
        if profile is not None:
            if by_memory and resource in self.mig_memory_fraction:
                return self.mig_memory_fraction[resource]
            return self.instance_share(profile)
        if resource not in (NVIDIA_GPU, NVIDIA_GPU_SHARED):
            return None
        if self.sharing == MIG_SINGLE and resource == NVIDIA_GPU:
            return self.mig_single_slices / self.compute_slices
        if resource == NVIDIA_GPU_SHARED or self.sharing in REPLICATED:
            return 1.0 / max(self.replicas.get(resource, 1.0), 1.0)
        return 1.0

    def unit_kind(self, resource: str) -> str:
        """What one unit of `resource` is on this node: UNIT_GPU, UNIT_REPLICA or `mig-<profile>` (on a
        HAMi node a vGPU, UNIT_FRACTION)."""
        if self.sharing == HAMI_FRACTIONS and resource in (NVIDIA_GPU, NVIDIA_GPU_SHARED):
            return UNIT_FRACTION
        profile = mig_profile(resource)
        if profile is not None:
            return mig_unit(profile)
        if self.sharing == MIG_SINGLE and resource == NVIDIA_GPU:
            return mig_unit(self.mig_single_profile)
        if resource == NVIDIA_GPU_SHARED or self.sharing in REPLICATED:
            return UNIT_REPLICA
        return UNIT_GPU


# A node the ledger has no facts about (a pod on a node that vanished unseen): whole GPUs, 7 MIG slices.
UNKNOWN_NODE = GpuNode("", 0, WHOLE, DEFAULT_COMPUTE_SLICES)


def classify_node(labels: Mapping[str, str], capacity: Mapping[str, object]) -> GpuNode:
    """Physical GPUs, sharing mode, replicas and MIG layout of a node from its GFD labels and capacity.

    Physical GPUs are `nvidia.com/gpu.count` when present (MIG devices mapped back to GPUs under the
    single strategy); otherwise derived from capacity: time-sliced replicas divided by replicas per GPU,
    MIG instances mapped back to parents by compute slices (rounded up: capacity is never undercounted).
    """
    product = labels.get(LABEL_PRODUCT, "")
    model = gpu_model(product)
    slices = compute_slices(model)
    units = {r: to_count(v) for r, v in capacity.items() if is_device_resource(r)}
    count = to_count(labels[LABEL_COUNT]) if str(labels.get(LABEL_COUNT, "")).strip() else None
    label_replicas = to_count(labels.get(LABEL_REPLICAS))
    single = _MIG_SUFFIX.search(product.removesuffix(_SHARED_SUFFIX))
    mig_units = {r: n for r, n in units.items() if r.startswith(NVIDIA_MIG_PREFIX) and n > 0}

    if single and labels.get(LABEL_MIG_STRATEGY) == "single":
        profile = single.group(1)
        per_gpu = max(1, slices // (profile_slices(profile) or 1))
        devices = count if count is not None else units.get(NVIDIA_GPU, 0)
        return GpuNode(model, math.ceil(devices / per_gpu), MIG_SINGLE, slices, mig_single_profile=profile)

    if mig_units:
        physical = count
        if physical is None:
            mig_slices = sum((profile_slices(mig_profile(r) or "") or 1) * n for r, n in mig_units.items())
            physical = units.get(NVIDIA_GPU, 0) + math.ceil(mig_slices / slices - 1e-9)
        return GpuNode(model, physical, MIG_MIXED, slices, mig_memory_fraction=_mig_memory(labels, mig_units))

    sharing_label = labels.get(LABEL_SHARING, "")
    shared = (
        sharing_label in REPLICATED
        or product.endswith(_SHARED_SUFFIX)
        or units.get(NVIDIA_GPU_SHARED, 0) > 0
        or label_replicas > 1
    )
    if not shared:
        physical = count if count is not None else units.get(NVIDIA_GPU, 0)
        return GpuNode(model, physical, WHOLE, slices)

    replicated_units = units.get(NVIDIA_GPU, 0) + units.get(NVIDIA_GPU_SHARED, 0)
    physical = count if count is not None else math.ceil(replicated_units / max(label_replicas, 1))
    replicas: dict[str, float] = {}
    for resource in (NVIDIA_GPU, NVIDIA_GPU_SHARED):
        if units.get(resource) and physical:
            replicas[resource] = units[resource] / physical
        elif label_replicas:
            replicas[resource] = float(label_replicas)
    return GpuNode(model, physical, MPS if sharing_label == MPS else TIME_SLICING, slices, replicas=replicas)


def _mig_memory(labels: Mapping[str, str], mig_units: Mapping[str, int]) -> dict[str, float]:
    """MIG resource -> its memory as a share of the GPU's (for the optional weighting by memory)."""
    total = to_count(labels.get(LABEL_MEMORY))
    if not total:
        return {}
    out = {}
    for resource in mig_units:
        memory = to_count(labels.get(f"{resource}.memory"))
        if memory:
            out[resource] = memory / total
    return out


# ---- Pods ----


class ContainerLike(Protocol):
    @property
    def kind(self) -> str: ...  # "app" | "init" | "sidecar" (a restartable init container)

    @property
    def resources(self) -> Mapping[str, float]: ...


def effective_request(containers: Iterable[ContainerLike]) -> dict[str, float]:
    """The scheduler's rule per resource: max(sum over app containers and sidecars, max over init
    containers). Zero requests are dropped; quantities are kept as given so bad ones can be reported."""
    summed: dict[str, float] = defaultdict(float)
    init_max: dict[str, float] = defaultdict(float)
    for container in containers:
        for resource, amount in container.resources.items():
            if container.kind == "init":
                init_max[resource] = max(init_max[resource], amount)
            else:
                summed[resource] += amount
    out = {r: max(summed.get(r, 0.0), init_max.get(r, 0.0)) for r in {*summed, *init_max}}
    return {r: v for r, v in sorted(out.items()) if v > 0}


def device_request(containers: Iterable[ContainerLike]) -> dict[str, int]:
    """The effective request of device resources only, in whole units: what fragmentation places."""
    return {r: math.ceil(v) for r, v in effective_request(containers).items() if is_device_resource(r)}
