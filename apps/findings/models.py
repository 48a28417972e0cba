"""Findings: everything the product flags, one shape (docs/findings.md, interfaces.md `/api/v1/findings/`).

`FindingHour` is one subject's contribution in one (cluster, hour): written whole for the hour each time its
bucket is collected, like the ledger's rows. `Finding` is a run of consecutive flagged hours of one subject
(start, last hour, end null while ongoing) whose figures are the exact sums of its hours: GPU-hours are kept as
decimals (to 1e-9) like money, so updating a run by one hour's difference is exact and re-collecting an hour
leaves both tables identical. Notifications are recorded per finding, channel and recipient.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.common import secrets
from apps.common.redaction import redact_url
from apps.findings.constants import Kind
from apps.inventory.models import Team
from apps.usage.models import ClusterKey, Money


def GpuHours(**kwargs) -> models.DecimalField:  # noqa: N802 (a field factory, read like a field class)
    """GPU-hours as an exact decimal (to 1e-9), so a run's figures are exact sums of its hours in any order."""
    return models.DecimalField(max_digits=24, decimal_places=9, **kwargs)


class Figures(models.Model):
    """Who a finding is about and what it cost.

    `gpu_hours`/`cost` are the finding's own figures (idle GPU-hours, infra loss, waiting time... per kind,
    docs/findings.md); `allocated_*` what the subject held and was charged in those hours.
    An empty `team` is the platform's (seen by staff and finance only).
    """

    cluster = ClusterKey(related_name="+")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    subject = models.CharField(max_length=700)  # unique within (cluster, kind): pod uid, node/uuid/holder, ...
    team = models.CharField(max_length=100, blank=True)
    namespace = models.CharField(max_length=253, blank=True)
    workload = models.CharField(max_length=320, blank=True)
    pod = models.CharField(max_length=253, blank=True)
    node = models.CharField(max_length=253, blank=True)
    gpu_uuid = models.CharField(max_length=100, blank=True)
    gpu_hours = GpuHours(default=0)
    cost = Money(default=0)
    unpriced_gpu_hours = GpuHours(default=0)  # part of gpu_hours on GPU models without a price (cost unknown)
    allocated_gpu_hours = GpuHours(default=0)
    allocated_cost = Money(default=0)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        abstract = True


class FindingHour(Figures):
    """One subject's contribution in one hour: replaced whole with its bucket (or snapshot hour)."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "hour", "kind", "subject"], name="uniq_findinghour"),
        ]
        indexes = [
            models.Index(fields=["cluster", "kind", "subject", "hour"], name="findinghour_subject"),
            models.Index(fields=["kind", "hour"], name="findinghour_kind_hour"),
            models.Index(fields=["team", "hour"], name="findinghour_team_hour"),
        ]


class Finding(Figures):
    """A run of consecutive flagged hours of one subject: [start, end), end null while it goes on."""

    start = models.DateTimeField()
    last_hour = models.DateTimeField()  # the run's last flagged hour
    end = models.DateTimeField(null=True, blank=True)  # last_hour + 1 h once a later hour was collected
    hours = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["-start", "kind", "subject"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "kind", "subject", "start"], name="uniq_finding"),
        ]
        indexes = [
            models.Index(fields=["cluster", "kind", "last_hour"], name="finding_cluster_kind_last"),
            models.Index(fields=["team", "last_hour"], name="finding_team_last"),
            models.Index(fields=["kind", "last_hour"], name="finding_kind_last"),
            models.Index(fields=["end"], name="finding_end"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.subject} from {self.start:%Y-%m-%dT%H:00Z}"

    @property
    def ongoing(self) -> bool:
        return self.end is None


class TeamChannel(models.Model):
    """A team's generic JSON webhook (e.g. a chat incoming webhook). The URL is a credential: stored encrypted
    (apps/common/secrets.py) and never shown in full."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="finding_channels")
    name = models.SlugField(max_length=100)
    url_encrypted = models.TextField(editable=False)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="uniq_team_channel")]

    def __str__(self) -> str:
        return f"{self.team.name}/{self.name} ({self.masked_url})"

    @property
    def url(self) -> str:
        return secrets.decrypt(self.url_encrypted)

    @url.setter
    def url(self, value: str) -> None:
        self.url_encrypted = secrets.encrypt(value)

    @property
    def masked_url(self) -> str:
        """Scheme, host and port only: enough to tell channels apart, nothing to post with."""
        try:
            return redact_url(self.url)
        except secrets.SecretError:
            return "(unreadable)"


class NotificationOptOut(models.Model):
    """A person who does not want findings e-mailed: for one team, or for every team (team null)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="finding_opt_outs")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="uniq_optout_team"),
            models.UniqueConstraint(fields=["user"], condition=models.Q(team__isnull=True), name="uniq_optout_all"),
        ]

    def __str__(self) -> str:
        return f"{self.user} opted out of {self.team.name if self.team is not None else 'every team'}"


class Notification(models.Model):
    """One finding told to one recipient on one channel: recorded once (never repeated), retried on failure."""

    class Channel(models.TextChoices):
        EMAIL = "email"
        WEBHOOK = "webhook"

    class Status(models.TextChoices):
        PENDING = "pending"  # to send (or to retry after next_attempt_at)
        SENT = "sent"
        DIGEST = "digest"  # over the rate limit: told within one summary message
        FAILED = "failed"  # gave up after GPUFINOPS_NOTIFY_MAX_ATTEMPTS

    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="notifications")
    team = models.CharField(max_length=100)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    recipient = models.CharField(max_length=320)  # an e-mail address, or the webhook channel's id
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                             related_name="+")
    team_channel = models.ForeignKey(TeamChannel, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    message = models.CharField(max_length=32, blank=True)  # the message it went out in (a summary tells several)
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["finding", "channel", "recipient"], name="uniq_notification"),
        ]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="notification_due"),
            models.Index(fields=["team", "channel", "sent_at"], name="notification_rate"),
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.recipient}: {self.finding} ({self.status})"
