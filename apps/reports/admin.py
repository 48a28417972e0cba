from django import forms
from django.contrib import admin

from apps.inventory.models import Team
from apps.reports.models import ReportDelivery, ReportEdition, ReportRun, ReportSubscription


class SubscriptionForm(forms.ModelForm):
    """Teams picked from the existing ones; none picked means every team the person may see (never every team for
    someone who may not see them: the model's clean() applies the same rule as the command)."""

    teams = forms.ModelMultipleChoiceField(Team.objects.all(), required=False, to_field_name="name",
                                           help_text="None: every team the person may see, recomputed at each send.")

    class Meta:
        model = ReportSubscription
        fields = ("user", "cadence", "teams", "active")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["teams"] = list(Team.objects.filter(name__in=self.instance.team_names))

    def clean_teams(self):
        return sorted(t.name for t in self.cleaned_data.get("teams") or [])


@admin.register(ReportSubscription)
class ReportSubscriptionAdmin(admin.ModelAdmin):
    form = SubscriptionForm
    list_display = ("user", "email", "cadence", "teams", "active", "created_at")
    list_filter = ("cadence", "active")


@admin.register(ReportEdition)
class ReportEditionAdmin(admin.ModelAdmin):
    list_display = ("period", "kind", "scope", "version", "status", "csv_sha256", "created_at")
    list_filter = ("kind", "status")
    exclude = ("csv_bytes", "focus_bytes")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ReportDelivery)
class ReportDeliveryAdmin(admin.ModelAdmin):
    list_display = ("edition", "recipient", "status", "sent_at")
    list_filter = ("status",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ReportRun)
class ReportRunAdmin(admin.ModelAdmin):
    list_display = ("subscription", "period_start", "status", "sent_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
