from django.contrib import admin

from apps.monitoring.models import CollectionRun


@admin.register(CollectionRun)
class CollectionRunAdmin(admin.ModelAdmin):
    """Recent collection runs (read-only): what /metrics summarises, one row per run."""

    list_display = ("cluster", "finished_at", "outcome", "duration_seconds", "written", "failed", "degraded",
                    "not_attempted")
    list_filter = ("outcome", "cluster")
    search_fields = ("error",)

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False
