"""Output shapes of the usage API (interfaces.md, "REST API"; numbers defined in docs/numbers.md)."""

from __future__ import annotations

from rest_framework import serializers

from apps.common.serializers import MoneyField
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
    cost = MoneyField(help_text="allocated x price, USD (exact to the micro-dollar; unpriced hours excluded)")
    idle_cost = MoneyField(help_text="idle x price, USD")
    unpriced_gpu_hours = serializers.FloatField(help_text="allocated GPU-hours of GPU models without a price")
    coverage = serializers.FloatField(
        allow_null=True, help_text="1 - unmeasured / allocated; null when nothing was allocated"
    )


class UsageTotalsSerializer(serializers.Serializer):
    """The sum of the rows: money exactly (printed total = sum of printed rows)."""

    allocated_gpu_hours = serializers.FloatField()
    working_gpu_hours = serializers.FloatField()
    idle_gpu_hours = serializers.FloatField()
    unmeasured_gpu_hours = serializers.FloatField()
    cost = MoneyField()
    idle_cost = MoneyField()
    unpriced_gpu_hours = serializers.FloatField()


class CapacitySerializer(serializers.Serializer):
    """Fleet (or cluster) capacity: totals.cost (fleet-wide) + unallocated_cost = capacity_cost, exactly."""

    capacity_gpu_hours = serializers.FloatField()
    unallocated_gpu_hours = serializers.FloatField()
    unavailable_gpu_hours = serializers.FloatField(help_text="part of unallocated: nodes cordoned, NotReady or "
                                                   "without allocatable GPUs")
    unpriced_gpu_hours = serializers.FloatField(help_text="capacity of GPU models without a price")
    capacity_cost = MoneyField()
    unallocated_cost = MoneyField()


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
    # SerializerMetaclass pops declared fields off the class, so this does not shadow Field.source; the stubs
    # cannot see that.
    source = serializers.CharField(help_text="kubernetes or simulator")  # type: ignore[assignment]
    last_collected_hour = serializers.DateTimeField(allow_null=True, help_text="newest successfully collected bucket")


class ClusterDetailSerializer(ClusterSerializer):
    node_groups = serializers.ListField(child=serializers.CharField())


# ---- Data status ----


class BucketCountsSerializer(serializers.Serializer):
    ok = serializers.IntegerField(help_text="final and measured as usual")
    provisional = serializers.IntegerField(help_text="collected, its hour not over or not yet finalized")
    failed = serializers.IntegerField(help_text="a source could not be read; retried with backoff")
    source_missing = serializers.IntegerField(help_text="written without any DCGM data (all unmeasured); retried")
    degraded_source = serializers.IntegerField(help_text="the sources now have less than stored: stored rows kept")
    abandoned = serializers.IntegerField(help_text="kept failing past GPUFINOPS_ABANDON_AFTER_DAYS")
    pending = serializers.IntegerField(help_text="claimed, not written yet")
    missing = serializers.IntegerField(help_text="never attempted")


class DayStatusSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    day = serializers.DateField()
    hours = serializers.IntegerField(help_text="hours of the day so far (since the cluster's first bucket)")
    complete = serializers.BooleanField(help_text="every hour is ok")
    counts = BucketCountsSerializer()
    coverage = serializers.FloatField(allow_null=True, help_text="attribution coverage under the default signal")
    signals = serializers.ListField(child=serializers.ChoiceField(choices=SIGNALS))
    reasons = serializers.ListField(child=serializers.CharField(), help_text="why buckets failed or were kept")


class RankingRowSerializer(serializers.Serializer):
    """One ranked row: its place, its names (those of `by`), its figures."""

    rank = serializers.IntegerField(help_text="1 for the first row of the whole ranking")
    team = serializers.CharField()
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    workload = serializers.CharField(required=False, help_text="by=workload or pod")
    pod = serializers.CharField(required=False, help_text="by=pod")
    pod_uid = serializers.CharField(required=False, help_text="by=pod")
    allocated_gpu_hours = serializers.FloatField()
    working_gpu_hours = serializers.FloatField()
    idle_gpu_hours = serializers.FloatField()
    unmeasured_gpu_hours = serializers.FloatField()
    cost = MoneyField()
    idle_cost = MoneyField()
    unpriced_gpu_hours = serializers.FloatField()
    activity = serializers.FloatField(allow_null=True, help_text="working / (working + idle); null when unmeasured")
    coverage = serializers.FloatField(allow_null=True)


class RankingResponseSerializer(serializers.Serializer):
    """A page of a ranking, with the number of rows in all and their totals."""

    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    by = serializers.ChoiceField(choices=["workload", "namespace", "pod"])
    ordering = serializers.CharField()
    signal = serializers.ChoiceField(choices=list(SIGNALS))
    currency = serializers.CharField()
    count = serializers.IntegerField(help_text="rows in the whole ranking")
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    next = serializers.CharField(allow_null=True, help_text="the next page's URL, null on the last")
    previous = serializers.CharField(allow_null=True)
    results = RankingRowSerializer(many=True)
    totals = UsageTotalsSerializer(help_text="of every row of the ranking, not only this page")
