"""What one period's report says for one scope: every figure the e-mail prints, and its files.

Figures come from the same selector as the API (`apps.usage.selectors.usage_report`) with the scope as the
caller's visibility, so each printed figure is the API's figure for the same period and scope rounded to the
cent (or 0.1 GPU-hour / 0.1 %). Printed columns add up (ledger.md "Money"): rows are apportioned to the
printed total by largest remainder (`apps.usage.money.apportion`), so a printed row may differ from the
API's exact figure by less than one cent, and a printed total is always the sum of the printed rows:

* all teams: [charged to teams, unallocated] are apportioned to the capacity cost, then the teams to the
  printed "charged"; so printed charged + unallocated = printed capacity cost;
* some teams: the teams are apportioned to their total cost.

Changes against the previous period are differences of printed figures (so they add up too); changes
against the average of the previous 4 weeks (3 months) are rounded from exact figures.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings

from apps.billing.selectors import BilledCosts, Reconciliation, bill_lines_between, billed_costs, reconciliation
from apps.budgets.selectors import SpendForecast, spend_forecast
from apps.findings.selectors import TeamInfraLoss, infra_loss_by_team
from apps.reports import focus, statement
from apps.reports.periods import MONTHLY, Period, PeriodState, comparison_periods, period_state
from apps.reports.selectors import IdleItem, top_idle
from apps.reports.statement import UNALLOCATED
from apps.usage import money
from apps.usage.activity import DEFAULT_METRICS, default_signal
from apps.usage.exports import usage_csv
from apps.usage.figures import not_comparable
from apps.usage.models import Bucket
from apps.usage.selectors import UsageReport, usage_report

CSV_GROUPS = ["team", "namespace", "cluster", "gpu_model"]


@dataclass(frozen=True)
class Scope:
    """Who a report is about: every team with the fleet's capacity (teams None), or some teams."""

    teams: frozenset[str] | None = None

    @property
    def fleet(self) -> bool:
        return self.teams is None

    @property
    def visible_teams(self) -> set[str] | None:
        return None if self.teams is None else set(self.teams)

    @property
    def key(self) -> str:
        """`all`, or `team-<a>+<b>` (sorted names; long lists shortened with a digest)."""
        if self.teams is None:
            return "all"
        key = "team-" + "+".join(sorted(self.teams))
        if len(key) > 120:
            digest = hashlib.sha256(key.encode()).hexdigest()[:12]
            key = f"teams-{len(self.teams)}-{digest}"
        return key

    @property
    def label(self) -> str:
        if self.teams is None:
            return "all teams"
        names = sorted(self.teams)
        return ("team " if len(names) == 1 else "teams ") + ", ".join(names)


def scope_from(teams: Sequence[str] | None) -> Scope:
    return Scope(None if teams is None else frozenset(teams))


# ---- Building: gather the usage reports, then the pure phases of `apps.reports.statement` ----


@dataclass(frozen=True)
class Content:
    """A report's figures (JSON-ready) and files, with the digest a restatement is detected by."""

    figures: dict[str, Any]
    csv: bytes
    focus: bytes
    content_sha256: str


def _not_comparable(period: Period, now: datetime) -> str | None:
    """Why a period cannot be compared with (`apps.usage.figures.not_comparable`), None when it can: a change is
    shown only against a period with comparable coverage (GPUFINOPS_COMPARE_MIN_FINAL of its hours final)."""
    if not Bucket.objects.filter(hour__gte=period.start, hour__lt=period.end).exists():
        return "no data"
    return not_comparable(period_state(period, now).ratio, settings.GPUFINOPS_COMPARE_MIN_FINAL)


@dataclass(frozen=True)
class Gathered:
    """Everything a report of one period and scope reads from the ledger and the findings."""

    state: PeriodState
    current: UsageReport
    previous_period: Period
    previous: UsageReport | None  # None when the previous period's coverage is not comparable
    previous_reason: str | None  # why not (no data, too few final hours); None when it is
    history_periods: list[Period]  # the comparison periods with comparable coverage
    history: list[UsageReport]
    fleet: bool  # every team, with the fleet's capacity and the unallocated row
    infra_loss: dict[str, TeamInfraLoss]
    credited: bool  # GPUFINOPS_INFRA_LOSS_CREDIT: infra loss is credited back (a net line)
    idle_kind: str
    idle: list[IdleItem]
    csv: bytes
    focus: bytes
    billed: BilledCosts | None = None  # the billed basis, when a cloud bill covers the period
    reconciled: Reconciliation | None = None  # a month's price card against its bill (fleet scope, with a bill)
    forecast: SpendForecast | None = None  # monthly: the month in progress (this one, or the one after it)


