"""Page compositions: what each dashboard page shows, built from the selectors of the apps below (the same reads
as the API, so every figure is the API's for the same period, filters and visibility).

Each page function takes a `Scope` (period, filters, signal, visibility) and returns a template context:
tiles with their change vs the previous period and the 4-period average, and `Block`s (chart, table, CSV of
the same rows). Changes and averages reuse the finance report's rules (`apps.reports.content`); periods are
the reports' ISO weeks and months (`apps.reports.periods`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from apps.capacity.constants import PendingReason
from apps.capacity.selectors import pending_gpu_hours, pending_list
from apps.common.timeutils import DAY, HOUR, iso_week_start
from apps.dashboard import charts
from apps.dashboard.scope import SIGNAL_NAMES, Scope, Window
from apps.dashboard.tables import Block, Column
from apps.findings.selectors import idle_allocation_list
from apps.queues.selectors import (
    admission_wait_summary,
    local_queue_list,
    queue_list,
    queue_presence,
    queue_usage,
    quota_series,
)
from apps.reports.content import UNALLOCATED, _delta, _printed_rows, apportion_places, pct
from apps.reports.periods import Period, period_state
from apps.usage import money
from apps.usage.activity import SIGNALS
from apps.usage.selectors import (
    USAGE_FIELDS,
    TooLarge,
    UsageReport,
    busy_share,
    capacity_rows,
    clusters_missing_signal,
    coverage,
    data_as_of,
    pod_workloads,
    usage_report,
    workload_pods,
    workload_seen,
)

TENTH = Decimal("0.1")
HUNDRED = Decimal(100)
MONEY = frozenset({"cost", "idle_cost"})
NO_WORKLOAD = "~"  # the URL segment of rows whose workload was not recorded
TOP = 5
PAGE_SIZE = 50
NOTE = ("Activity signal: {signal}. Cost = GPU-hours held x the price card's USD per GPU-hour for the model, fixed "
        "when the hour was recorded; idle in allocations = GPU-hours held x (1 - activity). Unmeasured hours (no "
        "DCGM series for the pod) are neither working nor idle.")


# ---- Shared pieces ----


def report(scope: Scope, group_by: list[str], *, window: Window | None = None, signal: str | None = None,
           filters: Mapping[str, Sequence[str]] | None = None, visible: Any = ...) -> UsageReport:
    """`usage_report` for the page's scope (what `/api/v1/usage/` answers for the same parameters)."""
    w = window or scope.window
    return usage_report(start=w.start, end=w.end, group_by=group_by, signal=signal or scope.signal,
                        visible_teams=scope.visible_teams if visible is ... else visible,
                        filters=scope.usage_filters if filters is None else filters)


def teams_in_scope(scope: Scope) -> set[str] | None:
    """The teams a read may cover: the visible ones, narrowed by `?team=` (for selectors without a team filter)."""
    if scope.filters.get("team"):
        return set(scope.filters["team"])
    return scope.visible_teams


def plain_query(scope: Scope, **overrides: object) -> str:
    """The scope's query string for a link to another page (without one page's own table parameters)."""
    return scope.query(sort=None, order=None, busy_below=None, page=None, **overrides)


def workload_url(cluster: str, namespace: str, workload: str) -> str:
    return reverse("dashboard:workload", args=[cluster, namespace, workload or NO_WORKLOAD])


def _zero() -> dict[str, Any]:
    return {k: (money.ZERO if k in MONEY else 0.0) for k in USAGE_FIELDS}


def _add(acc: dict[str, Any], row: Mapping[str, Any]) -> None:
    for k in USAGE_FIELDS:
        acc[k] += row[k]


def _finish(row: dict[str, Any]) -> dict[str, Any]:
    """Derived figures of a usage row: activity (working share of measured hours) and idle share."""
    row["activity"] = busy_share(row)
    row["idle_share"] = (row["idle_gpu_hours"] / row["allocated_gpu_hours"]) if row["allocated_gpu_hours"] else None
    row["coverage"] = coverage(row["allocated_gpu_hours"], row["unmeasured_gpu_hours"])
    return row


def status(scope: Scope, now: datetime | None = None) -> dict[str, Any]:
    """Provisional or final, and why: final once the period is over and every hour of it is final for every
    cluster (the reports' rule, `period_state`), with the data's freshness."""
    now = now or timezone.now()
    w = scope.window
    state = period_state(w.period or Period(w.start, w.end, "custom", w.label), now)
    if state.final:
        reason = "every hour of it is collected and final"
    elif not state.clusters:
        reason = "nothing was being collected in it"
    elif not state.ended:
        elapsed = max(0, min(int((now - w.start) / HOUR), int(w.length / HOUR)))
        reason = f"the {w.noun} is not over ({elapsed:,} of {int(w.length / HOUR):,} hours so far)"
    else:
        reason = state.reason() or ""
    return {"final": state.final, "label": "final" if state.final else "provisional", "reason": reason,
            "ratio": state.ratio, "as_of": data_as_of(visible_teams=scope.visible_teams)}


def filter_options(scope: Scope) -> dict[str, list[str]]:
    """The values each filter can take in the period, for the teams the caller may see (from all of the period's
    rows, not the current page)."""
    keys = ["team", "namespace", "cluster", "node_group", "gpu_model"]
    rep = report(scope, keys, filters={})
    out: dict[str, set[str]] = {k: set() for k in keys}
    for r in rep.results:
        for k in keys:
            out[k].add(r[k])
    return {k: sorted(v) for k, v in out.items()}


def filter_warnings(scope: Scope, options: Mapping[str, list[str]]) -> list[str]:
    """A message per filter value with no GPU-hours in the period (the page then shows its empty state)."""
    out = []
    for key, values in scope.filters.items():
        missing = [v for v in values if v not in options.get(key, ())]
        if missing:
            whose = "" if scope.sees_all else " for the teams you can see"
            out.append(f"No GPU-hours match {key.replace('_', ' ')} {', '.join(missing)} in "
                       f"{scope.window.caption()}{whose}.")
    return out


# ---- Buckets of the charts ----


def _t(key: str, value: str) -> str:
    """A bucket label Plotly reads as a date, in UTC."""
    return value[:16].replace("T", " ") if key == "hour" else value


def bucket_rows(scope: Scope, *, signal: str | None = None, filters: Mapping[str, Sequence[str]] | None = None,
                bucket: str | None = None) -> list[dict[str, Any]]:
    """Usage per chart bucket (hour, day or ISO week, as the period's length asks, unless `bucket` is given)."""
    bucket = bucket or scope.window.bucket
    key = "hour" if bucket == "hour" else "day"
    rep = report(scope, [key], signal=signal, filters=filters)
    if bucket != "week":
        return [_finish({"t": _t(key, r[key]), **{k: r[k] for k in USAGE_FIELDS}}) for r in rep.results]
    weeks: dict[str, dict[str, Any]] = {}
    for r in rep.results:
        monday = iso_week_start(datetime.fromisoformat(r["day"]).replace(tzinfo=UTC)).strftime("%Y-%m-%d")
        _add(weeks.setdefault(monday, _zero()), r)
    return [_finish({"t": t, **v}) for t, v in sorted(weeks.items())]


def bucket_label(window: Window, bucket: str | None = None) -> str:
    return {"hour": "Hour (UTC)", "day": "Day (UTC)", "week": "ISO week starting (UTC)"}[bucket or window.bucket]


