"""The GPU rules: the one home of how gpufinops reads NVIDIA GPUs off Kubernetes, however they are handed
out (ledger.md "Capacity", "Node groups", "Allocation", "GPUs handed out by claims (DRA) and by fractions
(HAMi)").

The ledger, fragmentation, queues, findings, the collectors and every view call this package; none of them
derives a GPU count, a share, a GPU model or a node group on its own, so two screens cannot give two answers
for one node. Everything here is pure (no queries, no settings, no I/O): settings come in as parameters.

* `vocabulary`: what all of them share: node sharing modes, unit kinds, allocation modes
  (`AllocationMode`, `unit_mode`, `pod_mode`), MIG compute slices, the GPU model's name form.
* `device_plugin`: GPUs handed out by the NVIDIA device plugin (whole, time-sliced/MPS, MIG), from GPU
  Feature Discovery labels and node capacity; `GpuNode`, what every node's GPUs are read as.
* `dra`: ResourceSlices: a DRA node's devices and physical GPUs, what a device is worth, free devices.
* `dra_claims`: ResourceClaims: the devices a claim holds, its consumers, the extended-resource rule, a
  shared claim's time split among its pods.
* `hami`: HAMi fractions: the node's registered GPUs, a pod's devices and shares, oversubscription.
* `intervals`: time within a bucket cut where holders change (shared claims and oversubscription).

The names of `vocabulary` and `device_plugin` are re-exported here, so `from apps.inventory import gpus;
gpus.classify_node(...)` keeps working; the DRA and HAMi rules are used through their modules
(`from apps.inventory.gpus import dra, dra_claims, hami`).
"""

from apps.inventory.gpus.device_plugin import (
    GPU_NODE_LABELS,
    LABEL_COUNT,
    LABEL_MEMORY,
    LABEL_MIG_STRATEGY,
    LABEL_PRODUCT,
    LABEL_REPLICAS,
    LABEL_SHARING,
    NVIDIA_GPU,
    NVIDIA_GPU_SHARED,
    NVIDIA_MIG_PREFIX,
    NVIDIA_PREFIX,
    UNKNOWN_NODE,
    ContainerLike,
    GpuNode,
    classify_node,
    device_request,
    effective_request,
    gpu_model,
    is_device_resource,
    is_gpu_node,
    is_nvidia_resource,
    is_zero_allocatable,
    mig_profile,
    node_group,
    to_count,
)
from apps.inventory.gpus.vocabulary import (
    DEFAULT_COMPUTE_SLICES,
    DRA_CLAIMS,
    HAMI_FRACTIONS,
    MIG_MIXED,
    MIG_SINGLE,
    MPS,
    NOT_DEVICE_PLUGIN,
    REPLICATED,
    TIME_SLICING,
    UNIT_FRACTION,
    UNIT_GPU,
    UNIT_MIG_PREFIX,
    UNIT_REPLICA,
    WHOLE,
    AllocationMode,
    compute_slices,
    mig_unit,
    model_from_product_name,
    pod_mode,
    profile_slices,
    unit_mode,
)

__all__ = [
    "DEFAULT_COMPUTE_SLICES",
    "DRA_CLAIMS",
    "GPU_NODE_LABELS",
    "HAMI_FRACTIONS",
    "LABEL_COUNT",
    "LABEL_MEMORY",
    "LABEL_MIG_STRATEGY",
    "LABEL_PRODUCT",
    "LABEL_REPLICAS",
    "LABEL_SHARING",
    "MIG_MIXED",
    "MIG_SINGLE",
    "MPS",
    "NOT_DEVICE_PLUGIN",
    "NVIDIA_GPU",
    "NVIDIA_GPU_SHARED",
    "NVIDIA_MIG_PREFIX",
    "NVIDIA_PREFIX",
    "REPLICATED",
    "TIME_SLICING",
    "UNIT_FRACTION",
    "UNIT_GPU",
    "UNIT_MIG_PREFIX",
    "UNIT_REPLICA",
    "UNKNOWN_NODE",
    "WHOLE",
    "AllocationMode",
    "ContainerLike",
    "GpuNode",
    "classify_node",
    "compute_slices",
    "device_request",
    "effective_request",
    "gpu_model",
    "is_device_resource",
    "is_gpu_node",
    "is_nvidia_resource",
    "is_zero_allocatable",
    "mig_profile",
    "mig_unit",
    "model_from_product_name",
    "node_group",
    "pod_mode",
    "profile_slices",
    "to_count",
    "unit_mode",
]
