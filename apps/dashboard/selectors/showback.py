"""View 7, showback: one row per team (unassigned included) and, for callers who see every team, the unallocated
capacity row; cost and share printed so they add up (the e-mail's rule), changes against the previous period and
the average, GPU-hours, idle %. A totals row."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.urls import reverse

from apps.dashboard import charts
from apps.dashboard.scope import Scope
from apps.dashboard.selectors.history import History, capacity_history, change_vs_history, history
from apps.dashboard.selectors.shared import empty_text, figures_row, plain_query, report
from apps.dashboard.tables import Block, Column
from apps.reports.statement import UNALLOCATED
from apps.usage.figures import HUNDRED, CapacityFigures, PrintedRows, change, pct, printed_shares
from apps.usage.selectors import UsageReport

SHOWBACK_COLUMNS = [
    Column("name", "Team", "text", "team"), Column("cost", "Cost (USD)", "usd", "cost"),
    Column("share", "Share", "ratio", "share"),
    Column("delta", "Change vs previous (USD)", "signed_usd", "change"),
    Column("delta_pct", "Change vs previous (%)", "signed_pct", "change"),
    Column("avg_delta", "Change vs average (USD)", "signed_usd", "change"),
    Column("gpu_hours", "GPU-hours", "gpuh", "allocated"),
    Column("idle_share", "Idle %", "ratio", "idle-in-allocations"),
    Column("idle_cost", "Idle cost (USD)", "usd", "idle-cost"),
    Column("coverage", "Coverage", "coverage", "coverage"),
]


def _ratio(share: Decimal | None) -> Decimal | None:
    """A printed share in percent as the ratio the table formats."""
    return share / HUNDRED if share is not None else None


def _team_rows(scope: Scope, cur: UsageReport, teams: list[str], printed: PrintedRows,
               printed_prev: PrintedRows | None, shares: list[Decimal | None], hist: History) -> list[dict[str, Any]]:
    by_team = cur.figures_by("team")
    rows = []
    for i, team in enumerate(teams):
        figures = by_team[team]
        vs_prev = change(printed.costs[i], printed_prev.costs[i] if printed_prev else None)
        avg = change_vs_history(figures.cost, hist, hist.series((team,), "cost"))
        rows.append({
            **figures_row(figures, team=team), "name": team, "kind": "unassigned" if team == "unassigned" else "team",
            "cost": printed.costs[i], "exact_cost": figures.cost, "share": _ratio(shares[i]),
            "delta": vs_prev.delta, "delta_pct": vs_prev.delta_pct, "avg_delta": avg["avg_delta"],
            "avg_pct": avg["avg_pct"], "gpu_hours": printed.hours[i],
            "href": reverse("dashboard:overview") + "?" + plain_query(scope, team=team),
        })
    return rows


def _unallocated_row(scope: Scope, cap: CapacityFigures, printed: PrintedRows, printed_prev: PrintedRows | None,
                     share: Decimal | None, hist: History, hist_cap: list[CapacityFigures]) -> dict[str, Any]:
    assert printed.unallocated is not None, "a fleet's printed rows"
    vs_prev = change(printed.unallocated, printed_prev.unallocated if printed_prev else None)
    avg = change_vs_history(cap.unallocated_cost, hist, [c.unallocated_cost for c in hist_cap])
    return {"name": UNALLOCATED, "kind": "unallocated", "cost": printed.unallocated, "share": _ratio(share),
            "delta": vs_prev.delta, "delta_pct": vs_prev.delta_pct, "avg_delta": avg["avg_delta"],
            "avg_pct": avg["avg_pct"], "gpu_hours": printed.unallocated_hours, "idle_share": None, "idle_cost": None,
            "coverage": None, "href": reverse("dashboard:fleet") + "?" + plain_query(scope, team=None)}


def _totals(cur: UsageReport, printed: PrintedRows, printed_prev: PrintedRows | None, hist: History,
            hist_cap: list[CapacityFigures] | None) -> dict[str, Any]:
    """The totals row: the fleet's capacity cost (charged + unallocated), or what the teams shown were charged."""
    cap = cur.capacity if hist_cap is not None else None
    vs_prev = change(printed.total, printed_prev.total if printed_prev else None)
    series = hist.costs(())
    if hist_cap is not None:
        series = [a + b for a, b in zip(series, [c.unallocated_cost for c in hist_cap], strict=True)]
    avg = change_vs_history(cap.capacity_cost if cap else cur.totals.cost, hist, series)
    return {**figures_row(cur.totals), "name": "Total", "cost": printed.total,
            "share": Decimal(1) if printed.total else None, "delta": vs_prev.delta, "delta_pct": vs_prev.delta_pct,
            "avg_delta": avg["avg_delta"],
            "gpu_hours": printed.total_hours}


def showback_page(scope: Scope) -> dict[str, Any]:
    """View 7: one row per team (unassigned included) plus, for callers who see every team, the unallocated
    capacity row; cost and share printed so they add up (the e-mail's rule), change vs the previous period and the
    average, GPU-hours, idle %. A totals row."""
    cur = report(scope, ["team"])
    hist = history(scope, by=["team"])
    prev_rep = report(scope, ["team"], window=hist.windows[0]) if hist.comparable[0] else None
    fleet = cur.capacity is not None and not scope.filtered
    by_team = cur.figures_by("team")
    teams = sorted(by_team, key=lambda t: (-by_team[t].cost, t))
    printed = cur.printed_rows(teams, fleet=fleet)
    printed_prev = prev_rep.printed_rows(teams, fleet=fleet) if prev_rep is not None else None
    shares = printed_shares(printed.with_unallocated(), printed.total)
    rows = _team_rows(scope, cur, teams, printed, printed_prev, shares, hist)
    hist_cap = capacity_history(scope, hist, scope.filters.get("cluster")) if fleet else None
    if cur.capacity is not None and hist_cap is not None:
        rows.append(_unallocated_row(scope, cur.capacity, printed, printed_prev, shares[-1], hist, hist_cap))
    totals = _totals(cur, printed, printed_prev, hist, hist_cap)
    total = printed.total
    title = (f"{rows[0]['name']} spent the most: ${rows[0]['cost']:,.2f} ({pct(rows[0]['cost'], total)} %)"
             if rows and total else "No GPU cost in the period")
    block = Block("showback", title, SHOWBACK_COLUMNS, rows, totals=totals, open=True, term="showback",
                  figure=charts.hbar("showback", [r["name"] for r in rows],
                                     [("cost", [r["cost"] if r["kind"] != "unallocated" else 0 for r in rows]),
                                      ("unallocated", [r["cost"] if r["kind"] == "unallocated" else 0 for r in rows])],
                                     unit="usd", x_title="USD") if rows else None,
                  aria="Cost per team, largest first", empty=empty_text(scope, "teams"),
                  note="Costs are printed in cents so that the rows add up to the total (largest remainder, as in "
                       "the e-mail); the change vs the previous period compares printed figures. "
                       + ("The total is the fleet's capacity cost: charged to teams + unallocated capacity."
                          if fleet else "The total is what the teams shown were charged."))
    return {"table_block": block, "fleet": fleet, "previous": hist.windows[0], "history": hist, "report": cur}
