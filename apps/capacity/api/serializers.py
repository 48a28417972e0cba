"""Output shapes of /api/v1/fragmentation/ and /api/v1/pending/ (interfaces.md)."""

from __future__ import annotations

from rest_framework import serializers

SHAPES_HELP = 'keys "1", "2", "4", "8": pod shapes in units'


class UnitRowSerializer(serializers.Serializer):
    resource = serializers.CharField(help_text="nvidia.com/gpu, nvidia.com/gpu.shared or nvidia.com/mig-<profile>")
    unit = serializers.CharField(help_text="what the counts count: gpu, replica, or mig-<profile>")
    nodes = serializers.IntegerField()
    allocatable = serializers.IntegerField()
    allocated = serializers.IntegerField()
    free = serializers.IntegerField(help_text="on schedulable nodes")
    largest_free_block = serializers.IntegerField()
    placeable = serializers.DictField(child=serializers.IntegerField(), help_text=SHAPES_HELP)
    stranded = serializers.DictField(child=serializers.IntegerField(), help_text=SHAPES_HELP)


class FragmentationRowSerializer(serializers.Serializer):
    cluster = serializers.CharField(source="cluster.name")
    taken_at = serializers.DateTimeField(help_text="the collection these numbers were taken at")
    node_group = serializers.CharField()
    gpu_model = serializers.CharField(help_text="the model with the most GPUs in the group")
    unit = serializers.SerializerMethodField(help_text="always gpu: amounts in physical-GPU equivalents")
    nodes = serializers.IntegerField()
    physical_gpus = serializers.IntegerField()
    allocatable_gpus = serializers.FloatField(help_text="all nodes, physical-GPU equivalents (MIG N/7, replica 1/R)")
    allocated_gpus = serializers.FloatField(help_text="held by pods on the group's nodes, physical-GPU equivalents")
    free_gpus = serializers.FloatField(help_text="allocatable - allocated on schedulable nodes only")
    largest_free_block = serializers.IntegerField(help_text="the most whole GPUs one pod could get on a single node")
    placeable = serializers.DictField(child=serializers.IntegerField(), help_text=SHAPES_HELP)
    stranded_gpus = serializers.DictField(child=serializers.IntegerField(), help_text=SHAPES_HELP)
    zero_allocatable_nodes = serializers.SerializerMethodField(help_text="how many nodes advertise zero GPUs")
    zero_allocatable_node_names = serializers.ListField(source="zero_allocatable_nodes", child=serializers.CharField())
    unschedulable_nodes = serializers.ListField(child=serializers.CharField(), help_text="NotReady or cordoned")
    units = UnitRowSerializer(many=True, help_text="the same numbers per device resource, in its own unit")

    def get_unit(self, row) -> str:
        return "gpu"

    def get_zero_allocatable_nodes(self, row) -> int:
        return len(row.zero_allocatable_nodes)


class FragmentationAtSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    results = FragmentationRowSerializer(many=True)


class FragmentationRangeSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    results = FragmentationRowSerializer(many=True)


class PendingSerializer(serializers.Serializer):
    cluster = serializers.CharField(source="cluster.name")
    taken_at = serializers.DateTimeField()
    kind = serializers.CharField(help_text="pod or workload (Kueue)")
    namespace = serializers.CharField()
    name = serializers.CharField()
    team = serializers.CharField()
    reason = serializers.CharField(help_text="quota, fragmentation, capacity or other")
    resource = serializers.CharField()
    per_pod = serializers.IntegerField(help_text="units of `resource` one pod asks for")
    pods = serializers.IntegerField()
    gpus = serializers.IntegerField(source="units", help_text="per_pod x pods, in units of `resource`")
    node_group = serializers.CharField()
    cluster_queue = serializers.CharField()
    local_queue = serializers.CharField()
    waiting_since = serializers.DateTimeField(allow_null=True)
    message = serializers.CharField()


class PendingCountSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    taken_at = serializers.DateTimeField()
    reason = serializers.CharField()
    items = serializers.IntegerField(help_text="pods and workloads")
    pods = serializers.IntegerField()
    gpus = serializers.IntegerField(source="units")


class PendingCountsResponseSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    results = PendingCountSerializer(many=True)