# ---- The previous period and the 4-period average ----


@dataclass
class History:
    """Usage of the periods before the page's: `values[i][key]` is the totals of window i for a group key (a tuple
    of the `by` values; `()` for the whole scope); `has[i]` whether window i has any ledger row."""

    windows: list[Window]
    values: list[dict[tuple, dict[str, Any]]]
    has: list[bool]
    of: Window | None = None  # the page's period

    @property
    def previous_label(self) -> str:
        """"2026-W47", "2026-10", "the previous 7 days", "the previous period"."""
        w = self.of
        if w is None or w.kind in ("week", "month"):
            return self.windows[0].label
        days = w.length / DAY
        return f"the previous {days:g} days" if days == int(days) else "the previous period"

    @property
    def average_label(self) -> str:
        w = self.of
        if w is not None and w.kind == "month":
            return "3-month avg"
        if w is not None and w.kind == "week":
            return "4-week avg"
        return f"{len(self.windows)}-period avg"

    def series(self, key: tuple, field: str) -> list[Any]:
        zero = money.ZERO if field in MONEY else 0.0
        return [v.get(key, {}).get(field, zero) for v in self.values]


def history(scope: Scope, *, by: Sequence[str] = (), signal: str | None = None,
            filters: Mapping[str, Sequence[str]] | None = None) -> History:
    """The previous period (first) and the others of the average: one query over all of them by day when they
    are whole days (the rows folded into each period), else one per period."""
    windows = scope.window.history()
    values: list[dict[tuple, dict[str, Any]]] = [{} for _ in windows]
    has = [False] * len(windows)
    if all(w.whole_days for w in windows):
        rep = report(scope, [*by, "day"], window=Window(windows[-1].start, windows[0].end, "custom", "", ()),
                     signal=signal, filters=filters)
        index = {}
        for i, w in enumerate(windows):
            d = w.start.date()
            while d < w.end.date():
                index[d.isoformat()] = i
                d += timedelta(days=1)
        for r in rep.results:
            i = index.get(r["day"])
            if i is None:
                continue
            has[i] = True
            key = tuple(r[k] for k in by)
            _add(values[i].setdefault(key, _zero()), r)
            if by:
                _add(values[i].setdefault((), _zero()), r)
    else:
        for i, w in enumerate(windows):
            rep = report(scope, list(by), window=w, signal=signal, filters=filters)
            has[i] = bool(rep.results)
            values[i][()] = dict(rep.totals)
            for r in rep.results:
                values[i][tuple(r[k] for k in by)] = r
    return History(windows, values, has, scope.window)


def _printed(value: Any, kind: str) -> Decimal:
    return money.cents(value) if kind == "usd" else money.to_decimal(round(float(value or 0), 1)).quantize(TENTH)


def change(current: Any, hist: History, series: list[Any], kind: str = "usd") -> dict[str, Any]:
    """The change of a figure vs the previous period and vs the average of the history periods that have data,
    as the finance report computes it (`apps.reports.content._delta` on printed figures)."""
    cur = _printed(current, kind)
    prev = _printed(series[0], kind) if hist.has[0] else None
    counted = [v for v, h in zip(series, hist.has, strict=True) if h]
    avg = None
    if counted:
        avg = (sum((money.to_decimal(v) for v in counted), money.ZERO) / len(counted))
    avg_p = _printed(avg, kind) if avg is not None else None
    delta, delta_pct = _delta(cur, prev)
    avg_delta, avg_pct = _delta(cur, avg_p)
    return {"kind": kind, "previous": prev, "previous_label": hist.previous_label,
            "previous_range": hist.windows[0].caption(), "delta": delta, "delta_pct": delta_pct, "average": avg_p,
            "average_count": len(counted), "average_of": len(hist.windows), "average_label": hist.average_label,
            "avg_delta": avg_delta, "avg_pct": avg_pct}


def tile(label: str, value: Any, kind: str, term: str, *, delta: dict | None = None, note: str = "",
         url: str = "") -> dict[str, Any]:
    return {"label": label, "value": value, "kind": kind, "term": term, "change": delta, "note": note, "url": url}


# ---- Workloads (view 2) ----

WORKLOAD_COLUMNS = [
    Column("workload", "Workload", "text", "workload", True),
    Column("namespace", "Namespace", "text", "", True),
    Column("team", "Team", "text", "team", True),
    Column("cluster", "Cluster", "text", "", True),
    Column("gpu_models", "GPU model", "text", ""),
    Column("node_groups", "Node group", "text", "node-group"),
    Column("allocated_gpu_hours", "Allocated (GPU-h)", "gpuh", "allocated", True),
    Column("working_gpu_hours", "Working (GPU-h)", "gpuh", "working", True),
    Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh", "idle-in-allocations", True),
    Column("unmeasured_gpu_hours", "Unmeasured (GPU-h)", "gpuh", "unmeasured", True),
    Column("activity", "Activity", "activity", "activity", True),
    Column("cost", "Cost (USD)", "usd", "cost", True),
    Column("idle_cost", "Idle cost (USD)", "usd", "idle-cost", True),
]
SORT_KEYS = [c.key for c in WORKLOAD_COLUMNS if c.sortable]


def workload_rows(scope: Scope, *, detailed: bool = True) -> tuple[list[dict[str, Any]], UsageReport]:
    """One row per workload (team, cluster, namespace, workload) with its node groups and GPU models: the API's
    `group_by=team,cluster,workload,node_group,gpu_model` folded per workload."""
    try:
        if not detailed:  # the caller shows no node groups or GPU models: one row per workload straight away
            raise TooLarge("group_by", "not asked")
        rep = report(scope, ["team", "cluster", "workload", "node_group", "gpu_model"])
    except TooLarge:
        # More (workload, node group, GPU model) rows than one answer may hold: one row per workload, without its
        # node groups and GPU models. When even that is too many, TooLarge goes to the page, which says so.
        rep = report(scope, ["team", "cluster", "workload"])
    merged: dict[tuple, dict[str, Any]] = {}
    for r in rep.results:
        key = (r["team"], r["cluster"], r["namespace"], r["workload"])
        row = merged.get(key)
        if row is None:
            row = merged[key] = {"team": r["team"], "cluster": r["cluster"], "namespace": r["namespace"],
                                 "workload": r["workload"], "_groups": set(), "_models": set(), **_zero()}
        if "node_group" in r:
            row["_groups"].add(r["node_group"])
            row["_models"].add(r["gpu_model"])
        _add(row, r)
    rows = []
    for row in merged.values():
        row["node_groups"] = ", ".join(sorted(row.pop("_groups")))
        row["gpu_models"] = ", ".join(sorted(row.pop("_models")))
        row["href"] = workload_url(row["cluster"], row["namespace"], row["workload"]) + "?" + plain_query(scope)
        row["workload"] = row["workload"] or "(not recorded)"
        rows.append(_finish(row))
    return rows, rep


def sort_rows(rows: list[dict[str, Any]], key: str, descending: bool) -> list[dict[str, Any]]:
    """Stable sort by one column (missing values last), then by cost and names so the order never jitters."""
    rows = sorted(rows, key=lambda r: (r["team"], r["cluster"], r["namespace"], r["workload"]))
    rows.sort(key=lambda r: -r["cost"])
    present = [r for r in rows if r.get(key) is not None]
    missing = [r for r in rows if r.get(key) is None]
    present.sort(key=lambda r: r[key], reverse=descending)
    return present + missing


