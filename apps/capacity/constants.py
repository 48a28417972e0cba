"""Fixed names and defaults of the capacity app."""

from __future__ import annotations

from django.db import models

# Pod shapes (GPUs per pod) that `placeable` and `stranded_gpus` are reported for.
SHAPES: tuple[int, ...] = (1, 2, 4, 8)


class PendingReason(models.TextChoices):
    """Why GPU work waits (docs/fragmentation.md, "Pending work")."""

    QUOTA = "quota", "Kueue has not reserved quota"
    FRAGMENTATION = "fragmentation", "enough free GPUs in the node group, but no node with enough for one pod"
    CAPACITY = "capacity", "not enough free GPUs"
    OTHER = "other", "GPUs are free; something else blocks"


class PendingKind(models.TextChoices):
    POD = "pod"
    WORKLOAD = "workload"
