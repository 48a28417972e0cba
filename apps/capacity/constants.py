"""Fixed names and defaults of the capacity app."""

from __future__ import annotations

from django.db import models

# Pod shapes (GPUs per pod) that `placeable` and `stranded_gpus` are reported for.
SHAPES: tuple[int, ...] = (1, 2, 4, 8)

# Full collection resolution is kept this long; older history keeps one snapshot per hour.
FULL_RESOLUTION_DAYS = 7

NVIDIA_GPU = "nvidia.com/gpu"
NVIDIA_GPU_SHARED = "nvidia.com/gpu.shared"
NVIDIA_MIG_PREFIX = "nvidia.com/mig-"

# GPU Feature Discovery labels (reference: telemetry-and-kueue.md §2.2).
LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_SHARING = "nvidia.com/gpu.sharing-strategy"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"

# Kueue marks on pods: the pod belongs to a Kueue workload and waits for it to be admitted.
KUEUE_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


# What one unit of a fragmentation row counts: a whole GPU, a time-sliced/MPS replica, or one MIG
# instance of a profile ("mig-" + profile, e.g. "mig-1g.10gb").
UNIT_GPU = "gpu"
UNIT_REPLICA = "replica"
UNIT_MIG_PREFIX = "mig-"


class PendingReason(models.TextChoices):
    """Why GPU work waits (docs/fragmentation.md, "Pending work")."""

    QUOTA = "quota", "Kueue has not reserved quota"
    FRAGMENTATION = "fragmentation", "enough free GPUs in the node group, but no node with enough for one pod"
    CAPACITY = "capacity", "not enough free GPUs"
    OTHER = "other", "GPUs are free; something else blocks"


class PendingKind(models.TextChoices):
    POD = "pod"
    WORKLOAD = "workload"
