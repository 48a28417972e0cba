"""View 6, the fleet (callers who see every team): capacity -> allocated -> working with money, and both kinds of
idle (idle in allocations, unallocated capacity) per cluster and node group. Not narrowed by team or namespace:
capacity belongs to no team."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.urls import reverse
from django.utils import timezone

from apps.budgets.selectors import SpendForecast, period_forecast
from apps.dashboard import charts
from apps.dashboard.scope import Scope
from apps.dashboard.selectors.history import History, capacity_history, capacity_in_scope, change_vs_history, history
from apps.dashboard.selectors.shared import bucket_rows, bucket_time, figures_row, plain_query, report, tile, week_of
from apps.dashboard.tables import Block, Column
from apps.usage import money
from apps.usage.figures import CapacityFigures, CapacityRow, UsageFigures
from apps.usage.selectors import capacity_rows, clusters_missing_signal

GROUP_COLUMNS = [
    Column("group", "Cluster / node group", "text", "node-group"), Column("gpu_model", "GPU model", secondary=True),
    Column("capacity_gpu_hours", "Capacity (GPU-h)", "gpuh", "capacity"),
    Column("allocated_gpu_hours", "Allocated (GPU-h)", "gpuh", "allocated"),
    Column("working_gpu_hours", "Working (GPU-h)", "gpuh", "working"),
    Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh", "idle-in-allocations"),
    Column("idle_cost", "Idle in allocations (USD)", "usd", "idle-cost"),
    Column("unallocated_gpu_hours", "Unallocated capacity (GPU-h)", "gpuh", "unallocated-capacity"),
    Column("unallocated_cost", "Unallocated capacity (USD)", "usd", "unallocated-capacity"),
    Column("unavailable_gpu_hours", "Unavailable (GPU-h)", "gpuh", "unavailable"),
    Column("coverage", "Coverage", "coverage", "coverage"),
]
FLEET_SERIES_COLUMNS = [
    Column("t", "Bucket (UTC)"), Column("working_gpu_hours", "Working (GPU-h)", "gpuh", "working"),
    Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh", "idle-in-allocations"),
    Column("unmeasured_gpu_hours", "Unmeasured (GPU-h)", "gpuh", "unmeasured"),
    Column("unallocated_gpu_hours", "Unallocated capacity (GPU-h)", "gpuh", "unallocated-capacity"),
    Column("capacity_gpu_hours", "Capacity (GPU-h)", "gpuh", "capacity"),
]
GroupKey = tuple[str, str, str]  # cluster, node group, GPU model


def capacity_columns(c: CapacityFigures) -> dict[str, Any]:
    """Capacity figures as row columns. Capacity's unpriced hours (capacity of nodes without a price) are not the
    usage rows' (allocated hours without a price): kept apart as `capacity_unpriced_gpu_hours`."""
    return {("capacity_unpriced_gpu_hours" if k == "unpriced_gpu_hours" else k): v for k, v in c.as_dict().items()}


def _groups(scope: Scope, by_group: list[tuple[GroupKey, UsageFigures]],
            cap_rows: list[CapacityRow]) -> list[dict[str, Any]]:
    """One row per cluster, node group and GPU model: its capacity next to what its pods held and did."""
    groups: dict[GroupKey, tuple[UsageFigures, CapacityFigures]] = {}
    for r in cap_rows:
        groups[(r.group["cluster"], r.group["node_group"], r.group["gpu_model"])] = (UsageFigures(), r.figures)
    for key, figures in by_group:
        usage, cap = groups.get(key, (UsageFigures(), CapacityFigures()))
        groups[key] = (usage + figures, cap)
    return [figures_row(usage, **capacity_columns(cap), group=f"{cluster} / {group}", cluster=cluster,
                        node_group=group, gpu_model=model,
                        href=reverse("dashboard:capacity") + "?" + plain_query(scope, cluster=cluster))
            for (cluster, group, model), (usage, cap) in sorted(groups.items())]


def _series(scope: Scope, filters: dict[str, list[str]], clusters: list[str] | None) -> list[dict[str, Any]]:
    """Per bucket: the capacity split (working, idle, unmeasured, unallocated) of the same scope."""
    w = scope.window
    key = "hour" if w.bucket == "hour" else "day"
    usage = bucket_rows(scope, filters=filters)
    cap: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # capacity, unallocated GPU-hours
    for r in capacity_rows(start=w.start, end=w.end, group_by=[key, "node_group", "gpu_model"], clusters=clusters):
        if not capacity_in_scope(scope, r):
            continue
        t = week_of(r.group[key]) if w.bucket == "week" else bucket_time(key, r.group[key])
        cap[t][0] += r.figures.capacity_gpu_hours
        cap[t][1] += r.figures.unallocated_gpu_hours
    series = [{**r, "capacity_gpu_hours": cap[r["t"]][0] if r["t"] in cap else 0.0,
               "unallocated_gpu_hours": cap[r["t"]][1] if r["t"] in cap else 0.0} for r in usage]
    seen = {r["t"] for r in usage}
    series += [{"t": t, **UsageFigures().as_dict(), "capacity_gpu_hours": c[0], "unallocated_gpu_hours": c[1]}
               for t, c in cap.items() if t not in seen]
    return sorted(series, key=lambda r: r["t"])