def month_forecast(period: Period, scope: Scope, now: datetime) -> SpendForecast | None:
    """A monthly report's forecast (apps.budgets: the budgets' forecast, one home): of its own month while it is in
    progress, else of the month after it while that one is (the month-end e-mail says where the new month is
    heading); None for a week, or a month rebuilt long after."""
    if period.kind != MONTHLY:
        return None
    target = period if now < period.end else period.following()
    if not target.start <= now < target.end:
        return None
    return spend_forecast(now=now, start=target.start, end=target.end, label=target.label, teams=scope.teams)


def forecast_json(f: SpendForecast, period: Period) -> dict[str, Any]:
    """The forecast in cents, as the e-mail and the API print it; `of` says whose month it is."""
    fc = f.forecast
    return {"period": f.label, "of": "this" if f.label == period.label else "next",
            "start": f.start.isoformat(), "end": f.end.isoformat(), "history_days": fc.history_days,
            "actual": str(money.cents(fc.actual)), "expected": str(money.cents(fc.expected)),
            "low": str(money.cents(fc.low)), "high": str(money.cents(fc.high)),
            "run_rate_per_day": str(money.cents(fc.run_rate)), "method": "docs/numbers.md, Forecast"}


def gather(period: Period, scope: Scope, *, now: datetime, signal: str) -> Gathered:
    """The usage reports of the period, the previous one and the comparison periods, the infra loss, the top idle
    workloads and the files, for `scope` (the caller's visibility)."""
    visible = scope.visible_teams

    def report(p: Period, group_by: list[str]) -> UsageReport:
        return usage_report(start=p.start, end=p.end, group_by=group_by, signal=signal, visible_teams=visible)

    current = report(period, ["team"])
    previous = period.previous()
    previous_reason = _not_comparable(previous, now)
    history = [p for p in comparison_periods(period) if _not_comparable(p, now) is None]
    idle_kind, idle = top_idle(start=period.start, end=period.end, visible_teams=visible, signal=signal)
    billed = bool(bill_lines_between(period.start, period.end))
    return Gathered(
        state=period_state(period, now), current=current, previous_period=previous,
        previous=report(previous, ["team"]) if previous_reason is None else None, previous_reason=previous_reason,
        history_periods=history, history=[report(p, ["team"]) for p in history],
        fleet=scope.fleet and current.capacity is not None,
        infra_loss=infra_loss_by_team(start=period.start, end=period.end, visible_teams=visible),
        credited=settings.GPUFINOPS_INFRA_LOSS_CREDIT, idle_kind=idle_kind, idle=idle,
        csv=usage_csv(report(period, CSV_GROUPS).as_dict()),
        focus=focus.focus_csv(start=period.start, end=period.end, scope=focus.FocusScope(scope.teams),
                              granularity="day", signal=signal),
        billed=billed_costs(start=period.start, end=period.end, visible_teams=visible) if billed else None,
        reconciled=reconciliation(period.label) if billed and period.kind == MONTHLY and scope.fleet else None,
        forecast=month_forecast(period, scope, now),
    )


def build_content(period: Period, scope: Scope, *, now: datetime, signal: str | None = None) -> Content:
    """Every figure and file of the report of `period` for `scope`, as the ledger has them now."""
    signal = signal or default_signal()
    g = gather(period, scope, now=now, signal=signal)
    figures = content_figures(period, scope, signal, g)
    return Content(figures=figures, csv=g.csv, focus=g.focus, content_sha256=content_digest(figures, g.credited))


