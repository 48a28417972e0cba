"""Finance reports: who gets which report (subscriptions), every edition of every period's report (the
archive: figures and the exact files), and each e-mail sent (deliveries). See docs/reports.md.

* A **period** is an ISO week (`2026-W47`) or a calendar month (`2026-11`), UTC.
* An **edition** is one version of one period's report for one **scope** (all teams with the fleet's capacity,
  or a set of teams). Versions count up per (period, scope); each edition is `provisional` (some hour of the
  period is not final yet: sent only when forced), `final` (the first edition once every hour of the period
  is final) or `restated` (the figures of a final period changed later). Editions are never updated: their
  figures, files and digests are what was sent, byte for byte.
* A **delivery** is one edition e-mailed to one subscription: once per subscription and edition.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


class Cadence(models.TextChoices):
    WEEKLY = "weekly", "Weekly (ISO week)"
    MONTHLY = "monthly", "Monthly (calendar month)"


class ReportSubscription(models.Model):
    """A person who gets a report every week or month, for teams that person may see.

    `teams` empty means "every team the person may see", recomputed at each send: all teams (with the fleet's
    capacity) for finance and staff, the teams they belong to for anyone else, and nothing at all for a person
    on no team (never every team by accident). A named team the person can no longer see is left out.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="report_subscriptions",
        help_text="The person. Reports go to this person's e-mail address and cover only teams they may see.",
    )
    cadence = models.CharField(max_length=10, choices=Cadence.choices, default=Cadence.WEEKLY)
    # The address the subscription was made for (kept for the record; mail goes to the person's current address).
    email = models.EmailField()
    # Team names the report covers; empty: every team the person may see (see the class docstring).
    teams = models.JSONField(default=list, blank=True)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["email", "cadence"]
        constraints = [
            models.UniqueConstraint(fields=["user", "cadence"], name="uniq_report_subscription_user_cadence"),
        ]

    def __str__(self) -> str:
        who = self.user.get_username() if self.user is not None else f"{self.email} (no person)"
        return f"{who} {self.cadence} ({', '.join(self.team_names) or 'every team they may see'})"

    @property
    def team_names(self) -> list[str]:
        """The named teams, whatever was stored (a blank admin field is None, never "every team")."""
        if not self.teams:
            return []
        if isinstance(self.teams, str):
            return [self.teams]
        return sorted({str(t) for t in self.teams})

    def clean(self) -> None:
        """The same rule as `add_report_subscription`: a person, existing teams that person may see."""
        from apps.reports.subscriptions import check_scope  # the rule lives with the service

        if self.teams is None or self.teams == "":
            self.teams = []
        if not isinstance(self.teams, list) or not all(isinstance(t, str) for t in self.teams):
            raise ValidationError({"teams": "A list of team names (empty: every team the person may see)."})
        user = self.user
        if user is None:
            raise ValidationError({"user": "A subscription belongs to a person."})
        if self.active:
            check_scope(user, self.teams)
        if not self.email:
            self.email = user.email


class ReportEdition(models.Model):
    """One version of one period's report for one scope, frozen when it was made (the archive)."""

    class Status(models.TextChoices):
        PROVISIONAL = "provisional"
        FINAL = "final"
        RESTATED = "restated"

    kind = models.CharField(max_length=10, choices=Cadence.choices)
    period = models.CharField(max_length=10)  # 2026-W47 or 2026-11
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    # "all" (every team, with the fleet's capacity) or "team-<a>+<b>..." (sorted team names).
    scope = models.CharField(max_length=200)
    scope_teams = models.JSONField(null=True, blank=True)  # None: all teams
    version = models.PositiveIntegerField()
    status = models.CharField(max_length=12, choices=Status.choices)
    previous = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    # Everything the e-mail prints (and more), as exact decimals in strings: see apps/reports/content.py.
    figures = models.JSONField()
    # SHA-256 of the period's own figures and files: a restatement is a final period whose digest changed.
    content_sha256 = models.CharField(max_length=64)
    csv_name = models.CharField(max_length=255)
    csv_bytes = models.BinaryField()
    csv_sha256 = models.CharField(max_length=64)
    focus_name = models.CharField(max_length=255)
    focus_bytes = models.BinaryField()
    focus_sha256 = models.CharField(max_length=64)
    # The ledger's state for the period when this edition was made, and when it was last found unchanged.
    ledger_stamp = models.CharField(max_length=64)
    checked_stamp = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-period_start", "kind", "scope", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "period", "scope", "version"], name="uniq_report_edition"),
        ]
        indexes = [models.Index(fields=["kind", "period_start"], name="reportedition_kind_start")]

    def __str__(self) -> str:
        return f"{self.period} {self.scope} v{self.version} {self.status}"


class ReportDelivery(models.Model):
    """One edition e-mailed to one subscription. The unique row is the claim: never sent twice."""

    class Status(models.TextChoices):
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"

    subscription = models.ForeignKey(ReportSubscription, on_delete=models.CASCADE, related_name="deliveries")
    edition = models.ForeignKey(ReportEdition, on_delete=models.PROTECT, related_name="deliveries")
    recipient = models.EmailField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.SENDING)
    sent_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    message_id = models.CharField(max_length=255, blank=True)
    # What was sent, as rendered (the figures and files are the edition's).
    subject = models.TextField(blank=True)
    text_body = models.TextField(blank=True)
    html_body = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["subscription", "edition"], name="uniq_report_delivery"),
        ]

    def __str__(self) -> str:
        return f"{self.edition} -> {self.recipient or self.subscription_id} {self.status}"


class ReportRun(models.Model):
    """Legacy: sends of the first weekly report (before editions). Kept read-only for the record."""

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
    csv_sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-period_start", "subscription"]
        constraints = [
            models.UniqueConstraint(fields=["subscription", "period_start"], name="uniq_report_run"),
        ]

    def __str__(self) -> str:
        return f"{self.subscription_id} {self.period_start:%Y-%m-%d} {self.status}"