def _share(part: float, whole: float) -> str:
    return f"{part / whole * 100:.1f} %" if whole else "—"


def _tiles(totals: dict[str, Any], cap: CapacityFigures, hist: History,
           hist_cap: list[CapacityFigures]) -> list[dict[str, Any]]:
    return [
        tile("Capacity (USD)", cap.capacity_cost, "usd", "capacity", note=f"{cap.capacity_gpu_hours:,.1f} GPU-hours",
             delta=change_vs_history(cap.capacity_cost, hist, [c.capacity_cost for c in hist_cap], "usd")),
        tile("Allocated, charged to teams (USD)", totals["cost"], "usd", "allocated",
             note=f"{totals['allocated_gpu_hours']:,.1f} GPU-hours, "
                  f"{_share(totals['allocated_gpu_hours'], cap.capacity_gpu_hours)} of capacity",
             delta=change_vs_history(totals["cost"], hist, hist.series((), "cost"), "usd")),
        tile("Working GPU-hours", totals["working_gpu_hours"], "gpuh", "working",
             note=f"{_share(totals['working_gpu_hours'], totals['allocated_gpu_hours'])} of allocated",
             delta=change_vs_history(totals["working_gpu_hours"], hist, hist.series((), "working_gpu_hours"), "gpuh")),
        tile("Idle in allocations (USD)", totals["idle_cost"], "usd", "idle-in-allocations",
             note=f"{totals['idle_gpu_hours']:,.1f} GPU-hours (team-owned)",
             delta=change_vs_history(totals["idle_cost"], hist, hist.series((), "idle_cost"), "usd")),
        tile("Unallocated capacity (USD)", cap.unallocated_cost, "usd", "unallocated-capacity",
             note=f"{cap.unallocated_gpu_hours:,.1f} GPU-hours (platform-owned)",
             delta=change_vs_history(cap.unallocated_cost, hist, [c.unallocated_cost for c in hist_cap], "usd")),
        tile("Unavailable GPU-hours", cap.unavailable_gpu_hours, "gpuh", "unavailable",
             note="cordoned, NotReady or zero-allocatable nodes (part of unallocated)"),
        tile("Attribution coverage", totals["coverage"], "coverage", "coverage",
             note="GPU-hours held that DCGM measured"),
    ]


def _blocks(totals: dict[str, Any], cap: CapacityFigures, rows: list[dict[str, Any]],
            series: list[dict[str, Any]]) -> list[Block]:
    """The funnel (capacity -> allocated -> working), the capacity split per bucket, idle by type per group."""
    capacity_cost, charged = cap.capacity_cost, totals["cost"]
    stages = [("Capacity", cap.capacity_gpu_hours, f"${capacity_cost:,.2f}"),
              ("Allocated (held by pods)", totals["allocated_gpu_hours"], f"${charged:,.2f} charged"),
              ("Working", totals["working_gpu_hours"], f"${totals['idle_cost']:,.2f} of it idle in allocations")]
    funnel_rows: list[dict[str, Any]] = [
        {"stage": name, "gpu_hours": v, "share": (v / cap.capacity_gpu_hours) if cap.capacity_gpu_hours else None}
        for name, v, _ in stages]
    funnel_rows[0]["cost"], funnel_rows[1]["cost"] = capacity_cost, charged
    return [
        Block("funnel", f"{_share(totals['allocated_gpu_hours'], cap.capacity_gpu_hours)} of capacity was "
                        f"held by pods, {_share(totals['working_gpu_hours'], cap.capacity_gpu_hours)} did work",
              [Column("stage", "Stage"), Column("gpu_hours", "GPU-hours", "gpuh", "gpu-hour"),
               Column("share", "Share of capacity", "ratio", "capacity"), Column("cost", "USD", "usd", "cost")],
              funnel_rows, figure=charts.funnel("funnel", stages) if cap.capacity_gpu_hours else None,
              term="capacity", aria="Funnel: capacity, allocated and working GPU-hours"),
        Block("split", f"Of {cap.capacity_gpu_hours:,.1f} GPU-hours of capacity, "
                       f"{totals['working_gpu_hours']:,.1f} did work", FLEET_SERIES_COLUMNS, series,
              figure=charts.capacity_split("split", series) if series else None,
              totals={**totals, "t": "Total"}, term="capacity",
              aria="Capacity GPU-hours per bucket: working, idle in allocations, unmeasured, unallocated capacity",
              empty="Nothing collected in the period."),
        Block("groups", "Idle by type per cluster and node group", GROUP_COLUMNS, rows, totals=totals, open=True,
              figure=charts.hbar("groups", [r["group"] for r in rows],
                                 [("idle", [r["idle_cost"] for r in rows]),
                                  ("unallocated", [r["unallocated_cost"] for r in rows])],
                                 unit="usd", x_title="USD") if rows else None,
              term="unallocated-capacity", aria="Idle in allocations and unallocated capacity cost per node group",
              empty="No node group had capacity in the period.",
              note="Unallocated capacity: GPUs no pod held (platform-owned). Idle in allocations: GPUs held by a "
                   "pod that did no work (team-owned)."),
    ]


