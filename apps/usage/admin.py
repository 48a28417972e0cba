"""Read-only admin for the ledger: rows are written whole per bucket by the collectors, never by hand."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models

from apps.usage import models as ledger


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


def register(model: type[models.Model], **options: Any) -> None:
    """`model` in the admin, read-only, with these ModelAdmin options (list_display, list_filter...)."""
    admin.site.register(model, type(f"{model.__name__}Admin", (ReadOnlyAdmin,), options))


USAGE_COLUMNS = ["cluster", "team", "namespace", "node_group", "gpu_model", "allocated_gpu_hours", "working_sm_active",
                 "idle_sm_active", "cost"]
CAPACITY_COLUMNS = ["cluster", "node_group", "gpu_model", "capacity_gpu_hours", "allocated_gpu_hours",
                    "unallocated_gpu_hours", "unavailable_gpu_hours", "unallocated_cost"]

register(
    ledger.Bucket,
    list_display=["cluster", "hour", "state", "status", "attempts", "inconsistent", "pod_rows", "node_rows",
                  "collected_at"],
    list_filter=["cluster", "state", "status", "inconsistent"],
    date_hierarchy="hour",
)
register(
    ledger.PodHour,
    list_display=["hour", "cluster", "team", "namespace", "pod", "node", "gpu_model", "gpus", "allocated_gpu_hours",
                  "idle_sm_active", "cost"],
    list_filter=["cluster", "team", "gpu_model"],
    search_fields=["pod", "namespace", "node"],
    date_hierarchy="hour",
)
register(
    ledger.NodeHour,
    list_display=["hour", "cluster", "node", "node_group", "gpu_model", "capacity_gpu_hours", "allocated_gpu_hours",
                  "unallocated_gpu_hours", "unavailable_gpu_hours", "inconsistent"],
    list_filter=["cluster", "node_group", "gpu_model", "inconsistent"],
    search_fields=["node"],
    date_hierarchy="hour",
)
for rollup, time in ((ledger.UsageHour, "hour"), (ledger.UsageDay, "day")):
    register(rollup, list_display=[time, *USAGE_COLUMNS], list_filter=["cluster", "team", "gpu_model"],
             date_hierarchy=time)
for table, time in ((ledger.CapacityHour, "hour"), (ledger.CapacityDay, "day")):
    register(table, list_display=[time, *CAPACITY_COLUMNS], list_filter=["cluster", "node_group", "gpu_model"],
             date_hierarchy=time)
register(
    ledger.PodObservation,
    list_display=["pod", "namespace", "cluster", "node", "phase", "started", "finished", "gone", "last_seen"],
    list_filter=["cluster", "phase", "gone"],
    search_fields=["pod", "namespace", "uid"],
)
