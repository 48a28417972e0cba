"""What a report states for one period and scope, from the usage reports `apps.reports.content` gathers: pure
functions over typed figures (`apps.usage.figures`), one per phase, and the JSON the edition stores.

1. printed figures per team (`team_order`, `UsageReport.printed_rows`): rows apportioned so they add up;
2. changes (`team_rows`, `unallocated_row`, `total_row`): against the previous period, differences of printed
   figures; against the average of the comparison periods, rounded from exact figures;
3. movers, idle workloads, infra loss (`movers`, `infra_loss`);
4. the JSON figures (`row_json`, `total_json`, `headline_json`, `idle_json`, `movers_json`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from apps.findings.selectors import TeamInfraLoss
from apps.reports.selectors import IdleItem
from apps.usage import money
from apps.usage.figures import (
    TENTH,
    CapacityFigures,
    Change,
    PrintedRows,
    UsageFigures,
    average,
    change,
    change_from_average,
    pct,
    printed_shares,
    round_to,
)
from apps.usage.selectors import UsageReport

UNALLOCATED = "Unallocated capacity (platform)"
MOVERS = 5


@dataclass(frozen=True)
class StatementRow:
    """One printed row (a team, the unallocated capacity, or the total): exact and printed cost, share of the
    printed total, changes against the previous period and the average, GPU-hours. `usage` is the team's (or
    the scope's, on the total row) usage figures; None on the unallocated row."""

    name: str
    kind: str  # "team", "unallocated" or "total"
    cost: Decimal
    cost_printed: Decimal
    share: Decimal | None
    prev_printed: Decimal | None
    vs_previous: Change
    average: Decimal | None
    vs_average: Change
    gpu_hours: float
    gpu_hours_printed: Decimal
    usage: UsageFigures | None

    @property
    def unpriced_only(self) -> bool:
        """Every hour on GPU models without a price: its cost is unknown, printed "unpriced" (never $0)."""
        return bool(self.usage and self.usage.unpriced_gpu_hours and not self.cost_printed)


@dataclass(frozen=True)
class InfraLossLine:
    """What one team was charged for GPUs while they were unhealthy: exact, and printed to add up."""

    cost: Decimal
    printed: Decimal
    gpu_hours: float


@dataclass(frozen=True)
class InfraLoss:
    """Infra loss per team row and in total (docs/findings.md): a column next to the charge, never subtracted
    from the ledger's figures."""

    by_team: Mapping[str, InfraLossLine]
    total: Decimal
    gpu_hours: float

    @property
    def printed(self) -> Decimal:
        return money.cents(self.total)


# ---- 1. Printed figures per team ----


def team_order(current: UsageReport, previous: UsageReport | None) -> list[str]:
    """The teams of the period and of the previous one (a team gone since shows its change), largest cost first."""
    now = current.figures_by("team")
    names = set(now) | (set(previous.figures_by("team")) if previous else set())
    return sorted(names, key=lambda t: (-(now[t].cost if t in now else money.ZERO), t))


# ---- 2. Changes ----


def _total_cost(report: UsageReport, fleet: bool) -> Decimal:
    """The figure a report's total row prints: the fleet's capacity cost, or what the teams were charged."""
    return report.capacity.capacity_cost if fleet and report.capacity is not None else report.totals.cost


def team_rows(teams: Sequence[str], current: UsageReport, printed: PrintedRows, previous: PrintedRows | None,
              history: Sequence[UsageReport]) -> list[StatementRow]:
    """The team rows: printed cost and GPU-hours (`printed`, in the order of `teams`), share of the printed
    total, change against the previous period's printed row and against the teams' average."""
    shares = printed_shares(printed.with_unallocated(), printed.total)
    by_team = current.figures_by("team")
    rows = []
    for i, team in enumerate(teams):
        usage = by_team.get(team, UsageFigures())
        mean = average([r.figures_by("team").get(team, UsageFigures()).cost for r in history])
        rows.append(StatementRow(
            name=team, kind="team", cost=usage.cost, cost_printed=printed.costs[i], share=shares[i],
            prev_printed=previous.costs[i] if previous else None,
            vs_previous=change(printed.costs[i], previous.costs[i] if previous else None),
            average=mean, vs_average=change_from_average(usage.cost, mean),
            gpu_hours=usage.allocated_gpu_hours, gpu_hours_printed=printed.hours[i], usage=usage,
        ))
    return rows


