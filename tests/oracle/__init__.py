"""Ground truth computed by brute force from the scenario model (independent of product code), for the tests.

Follows /work/shared/spec/ledger.md:

* held interval of a pod: [status.startTime, finish | deletion); never-bound pods hold nothing;
* effective request = max(sum of app containers + sidecars, max of init containers) — in the model
  each requested unit is a ``Unit`` with its share (whole 1, MIG N/7, time-sliced 1/R);
* a unit is *measured* when some DCGM series carries the pod identity for it (not on an entity
  whose series lost their pod labels, not a GPU only an init container used); under the
  ``gpu_util`` signal MIG instances have no series and are unmeasured;
* working = allocated x time-average of the signal over the held part of the hour
  (``gpu_util`` = DCGM_FI_DEV_GPU_UTIL / 100; time-sliced tenants get the device value);
* a GPU whose series vanished (a ``vanish`` health event) carries no series meanwhile: its units are
  measured by the samples that exist (the time-average over the present part of the held interval), and
  unmeasured for an hour in which none exists;
* team = pod label ``team`` > namespace label ``team`` > ``unassigned``;
* workload (``expected_workload``) = the pod's top controller ``Kind/name`` (ledger.md "Workloads");
* capacity = physical GPUs x hours the node existed; unavailable = capacity hours while the node
  is cordoned / NotReady / advertises zero allocatable GPUs.

Findings (``expected_findings``) are defined in that function's docstring.

Fragmentation definitions (per node group at an instant):
  nodes, physical_gpus: GPU nodes of the group and their physical GPUs;
  allocatable_gpus: physical-GPU equivalents of allocatable NVIDIA resources (whole 1, MIG N/7,
      time-sliced replica 1/R), all nodes;
  allocated_gpus: sum of shares held by running pods;
  free_gpus: allocatable - allocated over *schedulable* nodes (not cordoned, Ready);
  largest_free_block, placeable[k], stranded_gpus[k]: over schedulable nodes, counting only free
      whole ``nvidia.com/gpu`` devices of non-shared nodes (MIG instances and time-sliced replicas
      are not whole GPUs): largest = max free per node, placeable[k] = sum floor(free/k),
      stranded[k] = sum (free mod k);
  zero_allocatable_nodes: nodes advertising zero allocatable NVIDIA resources.
"""

from .capacity import SHAPES, expected_fragmentation, expected_pending
from .findings import (
    FINDING_KINDS,
    HARDWARE_XIDS,
    IDLE_HELD_FB_MIB,
    IDLE_MIN_HOURS,
    IDLE_THRESHOLD,
    STRAGGLER_FRACTION,
    STRAGGLER_MIN_HOURS,
    THROTTLE_BITS,
    THROTTLE_REASONS,
    UNATTRIBUTED_THRESHOLD,
    UNHEALTHY_REASONS,
    expected_findings,
)
from .ledger import (
    KUBEFLOW_KINDS,
    OPERATOR_LABELS,
    POOL_LABELS,
    SIGNALS,
    Ledger,
    _SignalCache,
    expected_ledger,
    expected_usage_by_workload,
    expected_workload,
    gpu_model,
    node_group,
    pod_team,
)
from .queues import expected_queues

__all__ = [
    "FINDING_KINDS", "HARDWARE_XIDS", "IDLE_HELD_FB_MIB", "IDLE_MIN_HOURS", "IDLE_THRESHOLD", "KUBEFLOW_KINDS",
    "OPERATOR_LABELS", "POOL_LABELS", "SHAPES", "SIGNALS", "STRAGGLER_FRACTION", "STRAGGLER_MIN_HOURS",
    "THROTTLE_BITS", "THROTTLE_REASONS", "UNATTRIBUTED_THRESHOLD", "UNHEALTHY_REASONS", "Ledger", "_SignalCache",
    "expected_findings", "expected_fragmentation", "expected_ledger", "expected_pending", "expected_queues",
    "expected_usage_by_workload", "expected_workload", "gpu_model", "node_group", "pod_team",
]
