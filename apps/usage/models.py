"""The hourly GPU-hour ledger (../shared/spec/ledger.md) and the rollups every reader uses.

Each bucket (cluster, hour) is written whole in one transaction: the pod and node rows and the
rollups derived from them are deleted and re-inserted together, so re-collecting converges.
"""

from __future__ import annotations

from django.db import models

from apps.inventory.models import Cluster


class SignalColumns(models.Model):
    """Working, idle and unmeasured GPU-hours under each activity signal, plus money."""

    allocated_gpu_hours = models.FloatField(default=0.0)
    working_sm_active = models.FloatField(default=0.0)
    idle_sm_active = models.FloatField(default=0.0)
    unmeasured_sm_active = models.FloatField(default=0.0)
    working_gr_engine_active = models.FloatField(default=0.0)
    idle_gr_engine_active = models.FloatField(default=0.0)
    unmeasured_gr_engine_active = models.FloatField(default=0.0)
    working_tensor_active = models.FloatField(default=0.0)
    idle_tensor_active = models.FloatField(default=0.0)
    unmeasured_tensor_active = models.FloatField(default=0.0)
    working_gpu_util = models.FloatField(default=0.0)
    idle_gpu_util = models.FloatField(default=0.0)
    unmeasured_gpu_util = models.FloatField(default=0.0)
    # cost = allocated x price; idle cost per signal = idle_<signal> x price (kept per signal).
    cost = models.FloatField(default=0.0)
    idle_cost_sm_active = models.FloatField(default=0.0)
    idle_cost_gr_engine_active = models.FloatField(default=0.0)
    idle_cost_tensor_active = models.FloatField(default=0.0)
    idle_cost_gpu_util = models.FloatField(default=0.0)

    class Meta:
        abstract = True


class Bucket(models.Model):
    """State of one (cluster, hour) bucket: what recovery and the API's `provisional` flag read."""

    class State(models.TextChoices):
        PROVISIONAL = "provisional"
        FINAL = "final"

    class Status(models.TextChoices):
        PENDING = "pending"
        OK = "ok"
        FAILED = "failed"
        SOURCE_MISSING = "source_missing"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="buckets")
    hour = models.DateTimeField()
    state = models.CharField(max_length=12, choices=State.choices, default=State.PROVISIONAL)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    inconsistent = models.BooleanField(default=False)
    warnings = models.JSONField(default=list, blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    collected_at = models.DateTimeField(null=True, blank=True)
    covered_until = models.DateTimeField(null=True, blank=True)
    pod_rows = models.PositiveIntegerField(default=0)
    node_rows = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["cluster", "hour"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hour"], name="uniq_bucket")]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.cluster_id}@{self.hour:%Y-%m-%dT%H} {self.state}/{self.status}"


class PodHour(SignalColumns):
    """Ledger row: one pod's GPU-hours in one bucket."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE)
    hour = models.DateTimeField()
    namespace = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    pod_uid = models.CharField(max_length=64)
    team = models.CharField(max_length=100)
    node = models.CharField(max_length=253)
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200)
    cluster_queue = models.CharField(max_length=253, blank=True)
    local_queue = models.CharField(max_length=253, blank=True)
    resources = models.CharField(max_length=500)  # e.g. "nvidia.com/gpu=4" (effective request)
    gpus = models.FloatField()  # physical-GPU equivalents held (sum of shares)
    held_seconds = models.FloatField()
    price = models.FloatField(null=True)  # USD per physical GPU-hour at write time; null: no price

    class Meta:
        indexes = [
            models.Index(fields=["cluster", "hour"]),
            models.Index(fields=["team", "hour"]),
        ]


class NodeHour(models.Model):
    """Ledger row: one node's capacity in one bucket."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE)
    hour = models.DateTimeField()
    node = models.CharField(max_length=253)
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200)
    physical_gpus = models.IntegerField()
    capacity_gpu_hours = models.FloatField()
    allocated_gpu_hours = models.FloatField()
    unallocated_gpu_hours = models.FloatField()
    unavailable_gpu_hours = models.FloatField()
    unallocated_cost = models.FloatField(default=0.0)
    price = models.FloatField(null=True)
    inconsistent = models.BooleanField(default=False)

    class Meta:
        indexes = [models.Index(fields=["cluster", "hour"])]


class UsageHour(SignalColumns):
    """Rollup of PodHour by (cluster, hour, team, namespace, node group, GPU model)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE)
    hour = models.DateTimeField()
    team = models.CharField(max_length=100)
    namespace = models.CharField(max_length=253)
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200)

    class Meta:
        indexes = [models.Index(fields=["hour", "cluster"]), models.Index(fields=["team", "hour"])]


class UsageDay(SignalColumns):
    """Rollup of UsageHour by UTC day."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE)
    day = models.DateField()
    team = models.CharField(max_length=100)
    namespace = models.CharField(max_length=253)
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200)

    class Meta:
        indexes = [models.Index(fields=["day", "cluster"]), models.Index(fields=["team", "day"])]


class CapacityHour(models.Model):
    """Rollup of NodeHour by (cluster, hour, node group, GPU model)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE)
    hour = models.DateTimeField()
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200)
    capacity_gpu_hours = models.FloatField()
    allocated_gpu_hours = models.FloatField()
    unallocated_gpu_hours = models.FloatField()
    unavailable_gpu_hours = models.FloatField()
    unallocated_cost = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["hour", "cluster"])]


class CapacityDay(models.Model):
    """Rollup of CapacityHour by UTC day."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE)
    day = models.DateField()
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200)
    capacity_gpu_hours = models.FloatField()
    allocated_gpu_hours = models.FloatField()
    unallocated_gpu_hours = models.FloatField()
    unavailable_gpu_hours = models.FloatField()
    unallocated_cost = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["day", "cluster"])]


class PodObservation(models.Model):
    """A GPU pod as the Kubernetes API last showed it: the allocation interval source.

    For hours the collector missed, kube-state-metrics history in Prometheus fills in.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE)
    uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    node = models.CharField(max_length=253, blank=True)
    phase = models.CharField(max_length=20, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    requests = models.JSONField(default=dict, blank=True)  # effective request per NVIDIA resource
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)  # terminated, or last seen when it vanished
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    gone = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "uid"], name="uniq_podobs")]
        indexes = [models.Index(fields=["cluster", "started"])]
