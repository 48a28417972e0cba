"""Budgets per team (optionally one cluster or namespace), weekly or monthly, and the alerts they raise
(docs/budgets.md). Spend is the price card's cost in the ledger (docs/numbers.md, "Money").

* A **budget** is an amount in USD per ISO week or calendar month (UTC) with alert thresholds in percent
  (default 80 and 100), checked on the actual spend and on the forecast end-of-period spend.
* A **budget alert** is one threshold crossed, for one budget, period and basis (actual or forecast), told to one
  recipient on one channel (a team member's e-mail, a team webhook): its unique key makes it once, however often
  the ledger is collected again.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.findings.models import TeamChannel
from apps.inventory.models import Cluster, Team


def default_thresholds() -> list[int]:
    return [80, 100]


class Budget(models.Model):
    class Period(models.TextChoices):
        WEEKLY = "weekly", "Weekly (ISO week)"
        MONTHLY = "monthly", "Monthly (calendar month)"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budgets")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    namespace = models.CharField(max_length=253, blank=True)
    period = models.CharField(max_length=10, choices=Period.choices, default=Period.MONTHLY)
    amount = models.DecimalField(max_digits=14, decimal_places=2, help_text="USD per period")
    thresholds = models.JSONField(default=default_thresholds, help_text="percent of the amount, e.g. [80, 100]")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "period", "cluster", "namespace"]
        constraints = [
            # set_budget updates the one budget of a scope (a null cluster is "every cluster").
            models.UniqueConstraint(fields=["team", "cluster", "namespace", "period"], name="uniq_budget"),
        ]

    def __str__(self) -> str:
        scope = "/".join(p for p in (self.cluster.name if self.cluster else "", self.namespace) if p)
        return f"{self.team.name}{' ' + scope if scope else ''} {self.period} {self.amount} USD"


class BudgetAlert(models.Model):
    class Basis(models.TextChoices):
        ACTUAL = "actual"
        FORECAST = "forecast"

    class Channel(models.TextChoices):
        EMAIL = "email"
        WEBHOOK = "webhook"

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="alerts")
    period_start = models.DateTimeField()
    threshold = models.PositiveIntegerField()  # percent
    basis = models.CharField(max_length=10, choices=Basis.choices)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    recipient = models.CharField(max_length=320)  # an e-mail address, or the webhook channel's id
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                             related_name="+")
    team_channel = models.ForeignKey(TeamChannel, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    # What was seen when the threshold was crossed (what the message says).
    spend = models.DecimalField(max_digits=20, decimal_places=6)
    forecast = models.DecimalField(max_digits=20, decimal_places=2, null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["budget", "period_start", "threshold", "basis", "channel", "recipient"],
                                    name="uniq_budget_alert"),
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="budgetalert_due")]

    def __str__(self) -> str:
        return f"{self.budget} {self.period_start:%Y-%m-%d} {self.basis} {self.threshold}% -> {self.recipient}"
