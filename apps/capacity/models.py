"""Capacity snapshots: fragmentation per node group and diagnosed pending GPU work, per collection.

Every row hangs off one `CapacityCollection` (cluster, taken_at). Re-recording a collection
replaces its rows, and pruning a collection deletes them with it (docs/fragmentation.md).
"""

from __future__ import annotations

from django.db import models

from apps.capacity.constants import PendingKind, PendingReason


class CapacityCollection(models.Model):
    """One read of a cluster's GPU nodes and pods: the time all capacity rows are taken at."""

    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="capacity_collections")
    taken_at = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "taken_at"]
        constraints = [models.UniqueConstraint(fields=["cluster", "taken_at"], name="uniq_capacity_collection")]

    def __str__(self) -> str:
        return f"{self.cluster_id}@{self.taken_at.isoformat()}"


class NodeGroupSnapshot(models.Model):
    """Fragmentation of one node group at one collection (docs/fragmentation.md).

    GPU amounts are physical-GPU equivalents; the block numbers count whole GPUs; `units` repeats
    the numbers per device resource in its own unit (MIG instances of a profile, replicas).
    """

    collection = models.ForeignKey(CapacityCollection, on_delete=models.CASCADE, related_name="node_groups")
    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="+")
    taken_at = models.DateTimeField()
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200, blank=True)
    nodes = models.PositiveIntegerField()
    physical_gpus = models.PositiveIntegerField()
    allocatable_gpus = models.FloatField()
    allocated_gpus = models.FloatField()
    free_gpus = models.FloatField()
    largest_free_block = models.PositiveIntegerField()
    placeable = models.JSONField(default=dict)  # {"1": n, "2": n, "4": n, "8": n}
    stranded_gpus = models.JSONField(default=dict)  # same keys
    zero_allocatable_nodes = models.JSONField(default=list)  # node names
    unschedulable_nodes = models.JSONField(default=list)  # NotReady or cordoned, named
    free_per_node = models.JSONField(default=list)  # free whole GPUs of each schedulable node, largest first
    units = models.JSONField(default=list)  # [{resource, unit, nodes, allocatable, allocated, free, ...}]

    class Meta:
        ordering = ["cluster", "taken_at", "node_group"]
        constraints = [models.UniqueConstraint(fields=["collection", "node_group"], name="uniq_nodegroup_snapshot")]
        indexes = [models.Index(fields=["cluster", "taken_at"])]

    def __str__(self) -> str:
        return f"{self.node_group}@{self.taken_at.isoformat()}"


class PendingWork(models.Model):
    """A pending pod or Kueue workload that needs GPUs, with the reason it waits."""

    collection = models.ForeignKey(CapacityCollection, on_delete=models.CASCADE, related_name="pending")
    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="+")
    taken_at = models.DateTimeField()
    kind = models.CharField(max_length=10, choices=PendingKind.choices)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    team = models.CharField(max_length=100)
    reason = models.CharField(max_length=16, choices=PendingReason.choices)
    resource = models.CharField(max_length=100)
    per_pod = models.PositiveIntegerField()  # units of `resource` one pod asks for
    # Physical-GPU equivalent of one unit where the work waits, by the GPU rules (MIG N/7, or N/4 on A30; a
    # time-sliced replica 1/R): decided at the collection, when the nodes offering the resource are known.
    share = models.FloatField(default=1.0)
    pods = models.PositiveIntegerField(default=1)
    node_group = models.CharField(max_length=253, blank=True)
    cluster_queue = models.CharField(max_length=253, blank=True)
    local_queue = models.CharField(max_length=253, blank=True)
    waiting_since = models.DateTimeField(null=True, blank=True)  # creation time
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["cluster", "taken_at", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["collection", "kind", "namespace", "name"], name="uniq_pending_work")
        ]
        indexes = [models.Index(fields=["cluster", "taken_at"]), models.Index(fields=["team", "taken_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}: {self.reason}"

    @property
    def units(self) -> int:
        """Units of `resource` the whole item waits for."""
        return self.per_pod * self.pods


class PendingReasonCount(models.Model):
    """Pending GPU work per team and reason at one collection: the counts kept over time."""

    collection = models.ForeignKey(CapacityCollection, on_delete=models.CASCADE, related_name="reason_counts")
    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="+")
    taken_at = models.DateTimeField()
    team = models.CharField(max_length=100)
    reason = models.CharField(max_length=16, choices=PendingReason.choices)
    items = models.PositiveIntegerField()  # pods and workloads
    pods = models.PositiveIntegerField()
    units = models.PositiveIntegerField()  # requested units, summed over resources

    class Meta:
        ordering = ["cluster", "taken_at", "team", "reason"]
        constraints = [
            models.UniqueConstraint(fields=["collection", "team", "reason"], name="uniq_pending_reason_count")
        ]
        indexes = [models.Index(fields=["cluster", "taken_at"])]

    def __str__(self) -> str:
        return f"{self.team}/{self.reason}@{self.taken_at.isoformat()}: {self.items}"