def content_figures(period: Period, scope: Scope, signal: str, g: Gathered) -> dict[str, Any]:
    """The figures of a report (pure over what `gather` read): printed per team, changes, movers, idle workloads,
    infra loss, as the JSON the edition stores."""
    cur, fleet = g.current, g.fleet
    teams = statement.team_order(cur, g.previous)
    printed = cur.printed_rows(teams, fleet=fleet)
    printed_prev = g.previous.printed_rows(teams, fleet=fleet) if g.previous else None
    rows = statement.team_rows(teams, cur, printed, printed_prev, g.history)
    if fleet and cur.capacity is not None:
        rows.append(statement.unallocated_row(cur.capacity, printed, printed_prev, g.history))
    total = statement.total_row(cur, printed, printed_prev, g.history, fleet)
    loss = statement.infra_loss(teams, g.infra_loss)
    return {
        "period": period.label, "kind": period.kind, "start": period.start.isoformat(), "end": period.end.isoformat(),
        "billing_month": period.billing_month(),
        "scope": {"key": scope.key, "teams": None if scope.teams is None else sorted(scope.teams),
                  "label": scope.label, "fleet": fleet},
        "signal": signal, "signal_metric": DEFAULT_METRICS.get(signal, signal), "currency": "USD",
        "coverage": g.state.as_dict(),
        "totals": statement.figures_json(cur.totals),
        "capacity": statement.figures_json(cur.capacity) if fleet and cur.capacity is not None else None,
        "headline": statement.headline_json(cur, printed, loss, fleet=fleet, credited=g.credited),
        "rows": [statement.row_json(r, loss.by_team.get(r.name) if r.kind == "team" else None) for r in rows],
        "total_row": statement.total_json(total, loss),
        "previous": {"period": g.previous_period.label, "available": g.previous is not None,
                     "reason": g.previous_reason},
        "average": {"periods": [p.label for p in g.history_periods], "count": len(g.history_periods),
                    "of": len(comparison_periods(period))},
        "movers": statement.movers_json(statement.movers(rows)),
        "top_idle": {"kind": g.idle_kind, "rows": statement.idle_json(g.idle)},
        "files": {"csv_sha256": hashlib.sha256(g.csv).hexdigest(), "focus_sha256": hashlib.sha256(g.focus).hexdigest(),
                  "csv_bytes": len(g.csv), "focus_bytes": len(g.focus)},
        "billed": billed_json(g.billed, fleet) if g.billed is not None else None,
        "reconciliation": reconciliation_json(g.reconciled) if g.reconciled is not None else None,
        # Not in the content digest: a forecast moves every day, it never restates the period.
        "forecast": forecast_json(g.forecast, period) if g.forecast is not None else None,
    }


def reconciliation_json(r: Reconciliation) -> dict[str, Any]:
    """The month's reconciliation for the monthly e-mail (the same figures as /api/v1/reconciliation/, in cents)."""
    return {
        "basis": r.basis,
        "clusters": [{"cluster": c.cluster, "price_card_cost": str(money.cents(c.price_card_cost)),
                      "billed_cost": str(money.cents(c.billed_cost)), "variance": str(money.cents(c.variance)),
                      "variance_share": c.variance_share, "nodes_without_bill": [n.node for n in c.nodes_without_bill]}
                     for c in r.clusters],
        "unmatched_lines": len(r.unmatched), "unmatched_cost": str(money.cents(r.unmatched_cost)),
    }


def billed_json(billed: BilledCosts, fleet: bool) -> dict[str, Any]:
    """The period in the billed basis (docs/billing.md), apart from the price-card figures and named by its basis,
    never mixed with them: per team its share of its nodes' bill and its unbilled GPU-hours, for finance the
    unallocated share; printed in cents apportioned to the printed total (so the rows add up)."""
    names = [t.team for t in billed.teams]
    exact = [t.cost for t in billed.teams]
    if fleet and billed.unallocated_cost is not None:
        names.append(UNALLOCATED)
        exact.append(billed.unallocated_cost)
    printed = money.apportion(exact)
    unbilled = {t.team: t.unbilled_gpu_hours for t in billed.teams}
    return {
        "basis": billed.basis, "bill_lines": billed.bill_lines,
        "rows": [{"name": n, "cost": str(money.micro(e)), "cost_printed": str(p),
                  "unbilled_gpu_hours": round(unbilled.get(n, 0.0), 6)} for n, e, p in zip(names, exact, printed,
                                                                                         strict=True)],
        "total": str(money.micro(sum(exact, money.ZERO))), "total_printed": str(sum(printed, money.ZERO)),
        "unbilled_gpu_hours": round(billed.unbilled_gpu_hours, 6),
    }


