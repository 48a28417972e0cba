"""Reads of the budgets: each budget's period, spend so far, forecast and thresholds crossed (docs/budgets.md).

Spend is the price card's cost of the budget's scope in the ledger (`UsageHour.cost`: the team's pods, in the
cluster and namespace when the budget names them), over `[period start, now)`; the forecast is
`apps.budgets.forecast` over the scope's daily spend (`UsageDay`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db.models import Q, QuerySet, Sum

from apps.budgets.forecast import HISTORY_DAYS, Forecast, forecast
from apps.budgets.models import Budget
from apps.common.periods import period_containing
from apps.common.timeutils import floor_day, floor_hour
from apps.usage.models import UsageDay, UsageHour
from apps.usage.money import ZERO, to_decimal

# A forecast resting on fewer whole days raises no alert (a first day's run rate is mostly noise).
FORECAST_ALERT_MIN_DAYS = 3


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime, str]:
    """The budget period containing `now` (the one period rule): `[start, end)` UTC and its label."""
    p = period_containing(period, now)
    return p.start, p.end, p.label


@dataclass(frozen=True)
class BudgetStatus:
    budget_id: int
    team: str
    cluster: str  # "" for every cluster
    namespace: str  # "" for every namespace
    period: str
    label: str
    start: datetime
    end: datetime
    amount: Decimal
    thresholds: tuple[int, ...]
    forecast: Forecast

    @property
    def actual(self) -> Decimal:
        return self.forecast.actual

    @property
    def used_share(self) -> float | None:
        return float(self.actual / self.amount) if self.amount else None

    @property
    def forecast_share(self) -> float | None:
        return float(self.forecast.expected / self.amount) if self.amount else None

    def crossed(self, basis: str) -> list[int]:
        """The thresholds (percent) crossed by the actual spend, or by the forecast (only once it rests on
        FORECAST_ALERT_MIN_DAYS whole days)."""
        if basis == "forecast":
            if self.forecast.history_days < FORECAST_ALERT_MIN_DAYS:
                return []
            value = self.forecast.expected
        else:
            value = self.actual
        return [t for t in self.thresholds if value >= self.amount * t / 100]

    def as_dict(self) -> dict[str, object]:
        return {"id": self.budget_id, "team": self.team, "cluster": self.cluster or None,
                "namespace": self.namespace or None, "period": self.period, "label": self.label,
                "start": self.start, "end": self.end, "amount": self.amount, "thresholds": list(self.thresholds),
                "actual": self.actual, "used_share": self.used_share, "forecast": self.forecast.as_dict(),
                "forecast_share": self.forecast_share, "crossed_actual": self.crossed("actual"),
                "crossed_forecast": self.crossed("forecast")}


def _scoped(qs: QuerySet, budget: Budget) -> QuerySet:
    qs = qs.filter(team=budget.team.name)
    if budget.cluster_id is not None:
        qs = qs.filter(cluster_id=budget.cluster_id)
    if budget.namespace:
        qs = qs.filter(namespace=budget.namespace)
    return qs


def spend(budget: Budget, start: datetime, end: datetime) -> Decimal:
    """The price card's cost of the budget's scope over `[start, end)`, exact."""
    total = _scoped(UsageHour.objects.filter(hour__gte=start, hour__lt=end), budget).aggregate(c=Sum("cost"))["c"]
    return to_decimal(total)


def daily_spend(budget: Budget, now: datetime) -> dict[date, Decimal]:
    """The scope's spend per whole UTC day over the forecast's history."""
    today = floor_day(now).date()
    rows = (_scoped(UsageDay.objects.filter(day__gte=today - timedelta(days=HISTORY_DAYS), day__lt=today), budget)
            .values("day").annotate(c=Sum("cost")))
    return {row["day"]: to_decimal(row["c"]) for row in rows}


def budget_status(budget: Budget, now: datetime) -> BudgetStatus:
    start, end, label = period_bounds(budget.period, now)
    # The ledger's hours end at the current hour: the spend is what the ended and current hours recorded.
    actual = spend(budget, start, min(end, floor_hour(now) + timedelta(hours=1)))
    return BudgetStatus(
        budget_id=budget.pk, team=budget.team.name, cluster=budget.cluster.name if budget.cluster else "",
        namespace=budget.namespace, period=budget.period, label=label, start=start, end=end,
        amount=budget.amount, thresholds=tuple(sorted(int(t) for t in budget.thresholds)),
        forecast=forecast(start=start, end=end, now=now, actual=actual, daily=daily_spend(budget, now)),
    )


def active_budgets(*, visible_teams: set[str] | None = None, teams: Iterable[str] = ()) -> QuerySet[Budget]:
    qs = Budget.objects.filter(active=True).select_related("team", "cluster")
    if visible_teams is not None:
        qs = qs.filter(team__name__in=sorted(visible_teams))
    names = sorted(set(teams))
    if names:
        qs = qs.filter(Q(team__name__in=names))
    return qs


def budget_statuses(*, now: datetime, visible_teams: set[str] | None = None,
                    teams: Iterable[str] = ()) -> list[BudgetStatus]:
    """Every active budget's status, in a fixed number of queries however many budgets there are (the overview shows
    them): the spend of each period kind and the daily history are read once, grouped by team, cluster and namespace,
    and each budget adds up the groups of its scope."""
    budgets = list(active_budgets(visible_teams=visible_teams, teams=teams))
    if not budgets:
        return []
    names = sorted({b.team.name for b in budgets})
    today = floor_day(now).date()
    daily_rows = (UsageDay.objects.filter(team__in=names, day__gte=today - timedelta(days=HISTORY_DAYS), day__lt=today)
                  .values_list("team", "cluster_id", "namespace", "day").annotate(c=Sum("cost")))
    until = floor_hour(now) + timedelta(hours=1)
    spent: dict[str, list[tuple[str, int, str, Decimal]]] = {}
    for kind in sorted({b.period for b in budgets}):
        start, _, _ = period_bounds(kind, now)
        spent[kind] = [(t, c, n, to_decimal(v)) for t, c, n, v in (
            UsageHour.objects.filter(team__in=names, hour__gte=start, hour__lt=until)
            .values_list("team", "cluster_id", "namespace").annotate(c=Sum("cost")))]
    daily = [(t, c, n, d, to_decimal(v)) for t, c, n, d, v in daily_rows]
    out = []
    for b in budgets:
        def mine(team: str, cluster_id: int, namespace: str, b: Budget = b) -> bool:
            return (team == b.team.name and (b.cluster_id is None or cluster_id == b.cluster_id)
                    and (not b.namespace or namespace == b.namespace))

        start, end, label = period_bounds(b.period, now)
        actual = sum((v for t, c, n, v in spent[b.period] if mine(t, c, n)), ZERO)
        history: dict[date, Decimal] = {}
        for t, c, n, d, v in daily:
            if mine(t, c, n):
                history[d] = history.get(d, ZERO) + v
        out.append(BudgetStatus(
            budget_id=b.pk, team=b.team.name, cluster=b.cluster.name if b.cluster else "", namespace=b.namespace,
            period=b.period, label=label, start=start, end=end, amount=b.amount,
            thresholds=tuple(sorted(int(t) for t in b.thresholds)),
            forecast=forecast(start=start, end=end, now=now, actual=actual, daily=history)))
    return out


@dataclass(frozen=True)
class SpendForecast:
    """The forecast end-of-period spend of some teams (or the fleet) in one period: the overviews and the report."""

    label: str
    start: datetime
    end: datetime
    teams: tuple[str, ...] | None  # None: every team (the fleet's spend charged to teams)
    forecast: Forecast

    def as_dict(self) -> dict[str, object]:
        return {"period": self.label, "start": self.start, "end": self.end,
                "teams": None if self.teams is None else list(self.teams), **self.forecast.as_dict()}


def spend_forecast(*, now: datetime, start: datetime, end: datetime, label: str,
                   teams: Iterable[str] | None = None) -> SpendForecast:
    """The price-card spend of `teams` (None: every team) in `[start, end)` so far and its forecast at `now`: the
    same `forecast` the budgets use, over the same tables (UsageHour for the spend, UsageDay for the history)."""
    names = None if teams is None else tuple(sorted(set(teams)))
    hours = UsageHour.objects.filter(hour__gte=start, hour__lt=min(end, floor_hour(now) + timedelta(hours=1)))
    today = floor_day(now).date()
    days = UsageDay.objects.filter(day__gte=today - timedelta(days=HISTORY_DAYS), day__lt=today)
    if names is not None:
        hours, days = hours.filter(team__in=names), days.filter(team__in=names)
    actual = to_decimal(hours.aggregate(c=Sum("cost"))["c"])
    daily = {row["day"]: to_decimal(row["c"]) for row in days.values("day").annotate(c=Sum("cost"))}
    return SpendForecast(label=label, start=start, end=end, teams=names,
                         forecast=forecast(start=start, end=end, now=now, actual=actual, daily=daily))


def period_forecast(now: datetime, period: str = "monthly", teams: Iterable[str] | None = None) -> SpendForecast:
    """The forecast of the budget period (weekly or monthly) containing `now`."""
    start, end, label = period_bounds(period, now)
    return spend_forecast(now=now, start=start, end=end, label=label, teams=teams)


def fleet_spend(now: datetime, period: str) -> tuple[str, Decimal]:
    """The whole fleet's price-card spend in the period containing `now` (for the budgets page's header)."""
    start, _, label = period_bounds(period, now)
    total = UsageHour.objects.filter(hour__gte=start, hour__lt=floor_hour(now) + timedelta(hours=1)).aggregate(
        c=Sum("cost"))["c"]
    return label, to_decimal(total) if total is not None else ZERO
