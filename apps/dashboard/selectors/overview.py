"""View 1, the team overview: what the teams in scope spent, how much of it worked, against the previous period and
the average; cost and GPU-hours over time; the top idle workloads; per team; pods holding idle GPUs now."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils import timezone

from apps.budgets.selectors import budget_statuses
from apps.dashboard import charts
from apps.dashboard.scope import SIGNAL_NAMES, Scope
from apps.dashboard.selectors.history import History, change_vs_history, history
from apps.dashboard.selectors.shared import (
    NOTE,
    bucket_label,
    bucket_rows,
    empty_text,
    figures_row,
    plain_query,
    report,
    teams_in_scope,
    tile,
    workload_url,
)
from apps.dashboard.selectors.workloads import ranked_rows, workload_ranking
from apps.dashboard.tables import Block, Column
from apps.findings.grouping import badge
from apps.findings.selectors import idle_allocation_list, workload_finding_kinds
from apps.usage.figures import Unit, UsageFigures
from apps.usage.selectors import UsageReport, clusters_missing_signal, pod_workloads

TOP = 5
BUDGET_COLUMNS = [
    Column("team", "Team", "text", "team"),
    Column("scope", "Scope", "text"),
    Column("label", "Period", "text"),
    Column("amount", "Budget (USD)", "usd"),
    Column("actual", "Spent (USD)", "usd", "cost"),
    Column("used_share", "Used", "ratio"),
    Column("expected", "Forecast (USD)", "usd"),
    Column("range", "Forecast range (USD)", "text"),
    Column("crossed", "Thresholds crossed", "text"),
]

TEAM_COLUMNS = [
    Column("team", "Team", "text", "team"),
    Column("cost", "Cost (USD)", "usd", "cost"),
    Column("idle_cost", "Idle cost (USD)", "usd", "idle-cost"),
    Column("allocated_gpu_hours", "Allocated (GPU-h)", "gpuh", "allocated"),
    Column("working_gpu_hours", "Working (GPU-h)", "gpuh", "working"),
    Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh", "idle-in-allocations"),
    Column("unmeasured_gpu_hours", "Unmeasured (GPU-h)", "gpuh", "unmeasured"),
    Column("activity", "Activity", "activity", "activity"),
]
TOP_COLUMNS = [
    Column("workload", "Workload", "text", "workload"), Column("namespace", "Namespace"),
    Column("team", "Team", "text", "team"), Column("idle_cost", "Idle cost (USD)", "usd", "idle-cost"),
    Column("cost", "Cost (USD)", "usd", "cost"), Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh",
                                                        "idle-in-allocations"),
    Column("activity", "Activity", "activity", "activity"),
    Column("findings", "Why", "badges", "finding"),
]
IDLE_COLUMNS = [
    Column("pod", "Pod", "text", "idle-allocation"), Column("workload", "Workload", "text", "workload"),
    Column("namespace", "Namespace"), Column("team", "Team", "text", "team"), Column("node", "Node"),
    Column("gpus", "GPUs held", "gpus", "allocated"), Column("idle_since", "Idle since (UTC)", "datetime"),
    Column("idle_gpu_hours", "Idle GPU-h so far", "gpuh", "idle-in-allocations"),
    Column("idle_cost", "Idle cost so far (USD)", "usd", "idle-cost"),
]
HOURS_COLUMNS = [
    Column("working_gpu_hours", "Working (GPU-h)", "gpuh", "working"),
    Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh", "idle-in-allocations"),
    Column("unmeasured_gpu_hours", "Unmeasured (GPU-h)", "gpuh", "unmeasured"),
    Column("allocated_gpu_hours", "Allocated (GPU-h)", "gpuh", "allocated"),
]
COST_COLUMNS = [
    Column("cost", "Cost (USD)", "usd", "cost"),
    Column("idle_cost", "Idle in allocations (USD)", "usd", "idle-cost"),
    Column("idle_share", "Idle share of GPU-hours", "ratio", "idle-in-allocations"),
]


def idle_now(scope: Scope, limit: int = 10) -> tuple[list[dict[str, Any]], int]:
    """Pods holding idle GPUs right now (the ledger's idle allocations) in the page's scope, with their workloads."""
    clusters = scope.filters.get("cluster", ())
    # Idle allocations are findings (computed at collection, under the default signal only): read from their app.
    rows = idle_allocation_list(visible_teams=teams_in_scope(scope),
                                cluster=clusters[0] if len(clusters) == 1 else None)
    for key in ("cluster", "namespace", "node_group", "gpu_model"):
        if scope.filters.get(key):
            rows = [r for r in rows if r[key] in scope.filters[key]]
    shown = rows[:limit]
    owners = pod_workloads((r["cluster"], r["last_bucket"], r["namespace"], r["pod"]) for r in shown)
    for r in shown:
        r["workload"] = owners.get((r["cluster"], r["namespace"], r["pod"]), "")
        r["href"] = workload_url(r["cluster"], r["namespace"], r["workload"]) + "?" + plain_query(scope)
    return shown, len(rows)


def top_workloads(scope: Scope, limit: int = TOP) -> list[dict[str, Any]]:
    """The workloads that wasted most (idle cost; those with idle GPU-hours), ranked in the database, each with the
    badges of its findings in the period (the why beside the what: each badge links to the workload's "Why" block)."""
    top = ranked_rows(scope, workload_ranking(scope, ordering="-idle_cost", limit=limit, idle_only=True))
    w = scope.window
    keys = [(r["cluster"], r["namespace"], r["recorded_workload"]) for r in top]
    kinds = workload_finding_kinds(visible_teams=scope.visible_teams, start=w.start, end=w.end, workloads=keys)
    return [{**r, "findings": [badge(k) for k in kinds.get(key, [])]} for r, key in zip(top, keys, strict=True)]


def _tiles(scope: Scope, totals: UsageFigures, hist: History, by_team: UsageReport) -> list[dict[str, Any]]:
    """Cost, idle, allocated, working, unmeasured, coverage and activity with their changes; the naive GPU_UTIL
    activity next to the signal's; unallocated capacity for those who see every team."""

    def ch(field: str, kind: Unit) -> dict[str, Any]:
        return change_vs_history(getattr(totals, field), hist, hist.series((), field), kind)

    idle_pct = totals.idle_share
    tiles = [
        tile("GPU cost (USD)", totals.cost, "usd", "cost", delta=ch("cost", "usd")),
        tile("Idle in allocations (USD)", totals.idle_cost, "usd", "idle-cost", delta=ch("idle_cost", "usd"),
             note=f"{idle_pct * 100:.1f} % of GPU-hours held" if idle_pct is not None else ""),
        tile("Allocated GPU-hours", totals.allocated_gpu_hours, "gpuh", "allocated",
             delta=ch("allocated_gpu_hours", "gpuh")),
        tile("Working GPU-hours", totals.working_gpu_hours, "gpuh", "working",
             delta=ch("working_gpu_hours", "gpuh")),
        tile("Idle in allocations (GPU-hours)", totals.idle_gpu_hours, "gpuh", "idle-in-allocations",
             delta=ch("idle_gpu_hours", "gpuh")),
        tile("Unmeasured GPU-hours", totals.unmeasured_gpu_hours, "gpuh", "unmeasured"),
        tile("Attribution coverage", totals.coverage, "coverage", "coverage",
             note="share of GPU-hours held that DCGM measured"),
        tile(f"Activity ({charts.SIGNAL_STYLES[scope.signal]['name']})", totals.activity, "activity", "activity",
             note="working share of measured GPU-hours"),
    ]
    if scope.signal != "gpu_util":
        naive = report(scope, [], signal="gpu_util")
        tiles.append(tile("Activity (naive GPU_UTIL)", naive.totals.activity, "activity", "signals",
                          note="what GPU_UTIL-based dashboards would claim"))
    if by_team.capacity is not None and not scope.filtered:
        cap = by_team.capacity
        tiles.append(tile("Unallocated capacity (USD)", cap.unallocated_cost, "usd", "unallocated-capacity",
                          note=f"{cap.unallocated_gpu_hours:,.1f} GPU-hours nobody held", url="fleet"))
    return tiles


def _who(scope: Scope) -> str:
    if scope.filters.get("team"):
        return ", ".join(sorted(scope.filters["team"]))
    return "all teams" if scope.sees_all else ", ".join(sorted(scope.visible_teams or [])) or "your teams"


def _over_time(scope: Scope, totals: dict[str, Any], who: str) -> list[Block]:
    """Cost and GPU-hours per bucket: working against idle in allocations."""
    w = scope.window
    series = bucket_rows(scope)
    if not series:
        return []
    idle_pct = totals["idle_share"]
    share = f"{idle_pct * 100:.1f} %" if idle_pct is not None else "an unmeasured share"
    return [
        Block("cost", f"{share} of {who}'s GPU-hours were idle in allocations: ${totals['idle_cost']:,.2f} of "
                      f"${totals['cost']:,.2f}", [Column("t", bucket_label(w), "text"), *COST_COLUMNS], series,
              figure=charts.cost_split("cost", series, x_type="date"), totals={**totals, "t": "Total"},
              term="idle-in-allocations", aria=f"Cost per {w.bucket}: working versus idle in allocations, USD",
              note=NOTE.format(signal=SIGNAL_NAMES[scope.signal])),
        Block("hours", f"{totals['working_gpu_hours']:,.1f} of {totals['allocated_gpu_hours']:,.1f} GPU-hours held "
                       "did work", [Column("t", bucket_label(w), "text"), *HOURS_COLUMNS], series,
              figure=charts.hours_split("hours", series, x_type="date"), totals={**totals, "t": "Total"},
              term="gpu-hour", aria=f"GPU-hours per {w.bucket}: working, idle in allocations, unmeasured"),
    ]


def budget_rows(scope: Scope) -> list[dict[str, Any]]:
    """The current period of each budget of the teams in scope (the viewer's, or the `team` filter's)."""
    rows = []
    teams = scope.filters.get("team", ())
    for b in budget_statuses(now=timezone.now(), visible_teams=scope.visible_teams, teams=teams):
        f = b.forecast
        crossed = [f"{t} % spent" for t in b.crossed("actual")] + [
            f"{t} % forecast" for t in b.crossed("forecast") if t not in b.crossed("actual")]
        rows.append({"team": b.team, "scope": " ".join(p for p in (b.cluster, b.namespace) if p) or "all",
                     "label": b.label, "amount": b.amount, "actual": b.actual, "used_share": b.used_share,
                     "expected": f.expected if f.history_days else None,
                     "range": f"{f.low:,.2f} – {f.high:,.2f}" if f.history_days else "no history yet",
                     "crossed": ", ".join(crossed) or "none"})
    return rows


def overview_page(scope: Scope) -> dict[str, Any]:
    """View 1: what the teams in scope spent, how much of it worked, vs the previous period and the average."""
    by_team = report(scope, ["team"])
    totals = figures_row(by_team.totals)
    hist = history(scope)
    tiles = _tiles(scope, by_team.totals, hist, by_team)
    who = _who(scope)
    blocks = _over_time(scope, totals, who)
    idle_rows, idle_count = idle_now(scope)
    teams = sorted((figures_row(r.figures, team=r.group["team"],
                                href=reverse("dashboard:overview") + "?" + plain_query(scope, team=r.group["team"]))
                    for r in by_team.results), key=lambda r: (-r["cost"], r["team"]))
    top = top_workloads(scope)
    blocks.append(Block(
        "top-idle", f"Top {len(top)} workloads by idle cost" if top else "No workload was idle in allocations",
        TOP_COLUMNS, top, open=True, term="idle-cost", empty=empty_text(scope, "idle workloads")))
    if len(teams) > 1 or scope.sees_all:
        blocks.append(Block("teams", f"{len(teams)} teams", TEAM_COLUMNS, teams, totals={**totals, "team": "Total"},
                            open=True, term="team", empty=empty_text(scope, "teams")))
    budgets = budget_rows(scope)
    if budgets:
        blocks.append(Block(
            "budgets", f"{len(budgets)} budget{'s' if len(budgets) != 1 else ''} this period", BUDGET_COLUMNS, budgets,
            open=True, note="Spent so far on the price card, and the forecast end-of-period spend (run rate with the "
                            "weekly pattern) with its range, as wide as the method's own past errors: /budgets/ and "
                            "docs/budgets.md."))
    blocks.append(Block(
        "idle-now", f"{idle_count:,} pods hold idle GPUs right now" if idle_count else "No pod holds idle GPUs now",
        IDLE_COLUMNS, idle_rows, open=True, term="idle-allocation",
        empty="None right now: no pod in scope has been below the idle threshold for the last hours.",
        note="Pods whose activity stayed under the idle threshold in each of the last hours, as of each cluster's "
             "latest collected hour."))
    return {"totals": totals, "tiles": tiles, "blocks": blocks, "history": hist, "who": who, "report": by_team,
            "idle_count": idle_count, "missing_signal": clusters_missing_signal(visible_teams=scope.visible_teams)}
