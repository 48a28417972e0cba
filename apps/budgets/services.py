"""Writes of the budgets: set a budget, check every budget and tell its team once per threshold (docs/budgets.md).

`check_budgets` is what the beat runs (hourly; command twin `manage.py check_budgets`): for each active budget it
computes the period's spend and forecast, records one alert per (budget, period, threshold, basis, recipient)
crossed (a unique key: collecting the same hours again never repeats one), then sends the pending ones through the
findings' channels: e-mail to each team member with an address who has not opted out of the team's notifications,
and each of the team's enabled webhooks (`TeamChannel`). A failed send is retried with backoff, then given up.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

import requests
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone

from apps.budgets.models import Budget, BudgetAlert
from apps.budgets.selectors import BudgetStatus, active_budgets, budget_status
from apps.findings.models import TeamChannel
from apps.findings.notifications import recipients
from apps.inventory.models import Cluster, Team
from apps.inventory.teams import is_valid_team_name

log = logging.getLogger(__name__)
BASES = (BudgetAlert.Basis.ACTUAL, BudgetAlert.Basis.FORECAST)


def set_budget(team_name: str, amount: Decimal, *, period: str = Budget.Period.MONTHLY, cluster: str = "",
               namespace: str = "", thresholds: Sequence[int] = (80, 100), active: bool = True) -> Budget:
    """Create or change the budget of a team (optionally in one cluster or namespace) for weekly or monthly periods.
    Raises ValidationError naming the field for an unknown team or cluster, a bad amount or thresholds."""
    if not is_valid_team_name(team_name) or not Team.objects.filter(name=team_name).exists():
        raise ValidationError({"team": [f"No team named {team_name[:80]!r}."]})
    if period not in Budget.Period.values:
        raise ValidationError({"period": [f"{period[:20]!r}: expected weekly or monthly."]})
    if not amount.is_finite() or amount <= 0 or amount >= Decimal("1e12"):
        raise ValidationError({"amount": ["A positive amount in USD, under 10^12."]})
    marks = sorted({int(t) for t in thresholds})
    if not marks or any(t <= 0 or t > 1000 for t in marks):
        raise ValidationError({"thresholds": ["Percentages between 1 and 1000, e.g. 80,100."]})
    if len(namespace) > 253:
        raise ValidationError({"namespace": ["A namespace name is at most 253 characters."]})
    target = None
    if cluster:
        target = Cluster.objects.filter(name=cluster).first()
        if target is None:
            raise ValidationError({"cluster": [f"No cluster named {cluster[:80]!r}."]})
    budget, _ = Budget.objects.update_or_create(
        team=Team.objects.get(name=team_name), cluster=target, namespace=namespace, period=period,
        defaults={"amount": amount.quantize(Decimal("0.01")), "thresholds": marks, "active": active},
    )
    return budget


@dataclass
class CheckReport:
    budgets: int = 0
    planned: int = 0
    sent: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def plan_alerts(status: BudgetStatus, budget: Budget, now: datetime) -> int:
    """Record an alert for every threshold the status crossed, per recipient, unless recorded before."""
    people = recipients(budget.team)
    channels = list(TeamChannel.objects.filter(team=budget.team, enabled=True))
    rows = []
    for basis in BASES:
        for threshold in status.crossed(basis):
            common = {"budget": budget, "period_start": status.start, "threshold": threshold, "basis": basis,
                      "spend": status.actual, "forecast": status.forecast.expected, "created_at": now}
            rows += [BudgetAlert(channel=BudgetAlert.Channel.EMAIL, recipient=u.email[:320], user=u, **common)
                     for u in people]
            rows += [BudgetAlert(channel=BudgetAlert.Channel.WEBHOOK, recipient=str(c.pk), team_channel=c, **common)
                     for c in channels]
    if not rows:
        return 0
    before = BudgetAlert.objects.count()
    BudgetAlert.objects.bulk_create(rows, ignore_conflicts=True)
    return BudgetAlert.objects.count() - before


def describe(alert: BudgetAlert, status: BudgetStatus) -> dict[str, object]:
    """What an alert says (the e-mail's and the webhook's figures)."""
    budget = alert.budget
    scope = " ".join(p for p in (f"cluster {status.cluster}" if status.cluster else "",
                                 f"namespace {status.namespace}" if status.namespace else "") if p)
    what = "spent" if alert.basis == BudgetAlert.Basis.ACTUAL else "forecast to spend"
    # The figures seen when the threshold was crossed (a retry later tells the same), the range as it is now.
    expected = alert.forecast if alert.forecast is not None else status.forecast.expected
    base = settings.GPUFINOPS_BASE_URL.rstrip("/")
    return {
        "team": budget.team.name, "scope": scope, "period": status.label, "basis": alert.basis,
        "threshold": alert.threshold, "amount": str(budget.amount), "spend": str(alert.spend.quantize(Decimal("0.01"))),
        "forecast": str(expected), "forecast_low": str(status.forecast.low),
        "forecast_high": str(status.forecast.high), "end": status.end.isoformat(),
        "text": (f"Team {budget.team.name}{' (' + scope + ')' if scope else ''} has {what} "
                 f"{(alert.spend if alert.basis == BudgetAlert.Basis.ACTUAL else expected):.2f} USD "
                 f"of its {status.period} budget of {budget.amount} USD for {status.label}: past {alert.threshold} %."),
        "url": f"{base}/budgets/?team={budget.team.name}",
    }


def _send(alert: BudgetAlert, status: BudgetStatus, connection) -> None:
    d = describe(alert, status)
    if alert.channel == BudgetAlert.Channel.EMAIL:
        ctx = {"d": d, "status": status}
        msg = EmailMultiAlternatives(" ".join(render_to_string("budgets/alert-subject.txt", ctx).split()),
                                     render_to_string("budgets/alert-body.txt", ctx), settings.DEFAULT_FROM_EMAIL,
                                     [alert.recipient], connection=connection)
        msg.send()
        return
    channel = alert.team_channel
    if channel is None:
        raise RuntimeError("the alert's team channel is gone")
    payload = {"text": f"[gpufinops] {d['text']} {d['url']}", "budget": d}
    response = requests.post(channel.url, data=json.dumps(payload, default=str),
                             headers={"Content-Type": "application/json"}, timeout=settings.GPUFINOPS_WEBHOOK_TIMEOUT)
    if response.status_code >= 300:
        raise RuntimeError(f"webhook answered HTTP {response.status_code}")


def check_budgets(now: datetime | None = None) -> CheckReport:
    """Check every active budget, record the thresholds newly crossed, send what is due."""
    now = now or timezone.now()
    report = CheckReport()
    statuses: dict[int, BudgetStatus] = {}
    for budget in active_budgets():
        status = budget_status(budget, now)
        statuses[budget.pk] = status
        report.budgets += 1
        report.planned += plan_alerts(status, budget, now)
    due = (BudgetAlert.objects.filter(status=BudgetAlert.Status.PENDING)
           .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
           .select_related("budget", "budget__team", "budget__cluster", "team_channel").order_by("created_at", "id"))
    by_budget: dict[int, list[BudgetAlert]] = defaultdict(list)
    for alert in due:
        by_budget[alert.budget_id].append(alert)
    connection = get_connection() if by_budget else None
    for budget_id, alerts in by_budget.items():
        for alert in alerts:
            status = statuses.get(budget_id) or budget_status(alert.budget, now)
            try:
                _send(alert, status, connection)
            except Exception as exc:  # SMTP, HTTP, DNS...: recorded, retried with backoff
                report.failed += 1
                report.errors.append(f"{alert.channel} {alert.recipient}: {type(exc).__name__}: {exc}"[:300])
                log.warning("budget alert to %s %s failed: %s", alert.channel, alert.recipient, exc)
                alert.attempts += 1
                alert.last_error = f"{type(exc).__name__}: {exc}"[:2000]
                if alert.attempts >= settings.GPUFINOPS_NOTIFY_MAX_ATTEMPTS:
                    alert.status, alert.next_attempt_at = BudgetAlert.Status.FAILED, None
                else:
                    alert.next_attempt_at = now + timedelta(seconds=min(60 * 2 ** (alert.attempts - 1), 3600))
                alert.save(update_fields=["attempts", "last_error", "status", "next_attempt_at"])
                continue
            report.sent += 1
            BudgetAlert.objects.filter(pk=alert.pk).update(status=BudgetAlert.Status.SENT, sent_at=now,
                                                          attempts=alert.attempts + 1, last_error="")
    return report
