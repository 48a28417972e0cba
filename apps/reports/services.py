"""The weekly finance report: for the last complete UTC week (Monday to Monday), once every bucket of it
is final, one email per subscription with the totals per team and the week's usage as CSV attached.

The numbers come from the same selectors (and rollups) as the dashboard and the API; the CSV is the API's
`format=csv` rendering of the same query.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Min
from django.db.models import Q as Query
from django.utils import timezone

from apps.inventory.models import Cluster
from apps.reports import emails
from apps.reports.models import ReportRun, ReportSubscription
from apps.usage.exports import usage_csv
from apps.usage.models import Bucket
from apps.usage.selectors import busy_share, usage_report

log = logging.getLogger(__name__)
CSV_GROUPS = ["team", "namespace", "cluster", "gpu_model"]
# A run stuck in "sending" this long belonged to a sender that died: it may be claimed again.
STALE_SENDING = timedelta(hours=1)


def last_complete_week(now: datetime) -> tuple[datetime, datetime]:
    """[Monday 00:00, next Monday 00:00) UTC of the last week that has ended by `now`."""
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    end = today - timedelta(days=today.weekday())
    return end - timedelta(days=7), end


def unsealed_reason(start: datetime, end: datetime) -> str | None:
    """Why the period is not sealed yet (a bucket still provisional, failed or missing), or None."""
    for cluster in Cluster.objects.order_by("name"):
        buckets = Bucket.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
        first = buckets.aggregate(first=Min("hour"))["first"]
        if first is None:
            continue  # the cluster had nothing collected in the period
        expected = int((end - first).total_seconds() // 3600)
        final = buckets.filter(state=Bucket.State.FINAL, status=Bucket.Status.OK).count()
        if final < expected:
            return f"{cluster.name}: {final} of {expected} hours final"
    return None


@dataclass
class ReportOutcome:
    start: datetime
    end: datetime
    waiting: str | None = None
    sent: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def report_context(sub: ReportSubscription, start: datetime, end: datetime) -> tuple[dict, bytes]:
    """The email's context and its CSV attachment, for the teams the subscription covers."""
    teams = set(sub.teams) if sub.teams else None
    summary = usage_report(start=start, end=end, group_by=["team"], visible_teams=teams)
    naive = usage_report(start=start, end=end, group_by=[], signal="gpu_util", visible_teams=teams)
    detail = usage_report(start=start, end=end, group_by=CSV_GROUPS, visible_teams=teams)
    ctx = {
        "start": start,
        "end": end,
        "last_day": end - timedelta(days=1),
        "teams": sorted(summary.results, key=lambda r: -r["cost"]),
        "totals": summary.totals,
        "coverage": summary.coverage,
        "capacity": summary.capacity,
        "scope": ", ".join(sorted(sub.teams)) if sub.teams else "all teams",
        "dashboard_url": settings.GPUFINOPS_BASE_URL.rstrip("/") + "/?days=7",
        "busy_sm": busy_share(summary.totals),
        "busy_naive": busy_share(naive.totals),
    }
    csv_bytes = usage_csv(detail.as_dict())
    ctx["csv_sha256"] = hashlib.sha256(csv_bytes).hexdigest()
    return ctx, csv_bytes


def _claim(sub: ReportSubscription, start: datetime, end: datetime, now: datetime) -> ReportRun | None:
    """The run to send, or None when it was sent or another sender is on it (the unique row is the lock)."""
    run, created = ReportRun.objects.get_or_create(
        subscription=sub, period_start=start, defaults={"period_end": end}
    )
    if created:
        return run
    retry = Query(status=ReportRun.Status.FAILED) | Query(
        status=ReportRun.Status.SENDING, created_at__lt=now - STALE_SENDING
    )
    claimed = ReportRun.objects.filter(retry, pk=run.pk).update(status=ReportRun.Status.SENDING, created_at=now)
    return run if claimed else None


def send_weekly_reports(*, now: datetime | None = None, force: bool = False) -> ReportOutcome:
    """Send the last complete week's report to every active subscription that has not had it."""
    now = now or timezone.now()
    start, end = last_complete_week(now)
    outcome = ReportOutcome(start, end)
    waiting = unsealed_reason(start, end)
    if waiting and not force:
        outcome.waiting = waiting
        log.info("weekly report %s not sent yet: %s", start.date(), waiting)
        return outcome
    for sub in ReportSubscription.objects.filter(active=True):
        run = _claim(sub, start, end, now)
        if run is None:
            outcome.skipped.append(sub.email)
            continue
        try:
            ctx, csv_bytes = report_context(sub, start, end)
            ctx["sealed"] = waiting is None
            emails.weekly_report(sub.email, ctx, csv_bytes).send()
        except Exception as exc:  # SMTP down, bad address: recorded and retried on the next run
            ReportRun.objects.filter(pk=run.pk).update(status=ReportRun.Status.FAILED, error=str(exc)[:2000])
            outcome.failed[sub.email] = str(exc)
            log.warning("weekly report to %s failed: %s", sub.email, exc)
            continue
        ReportRun.objects.filter(pk=run.pk).update(
            status=ReportRun.Status.SENT, sent_at=timezone.now(), error="", csv_sha256=ctx["csv_sha256"]
        )
        outcome.sent.append(sub.email)
    return outcome
