"""Read-only admin for the ledger: rows are written whole per bucket by the collectors, never by hand."""

from __future__ import annotations

from django.contrib import admin

from apps.usage.models import (
    Bucket,
    CapacityDay,
    CapacityHour,
    NodeHour,
    PodHour,
    PodObservation,
    UsageDay,
    UsageHour,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Browse and filter, no add/change/delete: editing one row would break the bucket's rollups."""

    list_per_page = 100
    show_full_result_count = False  # COUNT(*) over a year of ledger rows is slow

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Bucket)
class BucketAdmin(ReadOnlyAdmin):
    list_display = ["cluster", "hour", "state", "status", "attempts", "inconsistent", "pod_rows", "node_rows",
                    "collected_at"]
    list_filter = ["cluster", "state", "status", "inconsistent"]
    date_hierarchy = "hour"


@admin.register(PodHour)
class PodHourAdmin(ReadOnlyAdmin):
    list_display = ["hour", "cluster", "team", "namespace", "pod", "node", "gpu_model", "gpus",
                    "allocated_gpu_hours", "idle_sm_active", "cost"]
    list_filter = ["cluster", "team", "gpu_model"]
    search_fields = ["pod", "namespace", "node"]
    date_hierarchy = "hour"


@admin.register(NodeHour)
class NodeHourAdmin(ReadOnlyAdmin):
    list_display = ["hour", "cluster", "node", "node_group", "gpu_model", "capacity_gpu_hours",
                    "allocated_gpu_hours", "unallocated_gpu_hours", "unavailable_gpu_hours", "inconsistent"]
    list_filter = ["cluster", "node_group", "gpu_model", "inconsistent"]
    search_fields = ["node"]
    date_hierarchy = "hour"


@admin.register(UsageHour)
class UsageHourAdmin(ReadOnlyAdmin):
    list_display = ["hour", "cluster", "team", "namespace", "node_group", "gpu_model", "allocated_gpu_hours",
                    "working_sm_active", "idle_sm_active", "cost"]
    list_filter = ["cluster", "team", "gpu_model"]
    date_hierarchy = "hour"


@admin.register(UsageDay)
class UsageDayAdmin(ReadOnlyAdmin):
    list_display = ["day", "cluster", "team", "namespace", "node_group", "gpu_model", "allocated_gpu_hours",
                    "working_sm_active", "idle_sm_active", "cost"]
    list_filter = ["cluster", "team", "gpu_model"]
    date_hierarchy = "day"


@admin.register(CapacityHour)
class CapacityHourAdmin(ReadOnlyAdmin):
    list_display = ["hour", "cluster", "node_group", "gpu_model", "capacity_gpu_hours", "allocated_gpu_hours",
                    "unallocated_gpu_hours", "unavailable_gpu_hours", "unallocated_cost"]
    list_filter = ["cluster", "node_group", "gpu_model"]
    date_hierarchy = "hour"


@admin.register(CapacityDay)
class CapacityDayAdmin(ReadOnlyAdmin):
    list_display = ["day", "cluster", "node_group", "gpu_model", "capacity_gpu_hours", "allocated_gpu_hours",
                    "unallocated_gpu_hours", "unavailable_gpu_hours", "unallocated_cost"]
    list_filter = ["cluster", "node_group", "gpu_model"]
    date_hierarchy = "day"


@admin.register(PodObservation)
class PodObservationAdmin(ReadOnlyAdmin):
    list_display = ["pod", "namespace", "cluster", "node", "phase", "started", "finished", "gone", "last_seen"]
    list_filter = ["cluster", "phase", "gone"]
    search_fields = ["pod", "namespace", "uid"]
