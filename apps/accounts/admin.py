"""Admin for API tokens: list and revoke (delete) only; tokens are issued by `create_api_token`."""

from __future__ import annotations

from django.contrib import admin

from apps.accounts.forms import AdminSignInForm
from apps.accounts.models import ApiToken

# The admin's sign-in refuses an over-long username as a form error (apps/accounts/forms.py).
admin.site.login_form = AdminSignInForm


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "created_at", "expires_at", "last_used_at")
    list_filter = ("expires_at",)
    search_fields = ("prefix", "user__username")
    readonly_fields = ("user", "prefix", "digest", "created_at", "expires_at", "last_used_at")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