def workloads_page(scope: Scope, *, sort: str = "idle_cost", order: str = "desc", page: int = 1,
                   busy_below: float | None = None) -> dict[str, Any]:
    too_many = ""
    try:
        rows, rep = workload_rows(scope)
    except TooLarge:
        rows, rep = [], report(scope, [])
        too_many = too_many_workloads(scope)
    if busy_below is not None:
        rows = [r for r in rows if r["activity"] is not None and r["activity"] * 100 < busy_below]
        totals = _zero()
        for r in rows:
            _add(totals, r)
    else:
        totals = dict(rep.totals)
    totals = _finish({**totals, "workload": f"Total ({len(rows):,} workloads)"})
    sort = sort if sort in SORT_KEYS else "idle_cost"
    rows = sort_rows(rows, sort, order != "asc")
    pages = max(1, math.ceil(len(rows) / PAGE_SIZE))
    page = min(max(page, 1), pages)
    shown = rows[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    idle = totals["idle_cost"]
    title = (f"{len(rows):,} workloads held {totals['allocated_gpu_hours']:,.1f} GPU-hours; "
             f"${idle:,.2f} of their ${totals['cost']:,.2f} was idle in allocations") if rows else "No workloads"
    block = Block("workloads", title, WORKLOAD_COLUMNS, shown, totals=totals, open=True,
                  note=NOTE.format(signal=SIGNAL_NAMES[scope.signal]),
                  empty=too_many or _empty_text(scope, "workloads"))
    block.extra = {"all_rows": rows}
    return {"table_block": block, "sort": sort, "order": "asc" if order == "asc" else "desc", "page": page,
            "pages": pages, "first": (page - 1) * PAGE_SIZE + 1 if rows else 0,
            "last": min(page * PAGE_SIZE, len(rows)), "count": len(rows), "busy_below": busy_below, "report": rep}


def too_many_workloads(scope: Scope) -> str:
    return (f"More than {settings.GPUFINOPS_API_MAX_ROWS:,} workloads in {scope.window.caption()}: too many to "
            "list on one page. Choose a team, a cluster or a namespace in the filters, or a shorter period.")


def _empty_text(scope: Scope, what: str) -> str:
    if scope.visible_teams is not None and not scope.visible_teams:
        return (f"No {what} are visible to you: you are not on any team yet. Ask an administrator to add you "
                "(manage.py add_team_member TEAM USER).")
    if scope.filtered:
        return f"No {what} match the filters in {scope.window.caption()}."
    return f"No {what} with GPU-hours in {scope.window.caption()}."


# ---- Team overview (view 1) ----

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
    # Idle allocations are found under the default signal only (they are findings computed at collection).
    rows = idle_allocation_list(visible_teams=teams_in_scope(scope),
                                cluster=clusters[0] if len(clusters) == 1 else None)
    for key in ("cluster", "namespace", "node_group", "gpu_model"):
        if scope.filters.get(key):
            rows = [r for r in rows if r[key] in scope.filters[key]]
    shown = rows[:limit]
    owners = pod_workloads(shown)
    for r in shown:
        r["workload"] = owners.get((r["cluster"], r["namespace"], r["pod"]), "")
        r["href"] = workload_url(r["cluster"], r["namespace"], r["workload"]) + "?" + plain_query(scope)
    return shown, len(rows)


def top_workloads(rows: list[dict[str, Any]], limit: int = TOP) -> list[dict[str, Any]]:
    ranked = [r for r in rows if r["idle_gpu_hours"] > 0]
    return sort_rows(ranked, "idle_cost", True)[:limit]


def overview_page(scope: Scope) -> dict[str, Any]:
    """View 1: what the teams in scope spent, how much of it worked, vs the previous period and the average."""
    w = scope.window
    by_team = report(scope, ["team"])
    totals = _finish(dict(by_team.totals))
    hist = history(scope)
    naive = report(scope, [], signal="gpu_util") if scope.signal != "gpu_util" else by_team
    series = bucket_rows(scope)
    try:
        wl_rows, _ = workload_rows(scope, detailed=False)  # the top workloads table has no node group column
        too_many = ""
    except TooLarge:  # a fleet's week of short jobs: ranked on the workloads page once narrowed
        wl_rows, too_many = [], too_many_workloads(scope)
    idle_rows, idle_count = idle_now(scope)
    teams = sorted((_finish(dict(r)) for r in by_team.results), key=lambda r: (-r["cost"], r["team"]))
    for r in teams:
        r["href"] = reverse("dashboard:overview") + "?" + plain_query(scope, team=r["team"])

    def ch(field: str, kind: str) -> dict:
        return change(totals[field], hist, hist.series((), field), kind)

    idle_pct = totals["idle_share"]
    tiles = [
        tile("GPU cost (USD)", totals["cost"], "usd", "cost", delta=ch("cost", "usd")),
        tile("Idle in allocations (USD)", totals["idle_cost"], "usd", "idle-cost", delta=ch("idle_cost", "usd"),
             note=f"{idle_pct * 100:.1f} % of GPU-hours held" if idle_pct is not None else ""),
        tile("Allocated GPU-hours", totals["allocated_gpu_hours"], "gpuh", "allocated",
             delta=ch("allocated_gpu_hours", "gpuh")),
        tile("Working GPU-hours", totals["working_gpu_hours"], "gpuh", "working",
             delta=ch("working_gpu_hours", "gpuh")),
        tile("Idle in allocations (GPU-hours)", totals["idle_gpu_hours"], "gpuh", "idle-in-allocations",
             delta=ch("idle_gpu_hours", "gpuh")),
        tile("Unmeasured GPU-hours", totals["unmeasured_gpu_hours"], "gpuh", "unmeasured"),
        tile("Attribution coverage", totals["coverage"], "coverage", "coverage",
             note="share of GPU-hours held that DCGM measured"),
        tile(f"Activity ({charts.SIGNAL_STYLES[scope.signal]['name']})", totals["activity"], "activity", "activity",
             note="working share of measured GPU-hours"),
    ]
    if scope.signal != "gpu_util":
        tiles.append(tile("Activity (naive GPU_UTIL)", busy_share(naive.totals), "activity", "signals",
                          note="what GPU_UTIL-based dashboards would claim"))
    if by_team.capacity is not None and not scope.filtered:
        cap = by_team.capacity
        tiles.append(tile("Unallocated capacity (USD)", cap["unallocated_cost"], "usd", "unallocated-capacity",
                          note=f"{cap['unallocated_gpu_hours']:,.1f} GPU-hours nobody held", url="fleet"))
    who = ", ".join(sorted(scope.filters["team"])) if scope.filters.get("team") else (
        "all teams" if scope.sees_all else ", ".join(sorted(scope.visible_teams or [])) or "your teams")
    x_type = "date"
    blocks = []
    if series:
        share = f"{idle_pct * 100:.1f} %" if idle_pct is not None else "an unmeasured share"
        blocks.append(Block(
            "cost", f"{share} of {who}'s GPU-hours were idle in allocations: ${totals['idle_cost']:,.2f} of "
                    f"${totals['cost']:,.2f}", [Column("t", bucket_label(w), "text"), *COST_COLUMNS], series,
            figure=charts.cost_split("cost", series, x_type=x_type), totals={**totals, "t": "Total"},
            term="idle-in-allocations", aria=f"Cost per {w.bucket}: working versus idle in allocations, USD",
            note=NOTE.format(signal=SIGNAL_NAMES[scope.signal])))
        blocks.append(Block(
            "hours", f"{totals['working_gpu_hours']:,.1f} of {totals['allocated_gpu_hours']:,.1f} GPU-hours held "
                     "did work", [Column("t", bucket_label(w), "text"), *HOURS_COLUMNS], series,
            figure=charts.hours_split("hours", series, x_type=x_type), totals={**totals, "t": "Total"},
            term="gpu-hour", aria=f"GPU-hours per {w.bucket}: working, idle in allocations, unmeasured"))
    top = top_workloads(wl_rows)
    blocks.append(Block(
        "top-idle", f"Top {len(top)} workloads by idle cost" if top else "No workload was idle in allocations",
        TOP_COLUMNS, top, open=True, term="idle-cost", empty=too_many or _empty_text(scope, "idle workloads")))
    if len(teams) > 1 or scope.sees_all:
        blocks.append(Block("teams", f"{len(teams)} teams", TEAM_COLUMNS, teams, totals={**totals, "team": "Total"},
                            open=True, term="team", empty=_empty_text(scope, "teams")))
    blocks.append(Block(
        "idle-now", f"{idle_count:,} pods hold idle GPUs right now" if idle_count else "No pod holds idle GPUs now",
        IDLE_COLUMNS, idle_rows, open=True, term="idle-allocation",
        empty="None right now: no pod in scope has been below the idle threshold for the last hours.",
        note="Pods whose activity stayed under the idle threshold in each of the last hours, as of each cluster's "
             "latest collected hour."))
    return {"totals": totals, "tiles": tiles, "blocks": blocks, "history": hist, "who": who, "report": by_team,
            "idle_count": idle_count, "missing_signal": clusters_missing_signal(visible_teams=scope.visible_teams)}


# ---- Workload detail (view 3) ----

POD_COLUMNS = [
    Column("pod", "Pod", "text", ""), Column("node", "Node"), Column("node_group", "Node group", "text", "node-group"),
    Column("gpu_model", "GPU model"), Column("resources", "Request"),
    Column("gpus", "GPUs held", "gpus", "allocated"), Column("queue", "Queue", "text", "queue"),
    Column("first_hour", "From (UTC)", "datetime"), Column("until", "Until (UTC)", "datetime"),
    Column("allocated_gpu_hours", "Allocated (GPU-h)", "gpuh", "allocated"),
    Column("working_gpu_hours", "Working (GPU-h)", "gpuh", "working"),
    Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh", "idle-in-allocations"),
    Column("unmeasured_gpu_hours", "Unmeasured (GPU-h)", "gpuh", "unmeasured"),
    Column("activity", "Activity", "activity", "activity"),
    Column("cost", "Cost (USD)", "usd", "cost"), Column("idle_cost", "Idle cost (USD)", "usd", "idle-cost"),
]
WORKLOAD_HOURLY_DAYS = 8
SIGNAL_COLUMNS = [Column(f"activity_{s}", f"{charts.SIGNAL_STYLES[s]['name']}", "activity", "signals")
                  for s in SIGNALS]


def workload_page(scope: Scope, cluster: str, namespace: str, workload: str) -> dict[str, Any] | None:
    """View 3: one workload's pods, GPUs held, activity under each signal, cost and idle cost over time. None when
    the caller may see no hour of it (the page then answers 404, never "it exists but is not yours")."""
    seen = workload_seen(visible_teams=scope.visible_teams, cluster=cluster, namespace=namespace, workload=workload)
    if seen["first"] is None:
        return None
    w = scope.window
    filters = {**scope.usage_filters, "cluster": [cluster], "namespace": [namespace], "workload": [workload]}
    own = scope.with_filters(cluster=(cluster,), namespace=(namespace,))
    total = report(scope, ["team"], filters=filters)
    totals = _finish(dict(total.totals))
    hist = history(scope, filters=filters)
    # One workload's hours are cheap to read (the ledger's workload index): hourly up to WORKLOAD_HOURLY_DAYS.
    bucket = "hour" if w.length <= timedelta(days=WORKLOAD_HOURLY_DAYS) else w.bucket
    per_signal = {s: bucket_rows(scope, signal=s, filters=filters, bucket=bucket) for s in SIGNALS}
    series = per_signal[scope.signal]
    activity: dict[str, dict[str, Any]] = {}
    for s, rows in per_signal.items():
        for r in rows:
            activity.setdefault(r["t"], {"t": r["t"]})[f"activity_{s}"] = r["activity"]
    activity_rows = [activity[t] for t in sorted(activity)]
    pods = workload_pods(start=w.start, end=w.end, visible_teams=scope.visible_teams, cluster=cluster,
                         namespace=namespace, workload=workload, signal=scope.signal)
    for p in pods:
        p["queue"] = " → ".join(v for v in (p["local_queue"], p["cluster_queue"]) if v)
        p["until"] = p["last_hour"] + HOUR
        _finish(p)
    # Columns that say the same for every pod are in the facts above the page, not repeated per row.
    same = {k for k in ("node_group", "gpu_model", "queue") if len({p[k] for p in pods}) <= 1}
    if not any(p["unmeasured_gpu_hours"] for p in pods):
        same.add("unmeasured_gpu_hours")
    pod_columns = [c for c in POD_COLUMNS if c.key not in same]
    pod_totals = _zero()
    for p in pods:
        _add(pod_totals, p)
    queues = sorted({(p["local_queue"], p["cluster_queue"]) for p in pods if p["cluster_queue"] or p["local_queue"]})
    groups = sorted({p["node_group"] for p in pods})
    models = sorted({p["gpu_model"] for p in pods})
    teams = sorted({r["team"] for r in total.results}) or sorted({p["team"] for p in pods})

    def ch(field: str, kind: str) -> dict:
        return change(totals[field], hist, hist.series((), field), kind)

    tiles = [
        tile("GPU cost (USD)", totals["cost"], "usd", "cost", delta=ch("cost", "usd")),
        tile("Idle in allocations (USD)", totals["idle_cost"], "usd", "idle-cost", delta=ch("idle_cost", "usd")),
        tile("Allocated GPU-hours", totals["allocated_gpu_hours"], "gpuh", "allocated",
             delta=ch("allocated_gpu_hours", "gpuh")),
        tile("Working GPU-hours", totals["working_gpu_hours"], "gpuh", "working"),
        tile("Idle in allocations (GPU-hours)", totals["idle_gpu_hours"], "gpuh", "idle-in-allocations"),
        tile("Unmeasured GPU-hours", totals["unmeasured_gpu_hours"], "gpuh", "unmeasured"),
        tile(f"Activity ({charts.SIGNAL_STYLES[scope.signal]['name']})", totals["activity"], "activity", "activity"),
        tile("Pods", len(pods), "int", ""),
    ]
    blocks = []
    name = workload or "(not recorded)"
    if series:
        measured = [r["activity"] for r in series if r["activity"] is not None]
        verdict = (f"{name} was busy {totals['activity'] * 100:.1f} % of its measured GPU-hours"
                   if totals["activity"] is not None else f"{name}'s activity was not measured")
        blocks.append(Block(
            "activity", verdict, [Column("t", bucket_label(w, bucket)), *SIGNAL_COLUMNS], activity_rows,
            figure=charts.signal_lines("activity", [r["t"] for r in activity_rows],
                                       {s: [r.get(f"activity_{s}") for r in activity_rows] for s in SIGNALS}),
            term="signals", aria="Activity per signal over time, percent",
            note="Activity = working / (working + idle) GPU-hours of the bucket under each DCGM signal; gaps are "
                 f"buckets without any measurement. {len(measured)} of {len(series)} buckets measured."))
        blocks.append(Block(
            "cost", f"${totals['idle_cost']:,.2f} of ${totals['cost']:,.2f} was idle in allocations",
            [Column("t", bucket_label(w, bucket)), *COST_COLUMNS], series, figure=charts.cost_split("cost", series),
            totals={**totals, "t": "Total"}, term="idle-cost", aria="Cost per bucket: working versus idle, USD",
            note=NOTE.format(signal=SIGNAL_NAMES[scope.signal])))
        blocks.append(Block(
            "hours", f"{totals['allocated_gpu_hours']:,.1f} GPU-hours held", [Column("t", bucket_label(w, bucket)),
                                                                               *HOURS_COLUMNS], series,
            figure=charts.hours_split("hours", series), totals={**totals, "t": "Total"}, term="gpu-hour",
            aria="GPU-hours held per bucket: working, idle in allocations, unmeasured",
            note=f"GPU-hours per {bucket} / hours in the {bucket} = GPUs held on average."))
    blocks.append(Block(
        "pods", f"{len(pods):,} pods", pod_columns, pods, totals={**_finish(pod_totals), "pod": "Total"}, open=True,
        term="workload", empty=f"No pod of {name} held GPUs in {w.caption()}."))
    facts = {"team": ", ".join(teams), "cluster": cluster, "namespace": namespace, "workload": name,
             "kind": workload.split("/", 1)[0] if "/" in workload else "", "node_groups": ", ".join(groups),
             "gpu_models": ", ".join(models), "queues": queues, "first_seen": seen["first"],
             "last_seen": seen["last"] + HOUR if seen["last"] else None}
    return {"totals": totals, "tiles": tiles, "blocks": blocks, "facts": facts, "report": total, "pods": pods,
            "own_scope": own, "history": hist, "chart_bucket": bucket}


# ---- Team queue and quota (view 4) ----

QUEUE_COLUMNS = [
    Column("queue", "Cluster / ClusterQueue", "text", "queue"), Column("local_queues", "LocalQueues", "text"),
    Column("cohort", "Cohort"), Column("nominal_gpus", "Nominal (GPUs)", "gpus", "quota"),
    Column("reserved_gpus", "Reserved now (GPUs)", "gpus", "quota"),
    Column("borrowed_gpus", "Borrowed now (GPUs)", "gpus", "borrowed"),
    Column("pending_now", "Pending now", "int", "pending"),
    Column("wait_p50", "Admission wait p50", "seconds", "admission-wait"),
    Column("wait_p95", "Admission wait p95", "seconds", "admission-wait"),
]
QUEUE_USAGE_COLUMNS = [
    Column("queue", "Cluster / ClusterQueue", "text", "queue"),
    Column("allocated_gpu_hours", "Allocated (GPU-h)", "gpuh", "allocated"),
    Column("working_gpu_hours", "Working (GPU-h)", "gpuh", "working"),
    Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh", "idle-in-allocations"),
    Column("borrowed_idle_gpu_hours", "Borrowed while idle (GPU-h)", "gpuh", "borrowed-while-idle"),
    Column("waited_gpu_hours", "GPU-hours waited", "gpuh", "gpu-hours-waited"),
]
PARADOX_COLUMNS = [
    Column("team", "Team", "text", "team"),
    Column("waited_gpu_hours", "GPU-hours waited (pending)", "gpuh", "gpu-hours-waited"),
    Column("idle_gpu_hours", "GPU-hours held idle", "gpuh", "idle-in-allocations"),
    Column("idle_cost", "Idle cost (USD)", "usd", "idle-cost"),
]
REASON_COLUMNS = [
    Column("reason", "Why the work waited", "text", "pending"), Column("explanation", "Meaning"),
    Column("waited_gpu_hours", "GPU-hours waited", "gpuh", "gpu-hours-waited"),
    Column("share", "Share", "ratio"), Column("items", "Pending pods / workloads", "int", "pending"),
]
VERDICTS = {
    "quota": "your queue's quota is the bottleneck: Kueue had not reserved quota for the work",
    "fragmentation": "the fleet's fragmentation is the bottleneck: the node group had enough free GPUs, but no node "
                     "with enough for one pod",
    "capacity": "the fleet's capacity is the bottleneck: not enough free GPUs",
    "other": "neither quota nor GPUs: GPUs were free and something else (taints, affinity, images) blocked",
}


def queues_page(scope: Scope, now: datetime | None = None) -> dict[str, Any]:
    """View 4 (and, for admins, every queue): quota next to the work it bought, what waited and why, and the
    GPU-hours the team waited next to the GPU-hours it held idle."""
    now = now or timezone.now()
    w = scope.window
    at = min(now, w.end)
    teams = teams_in_scope(scope)
    clusters = set(scope.filters.get("cluster", ()))

    def keep(name: str) -> bool:
        return not clusters or name in clusters

    usage = [u for u in queue_usage(start=w.start, end=w.end, signal=scope.signal, visible_teams=teams)
             if keep(u.cluster)]
    quotas = [q for q in queue_list(at=at, visible_teams=teams) if q.resource.startswith("nvidia.com/")
              and keep(q.cluster.name)]
    lqs = [lq for lq in local_queue_list(at=at, visible_teams=teams) if keep(lq.cluster.name)]
    waits = admission_wait_summary(start=w.start, end=w.end, visible_teams=teams)
    waited = [x for x in pending_gpu_hours(start=w.start, end=w.end, visible_teams=teams) if keep(x.cluster)]
    pending = [p for p in pending_list(at=at, visible_teams=teams) if keep(p.cluster.name)]
    presence = queue_presence(at=at, visible_teams=scope.visible_teams)
    idle_team = report(scope, ["team"], filters={k: v for k, v in scope.usage_filters.items() if k in
                                                 ("cluster", "team")})

    reserved: dict[tuple[str, str], float] = defaultdict(float)
    for q in quotas:
        reserved[(q.cluster.name, q.cluster_queue.name)] += q.reserved
    my_lqs: dict[tuple[str, str], list[str]] = defaultdict(list)
    for lq in lqs:
        my_lqs[(lq.cluster.name, lq.cluster_queue)].append(f"{lq.namespace}/{lq.name}")
    pending_now: dict[tuple[str, str], int] = defaultdict(int)
    for p in pending:
        if p.cluster_queue:
            pending_now[(p.cluster.name, p.cluster_queue)] += 1
    waited_q: dict[tuple[str, str], float] = defaultdict(float)
    for x in waited:
        waited_q[(x.cluster, x.cluster_queue)] += x.gpu_hours
    rows = []
    for u in usage:
        key = (u.cluster, u.cluster_queue)
        wait = waits.get(key)
        rows.append({
            "queue": f"{u.cluster} / {u.cluster_queue}", "cluster": u.cluster, "cluster_queue": u.cluster_queue,
            "local_queues": ", ".join(sorted(my_lqs.get(key, []))) or "—", "cohort": u.cohort or "—",
            "nominal_gpus": u.nominal_gpus, "reserved_gpus": reserved.get(key, 0.0), "borrowed_gpus": u.borrowed_gpus,
            "allocated_gpu_hours": u.allocated_gpu_hours, "working_gpu_hours": u.working_gpu_hours,
            "idle_gpu_hours": u.idle_gpu_hours, "borrowed_idle_gpu_hours": u.borrowed_idle_gpu_hours,
            "borrowed_idle": u.borrowed_idle, "pending_now": pending_now.get(key, 0),
            "waited_gpu_hours": waited_q.get(key, 0.0),
            "wait_p50": wait.p50_seconds if wait else None, "wait_p95": wait.p95_seconds if wait else None,
            "href": reverse("dashboard:queues") + "?" + plain_query(scope, cluster=u.cluster),
        })
    # The paradox, per team: GPU-hours waited (pending x GPUs asked) next to GPU-hours held idle.
    waited_team: dict[str, float] = defaultdict(float)
    for x in waited:
        waited_team[x.team] += x.gpu_hours
    idle_by_team = {r["team"]: r for r in idle_team.results}
    paradox = []
    for team in sorted(set(waited_team) | set(idle_by_team)):
        r = idle_by_team.get(team, {})
        paradox.append({"team": team, "waited_gpu_hours": waited_team.get(team, 0.0),
                        "idle_gpu_hours": r.get("idle_gpu_hours", 0.0), "idle_cost": r.get("idle_cost", money.ZERO),
                        "href": reverse("dashboard:overview") + "?" + plain_query(scope, team=team)})
    # Why it waited.
    by_reason: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for x in waited:
        by_reason[x.reason][0] += x.gpu_hours
        by_reason[x.reason][1] += x.items
    total_waited = math.fsum(v[0] for v in by_reason.values())
    reasons = [{"reason": reason, "explanation": PendingReason(reason).label if reason in PendingReason.values
                else reason, "waited_gpu_hours": v[0], "share": v[0] / total_waited if total_waited else None,
                "items": v[1]} for reason, v in sorted(by_reason.items(), key=lambda kv: -kv[1][0])]
    verdict = ""
    if reasons and total_waited:
        top = reasons[0]
        verdict = (f"{top['share'] * 100:.0f} % of the GPU-hours waited ({top['waited_gpu_hours']:,.1f} of "
                   f"{total_waited:,.1f}) were for reason “{top['reason']}”: {VERDICTS.get(top['reason'], '')}.")
    total_idle = math.fsum(p["idle_gpu_hours"] for p in paradox)
    series = _changes([r for r in quota_series(start=w.start, end=w.end, visible_teams=teams) if keep(r["cluster"])])
    blocks = [
        Block("queues", _queue_title(rows), QUEUE_COLUMNS, rows, open=True,
              term="queue", empty=_queue_empty(scope, presence),
              note="Nominal, reserved and borrowed: GPU devices in Kueue's latest snapshot of the period. Admission "
                   "wait: creation to admission of the Kueue workloads admitted in the period"
                   + ("." if scope.sees_all else " (your teams')."))]
    if rows:
        blocks.append(Block(
            "queue-usage", "What the quota bought", QUEUE_USAGE_COLUMNS, rows, open=True, term="borrowed-while-idle",
            totals={"queue": "Total", **{c.key: math.fsum(r[c.key] for r in rows) for c in QUEUE_USAGE_COLUMNS[1:]}},
            note="GPU-hours of the queue's pods in the ledger" + ("." if scope.sees_all else " (your teams' pods).")))
    blocks += [
        Block("paradox", f"{_whose(scope)} waited {total_waited:,.1f} GPU-hours for GPUs while holding "
                         f"{total_idle:,.1f} GPU-hours idle" if paradox else "Nothing waited and nothing was held idle",
              PARADOX_COLUMNS, paradox,
              figure=charts.grouped_bars("paradox", [p["team"] for p in paradox],
                                         [("waited", [p["waited_gpu_hours"] for p in paradox]),
                                          ("idle", [p["idle_gpu_hours"] for p in paradox])],
                                         unit="gpuh", y_title="GPU-hours") if paradox else None,
              term="gpu-hours-waited", aria="GPU-hours waited versus GPU-hours held idle, per team",
              note="GPU-hours waited = at each collection, the GPUs each pending pod or Kueue workload asked for "
                   "(in physical-GPU equivalents, as the ledger shares them: a MIG slice N/7, or N/4 on A30, a "
                   "time-sliced replica 1/R) x the time to the next collection (at most an hour)."),
        Block("reasons", "Why the work waited" if reasons else "No pending GPU work in the period", REASON_COLUMNS,
              reasons, open=True, term="pending", empty="No GPU work waited in the period (or none was collected)."),
    ]
    if series:
        blocks.append(Block(
            "quota", "Reserved GPUs against the nominal quota over time",
            [Column("t", "Hour (UTC)"), Column("cluster", "Cluster"), Column("cluster_queue", "ClusterQueue"),
             Column("nominal_gpus", "Nominal (GPUs)", "gpus", "quota"),
             Column("reserved_gpus", "Reserved (GPUs)", "gpus", "quota"),
             Column("borrowed_gpus", "Borrowed (GPUs)", "gpus", "borrowed")], series,
            figure=charts.quota_lines("quota", series), term="quota",
            aria="Reserved, nominal and borrowed GPUs per ClusterQueue over time"))
    return {"blocks": blocks, "rows": rows, "paradox": paradox, "reasons": reasons, "verdict": verdict,
            "presence": presence, "total_waited": total_waited, "total_idle": total_idle}


def _changes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hours at which a queue's quota figures changed (and its last hour): what a step chart draws."""
    out, last = [], {}
    for i, r in enumerate(rows):
        key = (r["cluster"], r["cluster_queue"])
        values = (r["nominal_gpus"], r["reserved_gpus"], r["borrowed_gpus"])
        final = i + 1 == len(rows) or (rows[i + 1]["cluster"], rows[i + 1]["cluster_queue"]) != key
        if last.get(key) != values or final:
            out.append({**r, "t": r["hour"].strftime("%Y-%m-%d %H:%M")})
        last[key] = values
    return out


def _whose(scope: Scope) -> str:
    teams = scope.filters.get("team") or (sorted(scope.visible_teams) if scope.visible_teams is not None else None)
    if teams is None:
        return "Teams"
    return ", ".join(teams) if len(teams) <= 3 else f"Your {len(teams)} teams"


def _queue_title(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No ClusterQueue"
    over = [r for r in rows if r["reserved_gpus"] > r["nominal_gpus"]]
    text = f"{len(rows)} ClusterQueue{'s' if len(rows) != 1 else ''}"
    if over:
        text += f"; {len(over)} over its nominal quota now (borrowing)"
    return text


def _queue_empty(scope: Scope, presence: list) -> str:
    if not presence and not scope.sees_all:
        return "None yet: your teams have not appeared in any cluster (no GPU-hours, pending work or LocalQueue)."
    if not presence or not any(p.collected for p in presence):
        return "Not collected yet: no queue snapshot has been taken on the clusters you can see."
    if not any(p.kueue for p in presence):
        return "None: Kueue is not installed on the clusters you can see (no ClusterQueues)."
    total = sum(p.cluster_queues for p in presence)
    if total and not scope.sees_all:
        return (f"Kueue has {total} ClusterQueue{'s' if total != 1 else ''} on the clusters you can see, but none "
                "has a LocalQueue in your teams' namespaces: not visible to you.")
    if scope.filtered:
        return "No ClusterQueue matches the filters."
    return "None: Kueue answered but has no ClusterQueues."


# ---- Fleet overview (view 6) ----

GROUP_COLUMNS = [
    Column("group", "Cluster / node group", "text", "node-group"), Column("gpu_model", "GPU model"),
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
CAP_FIELDS = ("capacity_gpu_hours", "unallocated_gpu_hours", "unavailable_gpu_hours", "capacity_cost",
              "unallocated_cost", "unpriced_gpu_hours")
# Capacity's unpriced hours (capacity of nodes without a price) are not the usage rows' (allocated hours without a
# price): kept apart under this name.
CAP_KEYS = {k: ("capacity_unpriced_gpu_hours" if k == "unpriced_gpu_hours" else k) for k in CAP_FIELDS}


def _cap(row: Mapping[str, Any]) -> dict[str, Any]:
    return {CAP_KEYS[k]: row[k] for k in CAP_FIELDS}


def _cap_zero() -> dict[str, Any]:
    return {CAP_KEYS[k]: (money.ZERO if "cost" in k else 0.0) for k in CAP_FIELDS}


def _cap_keep(scope: Scope, row: Mapping[str, Any]) -> bool:
    return all(row.get(k) in scope.filters[k] for k in ("node_group", "gpu_model") if scope.filters.get(k))


def fleet_page(scope: Scope) -> dict[str, Any]:
    """View 6 (callers who see every team): capacity -> allocated -> working with money, and both kinds of idle
    per cluster and node group. Not narrowed by team or namespace (capacity belongs to no team)."""
    w = scope.window
    filters = {k: v for k, v in scope.usage_filters.items() if k in ("cluster", "node_group", "gpu_model")}
    clusters = filters.get("cluster")
    by_group = report(scope, ["cluster", "node_group", "gpu_model"], filters=filters)
    cap_rows = [r for r in capacity_rows(start=w.start, end=w.end, group_by=["cluster", "node_group", "gpu_model"],
                                         clusters=clusters) if _cap_keep(scope, r)]
    groups: dict[tuple, dict[str, Any]] = {}
    for r in cap_rows:
        groups[(r["cluster"], r["node_group"], r["gpu_model"])] = {**_zero(), **_cap(r)}
    for r in by_group.results:
        _add(groups.setdefault((r["cluster"], r["node_group"], r["gpu_model"]), {**_zero(), **_cap_zero()}), r)
    rows = []
    for (cluster, group, model), g in sorted(groups.items()):
        rows.append(_finish({**g, "group": f"{cluster} / {group}", "cluster": cluster, "node_group": group,
                             "gpu_model": model,
                             "href": reverse("dashboard:capacity") + "?" + plain_query(scope, cluster=cluster)}))
    cap = _cap_zero()
    for r in cap_rows:
        for k, v in _cap(r).items():
            cap[k] += v
    totals = _finish({**dict(by_group.totals), **cap, "group": "Total"})
    # Per bucket: the capacity split (working, idle, unmeasured, unallocated) of the same scope.
    key = "hour" if w.bucket == "hour" else "day"
    usage_b = bucket_rows(scope, filters=filters)
    cap_b: dict[str, dict[str, Any]] = defaultdict(lambda: dict.fromkeys(CAP_FIELDS, 0.0))
    for r in capacity_rows(start=w.start, end=w.end, group_by=[key, "node_group", "gpu_model"], clusters=clusters):
        if not _cap_keep(scope, r):
            continue
        t = _t(key, r[key])
        if w.bucket == "week":
            t = iso_week_start(datetime.fromisoformat(r[key]).replace(tzinfo=UTC)).strftime("%Y-%m-%d")
        for k in ("capacity_gpu_hours", "unallocated_gpu_hours"):
            cap_b[t][k] += r[k]
    series = []
    for r in usage_b:
        series.append({**r, **{k: cap_b.get(r["t"], {}).get(k, 0.0) for k in ("capacity_gpu_hours",
                                                                              "unallocated_gpu_hours")}})
    seen = {r["t"] for r in usage_b}
    for t, c in cap_b.items():
        if t not in seen:
            series.append({"t": t, **_zero(), **c})
    series.sort(key=lambda r: r["t"])
    hist = history(scope, filters=filters)
    hist_cap = _capacity_history(scope, hist, clusters)
    capacity_cost = cap["capacity_cost"]
    charged = totals["cost"]
    tiles = [
        tile("Capacity (USD)", capacity_cost, "usd", "capacity",
             note=f"{cap['capacity_gpu_hours']:,.1f} GPU-hours",
             delta=change(capacity_cost, hist, hist_cap["capacity_cost"], "usd")),
        tile("Allocated, charged to teams (USD)", charged, "usd", "allocated",
             note=f"{totals['allocated_gpu_hours']:,.1f} GPU-hours, "
                  f"{_share(totals['allocated_gpu_hours'], cap['capacity_gpu_hours'])} of capacity",
             delta=change(charged, hist, hist.series((), "cost"), "usd")),
        tile("Working GPU-hours", totals["working_gpu_hours"], "gpuh", "working",
             note=f"{_share(totals['working_gpu_hours'], totals['allocated_gpu_hours'])} of allocated",
             delta=change(totals["working_gpu_hours"], hist, hist.series((), "working_gpu_hours"), "gpuh")),
        tile("Idle in allocations (USD)", totals["idle_cost"], "usd", "idle-in-allocations",
             note=f"{totals['idle_gpu_hours']:,.1f} GPU-hours (team-owned)",
             delta=change(totals["idle_cost"], hist, hist.series((), "idle_cost"), "usd")),
        tile("Unallocated capacity (USD)", cap["unallocated_cost"], "usd", "unallocated-capacity",
             note=f"{cap['unallocated_gpu_hours']:,.1f} GPU-hours (platform-owned)",
             delta=change(cap["unallocated_cost"], hist, hist_cap["unallocated_cost"], "usd")),
        tile("Unavailable GPU-hours", cap["unavailable_gpu_hours"], "gpuh", "unavailable",
             note="cordoned, NotReady or zero-allocatable nodes (part of unallocated)"),
        tile("Attribution coverage", totals["coverage"], "coverage", "coverage",
             note="GPU-hours held that DCGM measured"),
    ]
    reconciles = money.micro(capacity_cost) == money.micro(charged + cap["unallocated_cost"])
    stages = [("Capacity", cap["capacity_gpu_hours"], f"${capacity_cost:,.2f}"),
              ("Allocated (held by pods)", totals["allocated_gpu_hours"], f"${charged:,.2f} charged"),
              ("Working", totals["working_gpu_hours"], f"${totals['idle_cost']:,.2f} of it idle in allocations")]
    funnel_rows = [{"stage": name, "gpu_hours": v, "share": (v / cap["capacity_gpu_hours"]) if cap[
        "capacity_gpu_hours"] else None} for name, v, _ in stages]
    funnel_rows[0]["cost"], funnel_rows[1]["cost"] = capacity_cost, charged
    blocks = [
        Block("funnel", f"{_share(totals['allocated_gpu_hours'], cap['capacity_gpu_hours'])} of capacity was "
                        f"held by pods, {_share(totals['working_gpu_hours'], cap['capacity_gpu_hours'])} did work",
              [Column("stage", "Stage"), Column("gpu_hours", "GPU-hours", "gpuh", "gpu-hour"),
               Column("share", "Share of capacity", "ratio", "capacity"), Column("cost", "USD", "usd", "cost")],
              funnel_rows, figure=charts.funnel("funnel", stages) if cap["capacity_gpu_hours"] else None,
              term="capacity", aria="Funnel: capacity, allocated and working GPU-hours"),
        Block("split", f"Of {cap['capacity_gpu_hours']:,.1f} GPU-hours of capacity, "
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
    return {"tiles": tiles, "blocks": blocks, "totals": totals, "capacity": cap, "reconciles": reconciles,
            "ignored": [k for k in ("team", "namespace") if scope.filters.get(k)],
            "unpriced": totals["unpriced_gpu_hours"] or cap["capacity_unpriced_gpu_hours"],
            "missing_signal": clusters_missing_signal(visible_teams=None)}


def _share(part: float, whole: float) -> str:
    return f"{part / whole * 100:.1f} %" if whole else "—"


def _capacity_history(scope: Scope, hist: History, clusters: Sequence[str] | None) -> dict[str, list[Any]]:
    """Capacity figures of each history window (one query by day when they are whole days)."""
    out: dict[str, list[Any]] = {k: [] for k in CAP_FIELDS}
    windows = hist.windows
    if all(w.whole_days for w in windows):
        rows = capacity_rows(start=windows[-1].start, end=windows[0].end, group_by=["day", "node_group", "gpu_model"],
                             clusters=clusters)
        for w in windows:
            inside = [r for r in rows if w.start.date().isoformat() <= r["day"] < w.end.date().isoformat()
                      and _cap_keep(scope, r)]
            for k in CAP_FIELDS:
                out[k].append(sum((r[k] for r in inside), money.ZERO if "cost" in k else 0.0))
        return out
    for w in windows:
        rows = [r for r in capacity_rows(start=w.start, end=w.end, group_by=["node_group", "gpu_model"],
                                         clusters=clusters) if _cap_keep(scope, r)]
        for k in CAP_FIELDS:
            out[k].append(sum((r[k] for r in rows), money.ZERO if "cost" in k else 0.0))
    return out


# ---- Teams showback (view 7) ----

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


def showback_page(scope: Scope) -> dict[str, Any]:
    """View 7: one row per team (unassigned included) plus, for callers who see every team, the unallocated
    capacity row; cost and share printed so they add up (the e-mail's rule), change vs the previous period and the
    average, GPU-hours, idle %. A totals row."""
    cur = report(scope, ["team"])
    hist = history(scope, by=["team"])
    prev_rep = None
    if hist.has[0]:
        prev_rep = report(scope, ["team"], window=hist.windows[0])
    fleet = cur.capacity is not None and not scope.filtered
    by_team = {r["team"]: r for r in cur.results}
    teams = sorted(by_team, key=lambda t: (-by_team[t]["cost"], t))
    printed = _printed_rows(cur, teams, fleet)
    printed_prev = _printed_rows(prev_rep, teams, fleet) if prev_rep is not None else None
    total = printed["total"]
    values = list(printed["costs"]) + ([printed["unallocated"]] if fleet else [])
    shares = apportion_places([v / total * HUNDRED for v in values], HUNDRED, TENTH) if total else [None] * len(values)
    rows = []
    for i, team in enumerate(teams):
        r = by_team[team]
        delta, delta_pct = _delta(printed["costs"][i], printed_prev["costs"][i] if printed_prev else None)
        avg = change(r["cost"], hist, hist.series((team,), "cost"))
        rows.append(_finish({
            **r, "name": team, "kind": "unassigned" if team == "unassigned" else "team",
            "cost": printed["costs"][i], "exact_cost": r["cost"],
            "share": shares[i] / HUNDRED if shares[i] is not None else None,
            "delta": delta, "delta_pct": delta_pct, "avg_delta": avg["avg_delta"], "avg_pct": avg["avg_pct"],
            "gpu_hours": r["allocated_gpu_hours"],
            "href": reverse("dashboard:overview") + "?" + plain_query(scope, team=team),
        }))
    hist_cap = _capacity_history(scope, hist, scope.filters.get("cluster")) if fleet else None
    if fleet:
        cap = cur.capacity
        delta, delta_pct = _delta(printed["unallocated"], printed_prev["unallocated"] if printed_prev else None)
        avg = change(cap["unallocated_cost"], hist, hist_cap["unallocated_cost"])
        rows.append({"name": UNALLOCATED, "kind": "unallocated", "cost": printed["unallocated"],
                     "share": shares[-1] / HUNDRED if shares[-1] is not None else None,
                     "delta": delta, "delta_pct": delta_pct, "avg_delta": avg["avg_delta"], "avg_pct": avg["avg_pct"],
                     "gpu_hours": cap["unallocated_gpu_hours"], "idle_share": None, "idle_cost": None,
                     "coverage": None, "href": reverse("dashboard:fleet") + "?" + plain_query(scope, team=None)})
    tot_delta, tot_pct = _delta(total, printed_prev["total"] if printed_prev else None)
    total_series = ([a + b for a, b in zip(hist.series((), "cost"), hist_cap["unallocated_cost"], strict=True)]
                    if fleet else hist.series((), "cost"))
    avg = change(cur.capacity["capacity_cost"] if fleet else cur.totals["cost"], hist, total_series)
    totals = _finish({**dict(cur.totals), "name": "Total", "cost": total, "share": Decimal(1) if total else None,
                      "delta": tot_delta, "delta_pct": tot_pct, "avg_delta": avg["avg_delta"],
                      "gpu_hours": cur.capacity["capacity_gpu_hours"] if fleet else cur.totals["allocated_gpu_hours"]})
    title = (f"{rows[0]['name']} spent the most: ${rows[0]['cost']:,.2f} ({pct(rows[0]['cost'], total)} %)"
             if rows and total else "No GPU cost in the period")
    block = Block("showback", title, SHOWBACK_COLUMNS, rows, totals=totals, open=True, term="showback",
                  figure=charts.hbar("showback", [r["name"] for r in rows],
                                     [("cost", [r["cost"] if r["kind"] != "unallocated" else 0 for r in rows]),
                                      ("unallocated", [r["cost"] if r["kind"] == "unallocated" else 0 for r in rows])],
                                     unit="usd", x_title="USD") if rows else None,
                  aria="Cost per team, largest first", empty=_empty_text(scope, "teams"),
                  note="Costs are printed in cents so that the rows add up to the total (largest remainder, as in "
                       "the e-mail); the change vs the previous period compares printed figures. "
                       + ("The total is the fleet's capacity cost: charged to teams + unallocated capacity."
                          if fleet else "The total is what the teams shown were charged."))
    return {"table_block": block, "fleet": fleet, "previous": hist.windows[0], "history": hist, "report": cur}

