"""Ground truth computed by brute force from the scenario model (independent of product code), for the tests.

Follows the ledger's definitions (docs/numbers.md):

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
  is cordoned / NotReady / advertises zero allocatable GPUs (a DRA or HAMi node never does);
* GPUs handed out by DRA claims and HAMi fractions (``accelerators``, whose docstring has the rules): a DRA
  unit's allocated GPU-hours are its share of the device split among the claim's running consumers at each
  instant, measured by the series carrying the pod's identity and the device's UUID (MIG: its instance), so
  unmeasured where the exporter lacks DRA attribution; a claim allocated with no running consumer is a row of
  its own (``Ledger.claim_hours``: idle, workload ``ResourceClaim/<name>``, the claim's namespace, team and
  node; ``Ledger.rows`` = pod rows + claim rows); a HAMi tenant's allocated GPU-hours are its share (scaled
  while its GPU is oversubscribed), measured by the GPU's series (no pod on them): working = allocated x the
  GPU's time-average over the held part of the hour; each pod row names its ``allocation_mode``
  (``device_plugin``, ``time_slice``, ``mig``, ``dra``, ``hami``); a pod holding nothing (an admin-access
  claim only) has no row.

Findings (``expected_findings``) are defined in that function's docstring.

Fragmentation definitions (per node group at an instant):
  nodes, physical_gpus: GPU nodes of the group and their physical GPUs;
  allocatable_gpus: physical-GPU equivalents of allocatable NVIDIA resources (whole 1, MIG N/7,
      time-sliced replica 1/R), all nodes; on DRA and HAMi nodes of the published or registered devices
      (``accelerators.dra_figures`` / ``hami_figures``);
  allocated_gpus: sum of shares held by running pods; on a DRA node the shares of the devices allocated claims
      hold (shared or unconsumed: once), on a HAMi node min(1, sum of its tenants' shares) per GPU;
  free_gpus: allocatable - allocated over *schedulable* nodes (not cordoned, Ready); on a DRA node the published
      devices no claim holds (a GPU with a MIG device held offers only its unheld MIG devices);
  largest_free_block, placeable[k], stranded_gpus[k]: over schedulable nodes, counting only free
      whole ``nvidia.com/gpu`` devices of non-shared nodes (MIG instances and time-sliced replicas
      are not whole GPUs), on a DRA node whole devices neither held nor with a MIG device held, on a HAMi
      node GPUs without tenant: largest = max free per node, placeable[k] = sum floor(free/k),
      stranded[k] = sum (free mod k);
  zero_allocatable_nodes: nodes advertising zero allocatable NVIDIA resources (never a DRA or HAMi node).
"""

from .accelerators import MODES, allocation_mode
from .capacity import SHAPES, expected_fragmentation, expected_pending
from .findings import expected_findings
from .flagging import (
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
    "MODES", "OPERATOR_LABELS", "POOL_LABELS", "SHAPES", "SIGNALS", "STRAGGLER_FRACTION", "STRAGGLER_MIN_HOURS",
    "THROTTLE_BITS", "THROTTLE_REASONS", "UNATTRIBUTED_THRESHOLD", "UNHEALTHY_REASONS", "Ledger", "_SignalCache",
    "allocation_mode", "expected_findings", "expected_fragmentation", "expected_ledger", "expected_pending",
    "expected_queues", "expected_usage_by_workload", "expected_workload", "gpu_model", "node_group", "pod_team",
]
