"""Output shapes of /api/v1/queues/ (interfaces.md) and its admission-wait and usage companions."""

from __future__ import annotations

from rest_framework import serializers


class QueueRowSerializer(serializers.Serializer):
    cluster = serializers.CharField(source="cluster.name")
    taken_at = serializers.DateTimeField()
    cluster_queue = serializers.CharField(source="cluster_queue.name")
    cohort = serializers.CharField(source="cluster_queue.cohort")
    flavor = serializers.CharField()
    resource = serializers.CharField()
    nominal_quota = serializers.FloatField(help_text="in the resource's base unit: devices, cores, bytes")
    borrowing_limit = serializers.FloatField(allow_null=True, help_text="null: unlimited")
    lending_limit = serializers.FloatField(allow_null=True, help_text="null: may lend all of it")
    reserved = serializers.FloatField(help_text="status.flavorsReservation total (incl. borrowed)")
    used = serializers.FloatField(help_text="status.flavorsUsage total: held by admitted workloads")
    borrowed = serializers.FloatField(help_text="reserved above nominal quota, from the cohort")
    pending_workloads = serializers.IntegerField(source="cluster_queue.pending_workloads")
    admitted_workloads = serializers.IntegerField(source="cluster_queue.admitted_workloads")


class QueueListResponseSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    results = QueueRowSerializer(many=True)


class AdmissionWaitSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    cluster_queue = serializers.CharField()
    day = serializers.DateField(help_text="UTC day of admission")
    workloads = serializers.IntegerField()
    p50_seconds = serializers.FloatField()
    p95_seconds = serializers.FloatField()
    max_seconds = serializers.FloatField()


class AdmissionWaitResponseSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    results = AdmissionWaitSerializer(many=True)


class QueueUsageSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    cluster_queue = serializers.CharField()
    cohort = serializers.CharField()
    nominal_gpus = serializers.FloatField(help_text="GPU nominal quota over flavors (device resources)")
    borrowed_gpus = serializers.FloatField(help_text="GPUs borrowed at the latest snapshot")
    allocated_gpu_hours = serializers.FloatField()
    working_gpu_hours = serializers.FloatField()
    idle_gpu_hours = serializers.FloatField()
    unmeasured_gpu_hours = serializers.FloatField()
    borrowed_gpu_hours = serializers.FloatField()
    borrowed_idle_gpu_hours = serializers.FloatField(help_text="Σ per hour of min(borrowed GPUs, idle GPU-hours)")
    borrowed_idle = serializers.BooleanField(help_text="borrowed quota while idle (>= 0.5 GPU-hours of it)")


class QueueUsageResponseSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    signal = serializers.CharField()
    results = QueueUsageSerializer(many=True)
