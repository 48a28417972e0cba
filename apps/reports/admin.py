from django.contrib import admin

from apps.reports.models import ReportRun, ReportSubscription


@admin.register(ReportSubscription)
class ReportSubscriptionAdmin(admin.ModelAdmin):
    list_display = ("email", "teams", "active", "created_at")


@admin.register(ReportRun)
class ReportRunAdmin(admin.ModelAdmin):
    list_display = ("subscription", "period_start", "status", "sent_at")
    list_filter = ("status",)
    readonly_fields = ("subscription", "period_start", "period_end", "status", "sent_at", "error", "created_at")
