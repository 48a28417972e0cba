"""The hourly GPU-hour ledger (docs/numbers.md) and the rollups every reader uses.

Each bucket (cluster, hour) is written whole in one transaction, under the cluster's lock: the pod and
node rows and the rollups derived from them are deleted and re-inserted together, so re-collecting
converges and concurrent writers of one day cannot double it. Every table has a unique key.

GPU-hours are floats summed with `math.fsum`; money is exact decimal (USD to the micro-dollar).
"""

from __future__ import annotations

from typing import Any

from django.db import models

from apps.inventory.models import Cluster


def Money(**kwargs) -> models.DecimalField:  # noqa: N802 (a field factory, read like a field class)
    """USD, exact to the micro-dollar: rows are quantized when written, so every sum of them is exact."""
    return models.DecimalField(max_digits=20, decimal_places=6, **kwargs)


def ClusterKey(**kwargs: Any) -> models.ForeignKey[Cluster, Cluster]:  # noqa: N802
    """The cluster a ledger row belongs to. No index of its own: each of these tables has a unique key that
    starts with the cluster, which serves every lookup by cluster (and the cascade when a cluster is deleted);
    another index would only be one more to update on every bucket written (bench/collect's write path)."""
    return models.ForeignKey(Cluster, on_delete=models.CASCADE, db_index=False, **kwargs)


def Price(**kwargs) -> models.DecimalField:  # noqa: N802
    """USD per physical GPU-hour, as the price card has it."""
    return models.DecimalField(max_digits=12, decimal_places=4, **kwargs)


class SignalColumns(models.Model):
    """Working, idle and unmeasured GPU-hours under each activity signal, plus money."""

    allocated_gpu_hours = models.FloatField(default=0.0)
    # Allocated hours on a GPU model without a price: counted, their cost unknown (never $0).
    unpriced_gpu_hours = models.FloatField(default=0.0)
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
    cost = Money(default=0)
    idle_cost_sm_active = Money(default=0)
    idle_cost_gr_engine_active = Money(default=0)
    idle_cost_tensor_active = Money(default=0)
    idle_cost_gpu_util = Money(default=0)

    class Meta:
        abstract = True


class CapacityColumns(models.Model):
    """A node's (or node group's) capacity split into allocated and unallocated GPU-hours, plus money.

    capacity_cost = allocated cost + unallocated_cost, exactly (the allocated cost is what the pods on the
    node are charged); unavailable hours are part of unallocated, shown apart.
    """

    capacity_gpu_hours = models.FloatField(default=0.0)
    allocated_gpu_hours = models.FloatField(default=0.0)
    unallocated_gpu_hours = models.FloatField(default=0.0)
    unavailable_gpu_hours = models.FloatField(default=0.0)
    unpriced_gpu_hours = models.FloatField(default=0.0)  # capacity hours of nodes without a price
    capacity_cost = Money(default=0)
    unallocated_cost = Money(default=0)

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
        FAILED = "failed"  # a source could not be read; retried with capped backoff
        SOURCE_MISSING = "source_missing"  # written with no DCGM data at all (all unmeasured); retried
        DEGRADED_SOURCE = "degraded_source"  # the sources answered with less than stored: stored rows kept
        ABANDONED = "abandoned"  # kept failing past GPUFINOPS_ABANDON_AFTER_DAYS: no longer retried

    cluster = ClusterKey(related_name="buckets")
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
    # What the written rows were measured with: DCGM series carrying a pod identity, the signals they had,
    # and the attribution coverage per signal. A re-collection that would bring less is refused.
    series = models.PositiveIntegerField(default=0)
    signals = models.JSONField(default=list, blank=True)
    coverage = models.JSONField(default=dict, blank=True)  # signal -> measured share of allocated, or null

    class Meta:
        ordering = ["cluster", "hour"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hour"], name="uniq_bucket")]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"]),
            models.Index(fields=["collected_at"], name="bucket_collected_at"),  # the ledger's version (API cache)
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}@{self.hour:%Y-%m-%dT%H} {self.state}/{self.status}"


class PodHour(SignalColumns):
    """Ledger row: one pod's GPU-hours in one bucket."""

    cluster = ClusterKey()
    hour = models.DateTimeField()
    namespace = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    pod_uid = models.CharField(max_length=64)
    workload = models.CharField(max_length=320, default="")  # `Kind/name` of its top controller (ledger.md)
    team = models.CharField(max_length=100)
    node = models.CharField(max_length=253)
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200)
    cluster_queue = models.CharField(max_length=253, blank=True)
    local_queue = models.CharField(max_length=253, blank=True)
    resources = models.CharField(max_length=500)  # e.g. "nvidia.com/gpu=4" (effective request)
    gpus = models.FloatField()  # physical-GPU equivalents held (sum of shares; a shared claim's averaged)
    held_seconds = models.FloatField()
    price = Price(null=True)  # USD per physical GPU-hour at write time; null: no price
    # How its GPUs were handed out (gpus.AllocationMode): device_plugin, time_slice, mig, dra, hami. A row of a
    # claim allocated with no running consumer is `dra`, with pod "" and workload `ResourceClaim/<name>`.
    allocation_mode = models.CharField(max_length=20, default="device_plugin")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "hour", "pod_uid"], name="uniq_podhour")]
        indexes = [
            models.Index(fields=["team", "hour"]),
            models.Index(fields=["cluster", "pod_uid", "hour"], name="podhour_pod_history"),
            models.Index(fields=["cluster", "workload", "hour"], name="podhour_workload"),
        ]