def content_digest(figures: dict[str, Any], credited: bool) -> str:
    """What a restatement is detected by: the exact figures and the files (not the printed ones, nor the
    comparisons, which change with other periods)."""
    own = {"totals": figures["totals"], "capacity": figures["capacity"], "coverage": figures["coverage"],
           "rows": [{k: r[k] for k in ("name", "cost", "gpu_hours", "idle_gpu_hours", "idle_cost",
                                        "unpriced_gpu_hours")} for r in figures["rows"]], "files": figures["files"]}
    if credited:  # credited infra loss changes what teams pay: a change of it restates the period
        own["infra_loss"] = {r["name"]: r["infra_loss_cost"] for r in figures["rows"]}
    if figures.get("billed"):  # a bill imported (or replaced) for the period restates it in the billed basis
        own["billed"] = {"basis": figures["billed"]["basis"],
                         "rows": {r["name"]: r["cost"] for r in figures["billed"]["rows"]}}
    return hashlib.sha256(json.dumps(own, sort_keys=True).encode()).hexdigest()


def restatement(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What changed between two editions of one period and scope: per team (and the unallocated row), the
    printed cost and GPU-hours before and after."""
    before = {r["name"]: r for r in old.get("rows", [])}
    after = {r["name"]: r for r in new.get("rows", [])}
    changes = []
    for name in sorted(set(before) | set(after), key=lambda n: (n == UNALLOCATED, n)):
        b, a = before.get(name), after.get(name)
        old_cost = Decimal(b["cost_printed"]) if b else money.ZERO
        new_cost = Decimal(a["cost_printed"]) if a else money.ZERO
        old_h = Decimal(b["gpu_hours_printed"]) if b else Decimal("0.0")
        new_h = Decimal(a["gpu_hours_printed"]) if a else Decimal("0.0")
        if old_cost == new_cost and old_h == new_h:
            continue
        changes.append({"name": name, "old_cost": str(old_cost), "new_cost": str(new_cost),
                        "delta": str(new_cost - old_cost), "old_gpu_hours": str(old_h), "new_gpu_hours": str(new_h),
                        "delta_gpu_hours": str(new_h - old_h)})
    old_total = Decimal(old["total_row"]["cost_printed"])
    new_total = Decimal(new["total_row"]["cost_printed"])
    return {"rows": changes, "old_total": str(old_total), "new_total": str(new_total),
            "delta_total": str(new_total - old_total), "billed": billed_restatement(old, new)}


def billed_restatement(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """Per team, the printed billed cost before and after (None when neither edition had a bill): a bill imported
    for a closed period shows here, team by team."""
    ob, nb = old.get("billed"), new.get("billed")
    if not ob and not nb:
        return None
    before = {r["name"]: Decimal(r["cost_printed"]) for r in (ob or {}).get("rows", [])}
    after = {r["name"]: Decimal(r["cost_printed"]) for r in (nb or {}).get("rows", [])}
    rows = []
    for name in sorted(set(before) | set(after), key=lambda n: (n == UNALLOCATED, n)):
        b, a = before.get(name), after.get(name)
        if b != a:
            rows.append({"name": name, "old_cost": None if b is None else str(b),
                         "new_cost": None if a is None else str(a),
                         "delta": str((a or money.ZERO) - (b or money.ZERO))})
    old_total = Decimal(ob["total_printed"]) if ob else None
    new_total = Decimal(nb["total_printed"]) if nb else None
    return {"basis": (nb or ob or {}).get("basis"), "rows": rows,
            "old_total": None if old_total is None else str(old_total),
            "new_total": None if new_total is None else str(new_total),
            "delta_total": str((new_total or money.ZERO) - (old_total or money.ZERO))}


def links(period: Period, scope_key: str, version: int | None) -> dict[str, str]:
    """Absolute links for the e-mail (GPUFINOPS_BASE_URL), never repository paths."""
    base = settings.GPUFINOPS_BASE_URL.rstrip("/")
    query = f"?scope={scope_key}" + (f"&version={version}" if version else "")
    return {  # the dashboard over the report's own period: the same bounds, the same figures
        "dashboard": f"{base}/?period={period.label}",
        "archive": f"{base}/reports/?period={period.label}",
        "data_status": f"{base}/data-status/",
        "api": f"{base}/api/v1/reports/{period.label}/{query}",
        "csv": f"{base}/api/v1/reports/{period.label}/csv{query}",
        "focus": f"{base}/api/v1/reports/{period.label}/focus{query}",
    }
