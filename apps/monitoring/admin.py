from django.contrib import admin

from apps.monitoring.models import CollectionRun, PreflightRun


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


@admin.register(PreflightRun)
class PreflightRunAdmin(admin.ModelAdmin):
    """Preflights (`check_cluster`), read-only: the table itself is the staff page /clusters/<name>/preflight/."""

    list_display = ("cluster", "ran_at", "ok")
    list_filter = ("ok", "cluster")

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False