class NodeHour(CapacityColumns):
    """Ledger row: one node's capacity in one bucket."""

    cluster = ClusterKey()
    hour = models.DateTimeField()
    node = models.CharField(max_length=253)
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200)
    physical_gpus = models.IntegerField()
    price = Price(null=True)
    inconsistent = models.BooleanField(default=False)
    allocation_mode = models.CharField(max_length=20, default="device_plugin")  # gpus.holds.node_mode

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "hour", "node"], name="uniq_nodehour")]


# The key of a rollup after its cluster and its time (an hour or a day): who (team, namespace) on what.
USAGE_KEY = ("team", "namespace", "node_group", "gpu_model")
CAPACITY_KEY = ("node_group", "gpu_model")


class UsageKey(SignalColumns):
    """A usage rollup's key columns but its time: the cluster and USAGE_KEY."""

    cluster = ClusterKey()
    team = models.CharField(max_length=100)
    namespace = models.CharField(max_length=253)
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200)

    class Meta:
        abstract = True


class CapacityKey(CapacityColumns):
    """A capacity rollup's key columns but its time: the cluster and CAPACITY_KEY."""

    cluster = ClusterKey()
    node_group = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=200)

    class Meta:
        abstract = True


class UsageHour(UsageKey):
    """Rollup of PodHour by (cluster, hour, team, namespace, node group, GPU model)."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "hour", *USAGE_KEY], name="uniq_usagehour")]
        indexes = [models.Index(fields=["hour", "cluster"]), models.Index(fields=["team", "hour"])]


class UsageDay(UsageKey):
    """Rollup of UsageHour by UTC day."""

    day = models.DateField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "day", *USAGE_KEY], name="uniq_usageday")]
        indexes = [models.Index(fields=["day", "cluster"]), models.Index(fields=["team", "day"])]


class WorkloadDay(UsageKey):
    """Rollup of PodHour by UTC day and workload: what the workloads views and `group_by=workload` read for
    whole days (hour-level workload answers read PodHour)."""

    day = models.DateField()
    workload = models.CharField(max_length=320)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "day", "team", "namespace", "workload", "node_group", "gpu_model"],
                name="uniq_workloadday",
            )
        ]
        indexes = [models.Index(fields=["day", "cluster"]), models.Index(fields=["team", "day"])]


class WorkloadWeek(UsageKey):
    """Rollup of WorkloadDay by ISO week (`week`: its Monday), same keys and sums: what a ranking reads for the whole
    ISO weeks of its period (a month from 4-5 rows per workload instead of 30). Written with the day it sums
    (`apps.usage.services.rollup_day`), so it always equals the sum of its days."""

    week = models.DateField()
    workload = models.CharField(max_length=320)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "week", "team", "namespace", "workload", "node_group", "gpu_model"],
                name="uniq_workloadweek",
            )
        ]
        indexes = [models.Index(fields=["week", "cluster"]), models.Index(fields=["team", "week"])]


class CapacityHour(CapacityKey):
    """Rollup of NodeHour by (cluster, hour, node group, GPU model)."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "hour", *CAPACITY_KEY], name="uniq_capacityhour")]
        indexes = [models.Index(fields=["hour", "cluster"])]


class CapacityDay(CapacityKey):
    """Rollup of CapacityHour by UTC day."""

    day = models.DateField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "day", *CAPACITY_KEY], name="uniq_capacityday")]
        indexes = [models.Index(fields=["day", "cluster"])]


class PodObservation(models.Model):
    """A GPU pod as the Kubernetes API last showed it: the allocation interval source.

    For hours the collector missed, kube-state-metrics history in Prometheus fills in.
    """

    cluster = ClusterKey()
    uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    node = models.CharField(max_length=253, blank=True)
    phase = models.CharField(max_length=20, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    workload = models.CharField(max_length=320, blank=True)  # `Kind/name` of its top controller
    requests = models.JSONField(default=dict, blank=True)  # effective request per NVIDIA resource
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)  # terminated, or last seen when it vanished
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    gone = models.BooleanField(default=False)
    allocation_mode = models.CharField(max_length=20, default="device_plugin")  # gpus.holds.allocation_mode
    # What it holds outside the device plugin (gpus.holds.Hold.as_json): DRA devices through its claims (kept
    # once seen: a template's claim is deleted with its pod) and HAMi fractions (raw shares, before scaling).
    holds = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "uid"], name="uniq_podobs")]
        indexes = [models.Index(fields=["cluster", "started"])]


class ClaimObservation(models.Model):
    """A ResourceClaim's allocation as the Kubernetes API showed it: one row per stretch it was seen allocated.

    The API keeps no allocation history, so it is recorded like pods: `allocated_from` is the first read that
    saw it allocated, `allocated_until` the first read that saw it released or gone (null while allocated).
    Its devices are held by its consuming pods while they run and, while none runs, by the claim itself: those
    hours go to the claim's namespace and team as idle (workload `ResourceClaim/<name>`).
    """

    cluster = ClusterKey()
    uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    labels = models.JSONField(default=dict, blank=True)
    node = models.CharField(max_length=253, blank=True)
    devices = models.JSONField(default=list, blank=True)  # gpus.holds.Hold.as_json of each GPU device it holds
    consumers = models.JSONField(default=list, blank=True)  # uids of the pods ever seen in `status.reservedFor`
    allocated_from = models.DateTimeField()
    allocated_until = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid", "allocated_from"], name="uniq_claimobs"),
        ]
        indexes = [models.Index(fields=["cluster", "allocated_until"], name="claimobs_open")]
