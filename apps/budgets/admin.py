"""Budgets in the admin (set them here or with `manage.py set_budget`); their alerts, read-only."""

from __future__ import annotations

from django.contrib import admin

from apps.budgets.models import Budget, BudgetAlert


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ["team", "cluster", "namespace", "period", "amount", "thresholds", "active"]
    list_filter = ["period", "active", "team"]


@admin.register(BudgetAlert)
class BudgetAlertAdmin(admin.ModelAdmin):
    list_display = ["budget", "period_start", "basis", "threshold", "channel", "recipient", "status", "sent_at"]
    list_filter = ["status", "basis", "channel"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