FORECAST_COLUMNS = [
    Column("period", "Period", "text"), Column("actual", "Spent so far (USD)", "usd", "allocated"),
    Column("expected", "Forecast at period end (USD)", "usd", "forecast"),
    Column("low", "Range low (USD)", "usd", "forecast"), Column("high", "Range high (USD)", "usd", "forecast"),
    Column("run_rate", "Run rate (USD/day)", "usd", "forecast", secondary=True),
    Column("history_days", "Days of history", "int", secondary=True),
]


def forecast_block(forecasts: list[SpendForecast]) -> Block:
    """The fleet's spend charged to teams this week and month, and where it is heading (apps.budgets.forecast: the
    same forecast as the budgets)."""
    rows = [{"period": f.label, "actual": f.forecast.actual,
             **({"expected": f.forecast.expected, "low": f.forecast.low, "high": f.forecast.high,
                 "run_rate": f.forecast.run_rate} if f.forecast.history_days else {}),
             "history_days": f.forecast.history_days} for f in forecasts]
    month = forecasts[-1].forecast
    title = (f"This month is heading for ${month.expected:,.2f} charged to teams (range ${month.low:,.2f} – "
             f"${month.high:,.2f})" if month.history_days else "No history yet to forecast this month")
    return Block("forecast", title, FORECAST_COLUMNS, rows, open=True, term="forecast",
                 note="Price-card spend charged to teams so far in the current week and month (UTC), and the "
                      "forecast end-of-period spend: the last 7 days' run rate with the weekly pattern, and a range "
                      "calibrated on the method's own errors (docs/numbers.md, \"Forecast\"). Not narrowed by the "
                      "period chosen above: it is always the current week and month.")


def fleet_page(scope: Scope) -> dict[str, Any]:
    """View 6 (callers who see every team): capacity -> allocated -> working with money, and both kinds of idle
    per cluster and node group. Not narrowed by team or namespace (capacity belongs to no team)."""
    w = scope.window
    filters = {k: v for k, v in scope.usage_filters.items() if k in ("cluster", "node_group", "gpu_model")}
    clusters = filters.get("cluster")
    by_group = report(scope, ["cluster", "node_group", "gpu_model"], filters=filters)
    cap_rows = [r for r in capacity_rows(start=w.start, end=w.end, group_by=["cluster", "node_group", "gpu_model"],
                                         clusters=clusters) if capacity_in_scope(scope, r)]
    rows = _groups(scope, [((r.group["cluster"], r.group["node_group"], r.group["gpu_model"]), r.figures)
                           for r in by_group.results], cap_rows)
    cap = CapacityFigures.fold(r.figures for r in cap_rows)
    totals = figures_row(by_group.totals, **capacity_columns(cap), group="Total")
    series = _series(scope, filters, clusters)
    hist = history(scope, filters=filters)
    tiles = _tiles(totals, cap, hist, capacity_history(scope, hist, clusters))
    reconciles = money.micro(cap.capacity_cost) == money.micro(totals["cost"] + cap.unallocated_cost)
    now = timezone.now()
    forecast = forecast_block([period_forecast(now, "weekly"), period_forecast(now, "monthly")])
    return {"tiles": tiles, "blocks": [forecast, *_blocks(totals, cap, rows, series)], "totals": totals,
            "capacity": capacity_columns(cap), "reconciles": reconciles,
            "ignored": [k for k in ("team", "namespace") if scope.filters.get(k)],
            "unpriced": totals["unpriced_gpu_hours"] or cap.unpriced_gpu_hours,
            "missing_signal": clusters_missing_signal(visible_teams=None)}
