"""Output shapes of `/api/v1/findings/` and `/api/v1/idle-allocations/` (interfaces.md; every kind's rule and
figures: docs/findings.md)."""

from __future__ import annotations

from rest_framework import serializers

from apps.common.serializers import MoneyField
from apps.findings.constants import Kind

DECIMALS = 6


class GpuHoursField(serializers.FloatField):
    """Exact decimal GPU-hours, rendered as a number rounded to a millionth (as the usage API does)."""

    def to_representation(self, value):
        return round(float(value), DECIMALS)


class FindingSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=Kind.values)
    cluster = serializers.CharField(source="cluster.name")
    team = serializers.CharField(help_text="the team charged for the subject; empty: the platform's")
    namespace = serializers.CharField()
    workload = serializers.CharField(help_text="`Kind/name` (ledger.md \"Workloads\")")
    pod = serializers.CharField()
    node = serializers.CharField()
    gpu_uuid = serializers.CharField()
    start = serializers.DateTimeField(help_text="start of the first flagged hour")
    end = serializers.DateTimeField(allow_null=True, help_text="end of the last flagged hour; null while ongoing")
    last_hour = serializers.DateTimeField(help_text="start of the last flagged hour")
    hours = serializers.IntegerField(help_text="consecutive flagged hours")
    gpu_hours = GpuHoursField(help_text="the finding's GPU-hours (per kind: idle, infra loss, waiting, ...)")
    cost = MoneyField(help_text="their cost, USD, exact to the micro-dollar (unpriced hours excluded)")
    unpriced_gpu_hours = GpuHoursField(help_text="part of gpu_hours on GPU models without a price")
    allocated_gpu_hours = GpuHoursField(help_text="what the subject held in those hours")
    allocated_cost = MoneyField(help_text="what it was charged for them")
    infra_loss = serializers.SerializerMethodField(help_text="true for unhealthy GPUs a team held")
    detail = serializers.JSONField(help_text="kind-specific: XID codes, throttle reasons, rank spread, tags...")

    def get_infra_loss(self, obj) -> bool:
        return obj.kind == Kind.UNHEALTHY_GPU and bool(obj.team)


class IdleAllocationSerializer(serializers.Serializer):
    """A pod holding GPUs with (almost) no activity for consecutive hours, up to its cluster's latest bucket."""

    cluster = serializers.CharField()
    team = serializers.CharField()
    namespace = serializers.CharField()
    pod = serializers.CharField()
    node = serializers.CharField()
    node_group = serializers.CharField()
    gpu_model = serializers.CharField()
    gpus = serializers.FloatField(help_text="physical-GPU equivalents held in the latest bucket")
    idle_since = serializers.DateTimeField(help_text="start of the first idle hour of the current streak")
    last_bucket = serializers.DateTimeField(help_text="the cluster's latest collected hour")
    idle_hours = serializers.IntegerField(help_text="consecutive idle hourly buckets")
    activity = serializers.FloatField(help_text="measured activity over the streak")
    allocated_gpu_hours = serializers.FloatField()
    idle_gpu_hours = serializers.FloatField()
    cost = MoneyField()
    idle_cost = MoneyField()
