"""Output shapes of the usage API (interfaces.md, "REST API"; numbers defined in docs/numbers.md)."""

from __future__ import annotations

from rest_framework import serializers

from apps.usage.activity import SIGNALS
from apps.usage.selectors import GROUP_KEYS


class UsageRowSerializer(serializers.Serializer):
    """One group: its keys (only those in ``group_by``) and its figures."""

    team = serializers.CharField(required=False)
    namespace = serializers.CharField(required=False)
    cluster = serializers.CharField(required=False)
    node_group = serializers.CharField(required=False)
    gpu_model = serializers.CharField(required=False)
    day = serializers.DateField(required=False, help_text="UTC day, YYYY-MM-DD")
    hour = serializers.DateTimeField(required=False, help_text="start of the UTC hour")
    allocated_gpu_hours = serializers.FloatField()
    working_gpu_hours = serializers.FloatField()
    idle_gpu_hours = serializers.FloatField()
    unmeasured_gpu_hours = serializers.FloatField()
    cost = serializers.FloatField(help_text="allocated x price, USD")
    idle_cost = serializers.FloatField(help_text="idle x price, USD")
    coverage = serializers.FloatField(
        allow_null=True, help_text="1 - unmeasured / allocated; null when nothing was allocated"
    )


class UsageTotalsSerializer(serializers.Serializer):
    allocated_gpu_hours = serializers.FloatField()
    working_gpu_hours = serializers.FloatField()
    idle_gpu_hours = serializers.FloatField()
    unmeasured_gpu_hours = serializers.FloatField()
    cost = serializers.FloatField()
    idle_cost = serializers.FloatField()


class CapacitySerializer(serializers.Serializer):
    capacity_gpu_hours = serializers.FloatField()
    unallocated_gpu_hours = serializers.FloatField()
    unavailable_gpu_hours = serializers.FloatField()
    unallocated_cost = serializers.FloatField()


class UsageResponseSerializer(serializers.Serializer):
    """The whole usage answer. Results are not paginated: they are already grouped."""

    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    group_by = serializers.ListField(child=serializers.ChoiceField(choices=GROUP_KEYS))
    signal = serializers.ChoiceField(choices=SIGNALS)
    currency = serializers.CharField()
    provisional = serializers.BooleanField(help_text="true when a bucket in the range may still change")
    coverage = serializers.FloatField(allow_null=True)
    results = UsageRowSerializer(many=True)
    totals = UsageTotalsSerializer()
    capacity = CapacitySerializer(required=False, help_text="only for callers who see every team")


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
    cost = serializers.FloatField()
    idle_cost = serializers.FloatField()


# ---- Teams and clusters ----


class TeamSerializer(serializers.Serializer):
    name = serializers.CharField()
    display_name = serializers.CharField()


class TeamDetailSerializer(TeamSerializer):
    namespaces = serializers.ListField(
        child=serializers.CharField(), help_text="namespaces explicitly mapped to this team"
    )
    clusters = serializers.ListField(child=serializers.CharField(), help_text="clusters where the team has hours")


class ClusterSerializer(serializers.Serializer):
    name = serializers.CharField()
    source = serializers.CharField(help_text="kubernetes or simulator")
    last_collected_hour = serializers.DateTimeField(allow_null=True, help_text="newest successfully collected bucket")


class ClusterDetailSerializer(ClusterSerializer):
    node_groups = serializers.ListField(child=serializers.CharField())
