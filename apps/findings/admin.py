"""Admin: findings (read-only), team webhook channels (the URL is write-only), opt-outs, notifications sent."""

from __future__ import annotations

from urllib.parse import urlsplit

from django import forms
from django.contrib import admin

from apps.common.outbound import target_problem
from apps.common.redaction import scrub

from .models import Finding, Notification, NotificationOptOut, TeamChannel


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Finding)
class FindingAdmin(ReadOnly):
    list_display = ("kind", "cluster", "team", "subject", "start", "end", "hours", "gpu_hours", "cost")
    list_filter = ("kind", "cluster", "team")
    search_fields = ("subject", "namespace", "workload", "pod", "node", "gpu_uuid")
    date_hierarchy = "start"


@admin.register(Notification)
class NotificationAdmin(ReadOnly):
    list_display = ("finding", "team", "channel", "recipient", "status", "attempts", "sent_at", "last_error")
    list_filter = ("status", "channel", "team")
    search_fields = ("recipient", "finding__subject")


class TeamChannelForm(forms.ModelForm):
    url = forms.URLField(
        required=False, assume_scheme="https",
        help_text="http(s) URL the JSON is POSTed to; stored encrypted, never shown. Empty: keep the current one.",
    )

    class Meta:
        model = TeamChannel
        fields = ("team", "name", "enabled")

    def clean_url(self):
        url = self.cleaned_data.get("url") or ""
        if not url and not (self.instance and self.instance.url_encrypted):
            raise forms.ValidationError("A new channel needs a URL.")
        if url and urlsplit(url).scheme not in ("http", "https"):
            raise forms.ValidationError("http:// or https:// only.")
        problem = target_problem(url) if url else None
        if problem:  # checked again at every send: a name may resolve differently later
            raise forms.ValidationError(f"Refused: {scrub(problem, url)}")
        return url

    def save(self, commit=True):
        channel = super().save(commit=False)
        if self.cleaned_data.get("url"):
            channel.url = self.cleaned_data["url"]
        if commit:
            channel.save()
        return channel


@admin.register(TeamChannel)
class TeamChannelAdmin(admin.ModelAdmin):
    form = TeamChannelForm
    list_display = ("team", "name", "enabled", "masked_url", "created_at")
    list_filter = ("enabled",)


@admin.register(NotificationOptOut)
class NotificationOptOutAdmin(admin.ModelAdmin):
    list_display = ("user", "team", "created_at")
