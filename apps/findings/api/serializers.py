"""Output shape of `/api/v1/findings/` (interfaces.md; every kind's rule and figures: docs/findings.md)."""

from __future__ import annotations

from rest_framework import serializers

from apps.common.serializers import MoneyField
from apps.findings.models import Kind

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
