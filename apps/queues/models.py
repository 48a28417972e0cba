"""Kueue snapshots per collection (quota held) and workloads (admission waits).

Queue rows hang off one `QueueCollection` (cluster, taken_at): re-recording a collection replaces
them, pruning deletes them with it. Workloads are kept one row per workload (by uid), updated at
each collection, because their creation and admission times do not change between snapshots.
"""

from __future__ import annotations

from django.db import models


class QueueCollection(models.Model):
    """One read of a cluster's Kueue objects; `api_version` is empty when the cluster has no Kueue."""

    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="queue_collections")
    taken_at = models.DateTimeField()
    api_version = models.CharField(max_length=20, blank=True)

    class Meta:
        ordering = ["cluster", "taken_at"]
        constraints = [models.UniqueConstraint(fields=["cluster", "taken_at"], name="uniq_queue_collection")]

    def __str__(self) -> str:
        return f"{self.cluster_id}@{self.taken_at.isoformat()} ({self.api_version or 'no Kueue'})"


class ClusterQueueSnapshot(models.Model):
    """A Kueue ClusterQueue at one collection: cohort and workload counts."""

    collection = models.ForeignKey(QueueCollection, on_delete=models.CASCADE, related_name="cluster_queues")
    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="+")
    taken_at = models.DateTimeField()
    name = models.CharField(max_length=253)
    cohort = models.CharField(max_length=253, blank=True)
    pending_workloads = models.PositiveIntegerField(default=0)
    reserving_workloads = models.PositiveIntegerField(default=0)
    admitted_workloads = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["cluster", "taken_at", "name"]
        constraints = [models.UniqueConstraint(fields=["collection", "name"], name="uniq_cq_snapshot")]
        indexes = [models.Index(fields=["cluster", "taken_at"])]

    def __str__(self) -> str:
        return f"{self.name}@{self.taken_at.isoformat()}"


class QuotaSnapshot(models.Model):
    """One flavor and resource of a ClusterQueue at one collection, in the resource's base unit.

    `nominal_quota`, `borrowing_limit`, `lending_limit` come from the spec (None limit: unlimited);
    `reserved` is status.flavorsReservation total, `used` status.flavorsUsage total, `borrowed`
    the reservation above nominal. Memory is in bytes, CPU in cores, GPUs in devices.
    """

    cluster_queue = models.ForeignKey(ClusterQueueSnapshot, on_delete=models.CASCADE, related_name="quotas")
    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="+")
    taken_at = models.DateTimeField()
    flavor = models.CharField(max_length=253)
    resource = models.CharField(max_length=253)
    nominal_quota = models.FloatField(default=0.0)
    borrowing_limit = models.FloatField(null=True, blank=True)
    lending_limit = models.FloatField(null=True, blank=True)
    reserved = models.FloatField(default=0.0)
    used = models.FloatField(default=0.0)
    borrowed = models.FloatField(default=0.0)

    class Meta:
        ordering = ["cluster", "taken_at", "cluster_queue", "flavor", "resource"]
        constraints = [
            models.UniqueConstraint(fields=["cluster_queue", "flavor", "resource"], name="uniq_quota_snapshot")
        ]
        indexes = [models.Index(fields=["cluster", "taken_at"])]

    def __str__(self) -> str:
        return f"{self.cluster_queue_id} {self.flavor}/{self.resource}"


class LocalQueueSnapshot(models.Model):
    """A Kueue LocalQueue at one collection, with its namespace's team (for access and GPU-hours)."""

    collection = models.ForeignKey(QueueCollection, on_delete=models.CASCADE, related_name="local_queues")
    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="+")
    taken_at = models.DateTimeField()
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    cluster_queue = models.CharField(max_length=253)
    team = models.CharField(max_length=100)
    pending_workloads = models.PositiveIntegerField(default=0)
    reserving_workloads = models.PositiveIntegerField(default=0)
    admitted_workloads = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["cluster", "taken_at", "namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["collection", "namespace", "name"], name="uniq_lq_snapshot")]
        indexes = [models.Index(fields=["cluster", "taken_at"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} -> {self.cluster_queue}"


class Workload(models.Model):
    """A Kueue workload as last seen: when it was created, got quota, was admitted, finished."""

    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="workloads")
    uid = models.CharField(max_length=253)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    team = models.CharField(max_length=100)
    local_queue = models.CharField(max_length=253, blank=True)
    cluster_queue = models.CharField(max_length=253, blank=True)
    pods = models.PositiveIntegerField(default=0)
    gpus = models.PositiveIntegerField(default=0)  # device units over all pods
    created = models.DateTimeField(null=True, blank=True)
    quota_reserved_at = models.DateTimeField(null=True, blank=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "uid"], name="uniq_workload")]
        indexes = [models.Index(fields=["cluster", "admitted_at"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def admission_wait_seconds(self) -> float | None:
        """Creation to admission, in seconds; None until admitted."""
        if self.created is None or self.admitted_at is None:
            return None
        return max(0.0, (self.admitted_at - self.created).total_seconds())