def unallocated_row(capacity: CapacityFigures, printed: PrintedRows, previous: PrintedRows | None,
                    history: Sequence[UsageReport]) -> StatementRow:
    """The unallocated-capacity row of a fleet report (capacity no pod held): last of the rows."""
    assert printed.unallocated is not None and printed.unallocated_hours is not None, "a fleet's printed rows"
    shares = printed_shares(printed.with_unallocated(), printed.total)
    prev = previous.unallocated if previous else None
    mean = average([r.capacity.unallocated_cost if r.capacity else money.ZERO for r in history])
    return StatementRow(
        name=UNALLOCATED, kind="unallocated", cost=capacity.unallocated_cost, cost_printed=printed.unallocated,
        share=shares[-1], prev_printed=prev, vs_previous=change(printed.unallocated, prev), average=mean,
        vs_average=change_from_average(capacity.unallocated_cost, mean), gpu_hours=capacity.unallocated_gpu_hours,
        gpu_hours_printed=printed.unallocated_hours, usage=None,
    )


def total_row(current: UsageReport, printed: PrintedRows, previous: PrintedRows | None,
              history: Sequence[UsageReport], fleet: bool) -> StatementRow:
    """The total row: the fleet's capacity (charged + unallocated), or what the teams in scope were charged."""
    exact = _total_cost(current, fleet)
    mean = average([_total_cost(r, fleet) for r in history])
    prev = previous.total if previous else None
    capacity = current.capacity if fleet else None
    return StatementRow(
        name="Total", kind="total", cost=exact, cost_printed=printed.total,
        share=Decimal("100.0") if printed.total else None, prev_printed=prev,
        vs_previous=change(printed.total, prev), average=mean, vs_average=change_from_average(exact, mean),
        gpu_hours=capacity.capacity_gpu_hours if capacity else current.totals.allocated_gpu_hours,
        gpu_hours_printed=printed.total_hours, usage=current.totals,
    )


# ---- 3. Movers, infra loss ----


def movers(rows: Sequence[StatementRow], limit: int = MOVERS) -> list[StatementRow]:
    """The teams whose printed cost changed most against the previous period (either way)."""
    moved = [r for r in rows if r.kind == "team" and r.vs_previous.amount]
    return sorted(moved, key=lambda r: (-abs(r.vs_previous.amount or money.ZERO), r.name))[:limit]


def infra_loss(teams: Sequence[str], loss: Mapping[str, TeamInfraLoss]) -> InfraLoss:
    """Each team row's infra loss, printed to the cent so the rows add up to the printed total (the total of
    every team's loss in scope)."""
    total = sum((v.cost for v in loss.values()), money.ZERO)
    exact = [loss[t].cost if t in loss else money.ZERO for t in teams]
    printed = money.apportion(exact, total) if teams else []
    lines = {t: InfraLossLine(e, p, loss[t].gpu_hours if t in loss else 0.0)
             for t, e, p in zip(teams, exact, printed, strict=True)}
    return InfraLoss(lines, total, round(math.fsum(v.gpu_hours for v in loss.values()), 6))


# ---- 4. JSON figures (what the edition stores and the e-mail prints) ----


