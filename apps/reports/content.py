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
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from django.conf import settings

from apps.findings.selectors import infra_loss_by_team
from apps.reports import focus
from apps.reports.periods import WEEKLY, Period, period_state
from apps.reports.selectors import top_idle
from apps.usage import money
from apps.usage.activity import DEFAULT_METRICS, default_signal
from apps.usage.exports import usage_csv
from apps.usage.models import Bucket
from apps.usage.selectors import UsageReport, usage_report

CSV_GROUPS = ["team", "namespace", "cluster", "gpu_model"]
TENTH = Decimal("0.1")
HUNDRED = Decimal(100)
UNALLOCATED = "Unallocated capacity (platform)"
MOVERS = 5


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


# ---- Rounding that adds up ----


def _d(value: Any) -> Decimal:
    """A figure as an exact decimal (GPU-hour floats by their shortest repr)."""
    return money.to_decimal(value)


def apportion_places(values: Sequence[Any], total: Any, places: Decimal) -> list[Decimal]:
    """`money.apportion` at another precision (0.1 for GPU-hours and percentages): rows add up to the total."""
    scale = Decimal("0.01") / places
    scaled = money.apportion([_d(v) * scale for v in values], _d(total) * scale)
    return [(v / scale).quantize(places) for v in scaled]


def round_to(value: Any, places: Decimal) -> Decimal:
    return _d(value).quantize(places, rounding=ROUND_HALF_EVEN)


def pct(part: Any, whole: Any) -> Decimal | None:
    """part / whole in percent at 0.1; None when whole is zero."""
    whole = _d(whole)
    if whole == 0:
        return None
    return round_to(_d(part) / whole * HUNDRED, TENTH)


