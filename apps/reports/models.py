"""Weekly report subscriptions and the record of what was sent for which sealed week."""

from __future__ import annotations

from django.db import models


class ReportSubscription(models.Model):
    """Someone who gets the weekly GPU cost report by email."""

    email = models.EmailField(unique=True)
    # Team names the report covers; empty means every team (finance), with fleet capacity.
    teams = models.JSONField(default=list, blank=True)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["email"]

    def __str__(self) -> str:
        return f"{self.email} ({', '.join(self.teams) or 'all teams'})"


class ReportRun(models.Model):
    """One subscription's report for one week. The unique row is the claim: a week is never sent twice."""

    class Status(models.TextChoices):
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"

    subscription = models.ForeignKey(ReportSubscription, on_delete=models.CASCADE, related_name="runs")
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.SENDING)
    sent_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # SHA-256 of the CSV sent: finance can prove later that a file is the one this week was closed with.
    csv_sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-period_start", "subscription"]
        constraints = [
            models.UniqueConstraint(fields=["subscription", "period_start"], name="uniq_report_run"),
        ]

    def __str__(self) -> str:
        return f"{self.subscription.email} {self.period_start:%Y-%m-%d} {self.status}"