def _s(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _changes_json(row: StatementRow) -> dict[str, Any]:
    mean = None if row.average is None else str(money.micro(row.average))
    return {"prev_printed": _s(row.prev_printed), "delta": row.vs_previous.delta,
            "delta_pct": row.vs_previous.delta_pct, "avg": mean, "avg_delta": row.vs_average.delta,
            "avg_delta_pct": row.vs_average.delta_pct}


def row_json(row: StatementRow, loss: InfraLossLine | None) -> dict[str, Any]:
    """A team or unallocated row as stored; the unallocated row has no usage figures of its own (None)."""
    u = row.usage
    return {
        "name": row.name, "kind": row.kind, "cost": str(row.cost), "cost_printed": str(row.cost_printed),
        "share": _s(row.share), **_changes_json(row),
        "gpu_hours": row.gpu_hours, "gpu_hours_printed": str(row.gpu_hours_printed),
        "idle_gpu_hours": u.idle_gpu_hours if u else None,
        "unmeasured_gpu_hours": u.unmeasured_gpu_hours if u else None,
        "idle_pct": _s(pct(u.idle_gpu_hours, u.allocated_gpu_hours)) if u else None,
        "idle_cost": str(u.idle_cost) if u else None, "unpriced_gpu_hours": u.unpriced_gpu_hours if u else None,
        "unpriced_only": row.unpriced_only,
        "infra_loss_cost": str(loss.cost) if loss else None, "infra_loss_printed": str(loss.printed) if loss else None,
        "infra_loss_gpu_hours": loss.gpu_hours if loss else None,
    }


def total_json(row: StatementRow, loss: InfraLoss) -> dict[str, Any]:
    u = row.usage or UsageFigures()
    return {"name": row.name, "cost": str(row.cost), "cost_printed": str(row.cost_printed), "share": _s(row.share),
            **_changes_json(row), "gpu_hours": row.gpu_hours, "gpu_hours_printed": str(row.gpu_hours_printed),
            "idle_pct": _s(pct(u.idle_gpu_hours, u.allocated_gpu_hours)), "infra_loss_printed": str(loss.printed)}


def headline_json(current: UsageReport, printed: PrintedRows, loss: InfraLoss, *, fleet: bool,
                  credited: bool) -> dict[str, Any]:
    """Capacity, charged, unallocated, idle inside allocations, the reconciliation and the infra loss."""
    t = current.totals
    headline: dict[str, Any] = {
        "charged": str(t.cost), "charged_printed": str(printed.charged), "charged_gpu_hours": t.allocated_gpu_hours,
        "charged_gpu_hours_printed": str(printed.charged_hours),
        "idle_cost": str(t.idle_cost), "idle_cost_printed": str(money.cents(t.idle_cost)),
        "idle_share_of_charged": _s(pct(t.idle_cost, t.cost)), "idle_gpu_hours": t.idle_gpu_hours,
        "working_gpu_hours": t.working_gpu_hours, "unmeasured_gpu_hours": t.unmeasured_gpu_hours,
        "unpriced_gpu_hours": t.unpriced_gpu_hours, "attribution_coverage": current.coverage,
    }
    if fleet and current.capacity is not None and printed.unallocated is not None:  # printed with the capacity
        headline.update(_capacity_headline(t, current.capacity, printed, printed.unallocated))
    headline.update({
        "infra_loss": str(loss.total), "infra_loss_printed": str(loss.printed), "infra_loss_gpu_hours": loss.gpu_hours,
        "infra_loss_credited": credited,
        "net_charged_printed": str(money.cents(printed.charged) - loss.printed) if credited else None,
    })
    return headline


def _capacity_headline(t: UsageFigures, cap: CapacityFigures, printed: PrintedRows,
                       unallocated: Decimal) -> dict[str, Any]:
    exact_diff = cap.capacity_cost - (t.cost + cap.unallocated_cost)
    return {
        "capacity_cost": str(cap.capacity_cost), "capacity_cost_printed": str(printed.total),
        "capacity_gpu_hours": cap.capacity_gpu_hours, "capacity_gpu_hours_printed": str(printed.total_hours),
        "charged_share": _s(pct(printed.charged, printed.total)),
        "unallocated_cost": str(cap.unallocated_cost), "unallocated_printed": str(unallocated),
        "unallocated_share": _s(pct(unallocated, printed.total)),
        "unallocated_gpu_hours": cap.unallocated_gpu_hours,
        "unallocated_gpu_hours_printed": _s(printed.unallocated_hours),
        "unavailable_gpu_hours": cap.unavailable_gpu_hours, "capacity_unpriced_gpu_hours": cap.unpriced_gpu_hours,
        "reconciles": exact_diff == 0, "reconciliation_diff": str(money.cents(exact_diff)),
    }


def idle_json(items: Sequence[IdleItem]) -> list[dict[str, Any]]:
    """The top idle workloads (or pods), exact and printed."""
    return [{
        "team": r.team, "cluster": r.cluster, "namespace": r.namespace, "name": r.name,
        "idle_cost": str(r.idle_cost), "idle_cost_printed": str(money.cents(r.idle_cost)),
        "idle_gpu_hours": r.idle_gpu_hours, "idle_gpu_hours_printed": str(round_to(r.idle_gpu_hours, TENTH)),
        "idle_pct": _s(pct(r.idle_gpu_hours, r.allocated_gpu_hours)), "unpriced_gpu_hours": r.unpriced_gpu_hours,
        "unpriced_only": bool(r.unpriced_gpu_hours and not money.cents(r.idle_cost)),
    } for r in items]


def movers_json(rows: Sequence[StatementRow]) -> list[dict[str, Any]]:
    return [{"name": r.name, "delta": r.vs_previous.delta, "delta_pct": r.vs_previous.delta_pct,
             "cost_printed": str(r.cost_printed), "prev_printed": _s(r.prev_printed)} for r in rows]


def figures_json(figures: UsageFigures | CapacityFigures) -> dict[str, Any]:
    """Exact figures with money as strings (JSON keeps every digit)."""
    return {k: str(v) if isinstance(v, Decimal) else v for k, v in figures.as_dict().items()}