def _s(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


# ---- Building ----


@dataclass(frozen=True)
class Content:
    """A report's figures (JSON-ready) and files, with the digest a restatement is detected by."""

    figures: dict[str, Any]
    csv: bytes
    focus: bytes
    content_sha256: str


def comparison_periods(period: Period) -> list[Period]:
    """The previous 4 weeks (or 3 months): the average a period is compared with."""
    n = 4 if period.kind == WEEKLY else 3
    return [period.previous(i) for i in range(1, n + 1)]


def _has_ledger(period: Period) -> bool:
    return Bucket.objects.filter(hour__gte=period.start, hour__lt=period.end).exists()


def _by_team(report: UsageReport) -> dict[str, dict]:
    return {r["team"]: r for r in report.results}


def _printed_rows(report: UsageReport, teams: list[str], fleet: bool) -> dict[str, Any]:
    """Printed cost and GPU-hours per team (and the unallocated row), with their totals, for one period."""
    by_team = _by_team(report)
    costs = [by_team[t]["cost"] if t in by_team else money.ZERO for t in teams]
    hours = [by_team[t]["allocated_gpu_hours"] if t in by_team else 0.0 for t in teams]
    if fleet and report.capacity is not None:
        cap = report.capacity
        capacity_cost = money.cents(cap["capacity_cost"])
        charged, unallocated = money.apportion([report.totals["cost"], cap["unallocated_cost"]], capacity_cost)
        capacity_hours = round_to(cap["capacity_gpu_hours"], TENTH)
        charged_h, unallocated_h = apportion_places([report.totals["allocated_gpu_hours"],
                                                     cap["unallocated_gpu_hours"]], capacity_hours, TENTH)
        return {"costs": money.apportion(costs, charged), "hours": apportion_places(hours, charged_h, TENTH),
                "charged": charged, "charged_hours": charged_h, "unallocated": unallocated,
                "unallocated_hours": unallocated_h, "total": capacity_cost, "total_hours": capacity_hours}
    total = money.cents(report.totals["cost"])
    total_h = round_to(report.totals["allocated_gpu_hours"], TENTH)
    return {"costs": money.apportion(costs, total), "hours": apportion_places(hours, total_h, TENTH),
            "charged": total, "charged_hours": total_h, "unallocated": None, "unallocated_hours": None,
            "total": total, "total_hours": total_h}


def _delta(cur: Decimal, prev: Decimal | None) -> tuple[str | None, str | None]:
    """(signed $ change, % change or "new") of printed figures; (None, None) without a comparison."""
    if prev is None:
        return None, None
    change = cur - prev
    if prev == 0:
        return str(change), ("new" if cur else None)
    return str(change), str(round_to(change / prev * HUNDRED, TENTH))


def build_content(period: Period, scope: Scope, *, now: datetime, signal: str | None = None) -> Content:
    """Every figure and file of the report of `period` for `scope`, as the ledger has them now."""
    signal = signal or default_signal()
    visible = scope.visible_teams
    state = period_state(period, now)
    cur = usage_report(start=period.start, end=period.end, group_by=["team"], signal=signal, visible_teams=visible)
    fleet = scope.fleet and cur.capacity is not None

    previous = period.previous()
    prev = usage_report(start=previous.start, end=previous.end, group_by=["team"], signal=signal,
                        visible_teams=visible) if _has_ledger(previous) else None
    history = [p for p in comparison_periods(period) if _has_ledger(p)]
    history_reports = [usage_report(start=p.start, end=p.end, group_by=["team"], signal=signal,
                                    visible_teams=visible) for p in history]

    by_team = _by_team(cur)
    teams = sorted(set(by_team) | (set(_by_team(prev)) if prev else set()),
                   key=lambda t: (-(by_team[t]["cost"] if t in by_team else money.ZERO), t))
    printed = _printed_rows(cur, teams, fleet)
    printed_prev = _printed_rows(prev, teams, fleet) if prev else None

    def average(team: str | None) -> Decimal | None:
        if not history_reports:
            return None
        if team is None:
            values = [r.capacity["capacity_cost"] if fleet else r.totals["cost"] for r in history_reports]
        elif team == UNALLOCATED:
            values = [r.capacity["unallocated_cost"] for r in history_reports]
        else:
            values = [_by_team(r).get(team, {}).get("cost", money.ZERO) for r in history_reports]
        return sum((_d(v) for v in values), money.ZERO) / len(values)

    def avg_change(cur_exact: Decimal, avg: Decimal | None) -> tuple[str | None, str | None]:
        if avg is None:
            return None, None
        change = money.cents(cur_exact - avg)
        if avg == 0:
            return str(change), ("new" if cur_exact else None)
        return str(change), str(round_to((cur_exact - avg) / avg * HUNDRED, TENTH))

    total_cost = printed["total"]
    rows: list[dict[str, Any]] = []
    cost_values = list(printed["costs"]) + ([printed["unallocated"]] if fleet else [])
    shares: list[Decimal | None] = [None] * len(cost_values)
    if total_cost:
        shares = apportion_places([v / total_cost * HUNDRED for v in cost_values], HUNDRED, TENTH)
    for i, team in enumerate(teams):
        r = by_team.get(team)
        exact_cost = r["cost"] if r else money.ZERO
        allocated = r["allocated_gpu_hours"] if r else 0.0
        delta, delta_pct = _delta(printed["costs"][i], printed_prev["costs"][i] if printed_prev else None)
        avg = average(team)
        avg_delta, avg_pct = avg_change(exact_cost, avg)
        rows.append({
            "name": team, "kind": "team",
            "cost": str(exact_cost), "cost_printed": str(printed["costs"][i]), "share": _s(shares[i]),
            "prev_printed": str(printed_prev["costs"][i]) if printed_prev else None,
            "delta": delta, "delta_pct": delta_pct,
            "avg": None if avg is None else str(money.micro(avg)), "avg_delta": avg_delta, "avg_delta_pct": avg_pct,
            "gpu_hours": allocated, "gpu_hours_printed": str(printed["hours"][i]),
            "idle_gpu_hours": r["idle_gpu_hours"] if r else 0.0,
            "unmeasured_gpu_hours": r["unmeasured_gpu_hours"] if r else 0.0,
            "idle_pct": _s(pct(r["idle_gpu_hours"], allocated)) if r else None,
            "idle_cost": str(r["idle_cost"] if r else money.ZERO),
            "unpriced_gpu_hours": r["unpriced_gpu_hours"] if r else 0.0,
            # every hour on GPU models without a price: its cost is unknown, printed "unpriced" (never $0)
            "unpriced_only": bool(r and r["unpriced_gpu_hours"] and not printed["costs"][i]),
        })
    if fleet:
        cap = cur.capacity
        delta, delta_pct = _delta(printed["unallocated"], printed_prev["unallocated"] if printed_prev else None)
        avg = average(UNALLOCATED)
        avg_delta, avg_pct = avg_change(cap["unallocated_cost"], avg)
        rows.append({
            "name": UNALLOCATED, "kind": "unallocated",
            "cost": str(cap["unallocated_cost"]), "cost_printed": str(printed["unallocated"]), "share": _s(shares[-1]),
            "prev_printed": str(printed_prev["unallocated"]) if printed_prev else None,
            "delta": delta, "delta_pct": delta_pct,
            "avg": None if avg is None else str(money.micro(avg)), "avg_delta": avg_delta, "avg_delta_pct": avg_pct,
            "gpu_hours": cap["unallocated_gpu_hours"], "gpu_hours_printed": str(printed["unallocated_hours"]),
            "idle_gpu_hours": None, "unmeasured_gpu_hours": None, "idle_pct": None, "idle_cost": None,
            "unpriced_gpu_hours": None, "unpriced_only": False,
        })
    exact_total = cur.capacity["capacity_cost"] if fleet else cur.totals["cost"]
    delta, delta_pct = _delta(total_cost, printed_prev["total"] if printed_prev else None)
    avg = average(None)
    avg_delta, avg_pct = avg_change(exact_total, avg)
    total_row = {
        "name": "Total", "cost": str(exact_total), "cost_printed": str(total_cost),
        "share": "100.0" if total_cost else None, "prev_printed": str(printed_prev["total"]) if printed_prev else None,
        "delta": delta, "delta_pct": delta_pct, "avg": None if avg is None else str(money.micro(avg)),
        "avg_delta": avg_delta, "avg_delta_pct": avg_pct,
        "gpu_hours": cur.capacity["capacity_gpu_hours"] if fleet else cur.totals["allocated_gpu_hours"],
        "gpu_hours_printed": str(printed["total_hours"]),
        "idle_pct": _s(pct(cur.totals["idle_gpu_hours"], cur.totals["allocated_gpu_hours"])),
    }

    # Headline: capacity, charged, unallocated, idle inside allocations, and the reconciliation.
    headline: dict[str, Any] = {
        "charged": str(cur.totals["cost"]), "charged_printed": str(printed["charged"]),
        "charged_gpu_hours": cur.totals["allocated_gpu_hours"],
        "charged_gpu_hours_printed": str(printed["charged_hours"]),
        "idle_cost": str(cur.totals["idle_cost"]), "idle_cost_printed": str(money.cents(cur.totals["idle_cost"])),
        "idle_share_of_charged": _s(pct(cur.totals["idle_cost"], cur.totals["cost"])),
        "idle_gpu_hours": cur.totals["idle_gpu_hours"], "working_gpu_hours": cur.totals["working_gpu_hours"],
        "unmeasured_gpu_hours": cur.totals["unmeasured_gpu_hours"],
        "unpriced_gpu_hours": cur.totals["unpriced_gpu_hours"],
        "attribution_coverage": cur.coverage,
    }
    if fleet:
        cap = cur.capacity
        exact_diff = cap["capacity_cost"] - (cur.totals["cost"] + cap["unallocated_cost"])
        headline.update({
            "capacity_cost": str(cap["capacity_cost"]), "capacity_cost_printed": str(printed["total"]),
            "capacity_gpu_hours": cap["capacity_gpu_hours"], "capacity_gpu_hours_printed": str(printed["total_hours"]),
            "charged_share": _s(pct(printed["charged"], printed["total"])),
            "unallocated_cost": str(cap["unallocated_cost"]), "unallocated_printed": str(printed["unallocated"]),
            "unallocated_share": _s(pct(printed["unallocated"], printed["total"])),
            "unallocated_gpu_hours": cap["unallocated_gpu_hours"],
            "unallocated_gpu_hours_printed": str(printed["unallocated_hours"]),
            "unavailable_gpu_hours": cap["unavailable_gpu_hours"],
            "capacity_unpriced_gpu_hours": cap["unpriced_gpu_hours"],
            "reconciles": exact_diff == 0, "reconciliation_diff": str(money.cents(exact_diff)),
        })

    # Infra loss (docs/findings.md): what each team was charged for GPUs while they were unhealthy, a column next
    # to its charge and a headline line; credited back (a net line) only with GPUFINOPS_INFRA_LOSS_CREDIT. The
    # ledger's figures above never change. Printed per team to the cent, adding up to the printed total.
    loss = infra_loss_by_team(start=period.start, end=period.end, visible_teams=visible)
    loss_teams = [r for r in rows if r["kind"] == "team"]
    loss_exact = [loss[r["name"]].cost if r["name"] in loss else money.ZERO for r in loss_teams]
    loss_total = sum((v.cost for v in loss.values()), money.ZERO)
    loss_printed = money.apportion(loss_exact, loss_total) if loss_teams else []
    for r, exact, printed_loss in zip(loss_teams, loss_exact, loss_printed, strict=True):
        r["infra_loss_cost"], r["infra_loss_printed"] = str(exact), str(printed_loss)
        r["infra_loss_gpu_hours"] = loss[r["name"]].gpu_hours if r["name"] in loss else 0.0
    for r in rows:
        r.setdefault("infra_loss_cost", None)
        r.setdefault("infra_loss_printed", None)
        r.setdefault("infra_loss_gpu_hours", None)
    credited = settings.GPUFINOPS_INFRA_LOSS_CREDIT
    loss_total_printed = money.cents(loss_total)
    total_row["infra_loss_printed"] = str(loss_total_printed)
    headline.update({
        "infra_loss": str(loss_total), "infra_loss_printed": str(loss_total_printed),
        "infra_loss_gpu_hours": round(math.fsum(v.gpu_hours for v in loss.values()), 6),
        "infra_loss_credited": credited,
        "net_charged_printed": str(money.cents(printed["charged"]) - loss_total_printed) if credited else None,
    })

    movers = sorted((r for r in rows if r["kind"] == "team" and r["delta"] not in (None, "0.00")),
                    key=lambda r: (-abs(Decimal(r["delta"])), r["name"]))[:MOVERS]
    idle_kind, idle_rows = top_idle(start=period.start, end=period.end, visible_teams=visible, signal=signal)
    idle = [{
        "team": r["team"], "cluster": r["cluster"], "namespace": r["namespace"], "name": r["name"],
        "idle_cost": str(r["idle_cost"]), "idle_cost_printed": str(money.cents(r["idle_cost"])),
        "idle_gpu_hours": r["idle_gpu_hours"], "idle_gpu_hours_printed": str(round_to(r["idle_gpu_hours"], TENTH)),
        "idle_pct": _s(pct(r["idle_gpu_hours"], r["allocated_gpu_hours"])),
        "unpriced_gpu_hours": r["unpriced_gpu_hours"],
        "unpriced_only": bool(r["unpriced_gpu_hours"] and not money.cents(r["idle_cost"])),
    } for r in idle_rows]

    csv_data = usage_csv(usage_report(start=period.start, end=period.end, group_by=CSV_GROUPS, signal=signal,
                                      visible_teams=visible).as_dict())
    focus_data = focus.focus_csv(start=period.start, end=period.end, scope=focus.FocusScope(scope.teams),
                                 granularity="day", signal=signal)
    figures: dict[str, Any] = {
        "period": period.label, "kind": period.kind, "start": period.start.isoformat(), "end": period.end.isoformat(),
        "billing_month": period.billing_month(),
        "scope": {"key": scope.key, "teams": None if scope.teams is None else sorted(scope.teams),
                  "label": scope.label, "fleet": fleet},
        "signal": signal, "signal_metric": DEFAULT_METRICS.get(signal, signal), "currency": "USD",
        "coverage": state.as_dict(),
        "totals": {k: str(v) if isinstance(v, Decimal) else v for k, v in cur.totals.items()},
        "capacity": None if not fleet else {k: str(v) if isinstance(v, Decimal) else v
                                            for k, v in cur.capacity.items()},
        "headline": headline,
        "rows": rows, "total_row": total_row,
        "previous": {"period": previous.label, "available": prev is not None},
        "average": {"periods": [p.label for p in history], "count": len(history),
                    "of": len(comparison_periods(period))},
        "movers": [{"name": r["name"], "delta": r["delta"], "delta_pct": r["delta_pct"],
                    "cost_printed": r["cost_printed"], "prev_printed": r["prev_printed"]} for r in movers],
        "top_idle": {"kind": idle_kind, "rows": idle},
        "files": {"csv_sha256": hashlib.sha256(csv_data).hexdigest(),
                  "focus_sha256": hashlib.sha256(focus_data).hexdigest(),
                  "csv_bytes": len(csv_data), "focus_bytes": len(focus_data)},
    }
    own = {"totals": figures["totals"], "capacity": figures["capacity"], "coverage": figures["coverage"],
           "rows": [{k: r[k] for k in ("name", "cost", "gpu_hours", "idle_gpu_hours", "idle_cost",
                                        "unpriced_gpu_hours")} for r in rows], "files": figures["files"]}
    if credited:  # credited infra loss changes what teams pay: a change of it restates the period
        own["infra_loss"] = {r["name"]: r["infra_loss_cost"] for r in rows}
    digest = hashlib.sha256(json.dumps(own, sort_keys=True).encode()).hexdigest()
    return Content(figures=figures, csv=csv_data, focus=focus_data, content_sha256=digest)


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
            "delta_total": str(new_total - old_total)}


def links(period: Period, scope_key: str, version: int | None) -> dict[str, str]:
    """Absolute links for the e-mail (GPUFINOPS_BASE_URL), never repository paths."""
    base = settings.GPUFINOPS_BASE_URL.rstrip("/")
    query = f"?scope={scope_key}" + (f"&version={version}" if version else "")
    days = 7 if period.kind == WEEKLY else 30
    return {
        "dashboard": f"{base}/?days={days}",
        "archive": f"{base}/reports/?period={period.label}",
        "data_status": f"{base}/data-status/",
        "api": f"{base}/api/v1/reports/{period.label}/{query}",
        "csv": f"{base}/api/v1/reports/{period.label}/csv{query}",
        "focus": f"{base}/api/v1/reports/{period.label}/focus{query}",
    }
