"""View 2, the workloads page: every workload in scope with its node groups and GPU models, sortable, paged."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings

from apps.dashboard.scope import SIGNAL_NAMES, Scope
from apps.dashboard.selectors.shared import (
    NOTE,
    empty_text,
    figures_row,
    mode_labels,
    plain_query,
    report,
    workload_url,
)
from apps.dashboard.tables import Block, Column
from apps.usage.figures import UsageFigures
from apps.usage.selectors import TooLarge, UsageReport, workload_modes

PAGE_SIZE = 50
WORKLOAD_COLUMNS = [
    Column("workload", "Workload", "text", "workload", True),
    Column("namespace", "Namespace", "text", "", True),
    Column("team", "Team", "text", "team", True),
    Column("cluster", "Cluster", "text", "", True, secondary=True),
    Column("gpu_models", "GPU model", "text", "", secondary=True),
    Column("node_groups", "Node group", "text", "node-group", secondary=True),
    Column("modes", "Handed out by", "text", "allocation-mode", secondary=True),
    Column("allocated_gpu_hours", "Allocated (GPU-h)", "gpuh", "allocated", True),
    Column("working_gpu_hours", "Working (GPU-h)", "gpuh", "working", True),
    Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh", "idle-in-allocations", True),
    Column("unmeasured_gpu_hours", "Unmeasured (GPU-h)", "gpuh", "unmeasured", True),
    Column("activity", "Activity", "activity", "activity", True),
    Column("cost", "Cost (USD)", "usd", "cost", True),
    Column("idle_cost", "Idle cost (USD)", "usd", "idle-cost", True),
]
SORT_KEYS = [c.key for c in WORKLOAD_COLUMNS if c.sortable]

WorkloadKey = tuple[str, str, str, str]  # team, cluster, namespace, workload


def workload_rows(scope: Scope, *, detailed: bool = True) -> tuple[list[dict[str, Any]], UsageReport]:
    """One row per workload (team, cluster, namespace, workload) with its node groups and GPU models: the API's
    `group_by=team,cluster,workload,node_group,gpu_model` folded per workload. Each row keeps its `figures`."""
    try:
        if not detailed:  # the caller shows no node groups or GPU models: one row per workload straight away
            raise TooLarge("group_by", "not asked")
        rep = report(scope, ["team", "cluster", "workload", "node_group", "gpu_model"])
    except TooLarge:
        # More (workload, node group, GPU model) rows than one answer may hold: one row per workload, without its
        # node groups and GPU models. When even that is too many, TooLarge goes to the page, which says so.
        rep = report(scope, ["team", "cluster", "workload"])
    figures: dict[WorkloadKey, UsageFigures] = {}
    groups: dict[WorkloadKey, set[str]] = {}
    models: dict[WorkloadKey, set[str]] = {}
    for r in rep.results:
        g = r.group
        key = (g["team"], g["cluster"], g["namespace"], g["workload"])
        figures[key] = figures.get(key, UsageFigures()) + r.figures
        groups.setdefault(key, set()).update([g["node_group"]] if "node_group" in g else [])
        models.setdefault(key, set()).update([g["gpu_model"]] if "gpu_model" in g else [])
    rows = []
    for key, f in figures.items():
        team, cluster, namespace, workload = key
        rows.append(figures_row(
            f, team=team, cluster=cluster, namespace=namespace, workload=workload or "(not recorded)",
            node_groups=", ".join(sorted(groups[key])), gpu_models=", ".join(sorted(models[key])),
            href=workload_url(cluster, namespace, workload) + "?" + plain_query(scope), figures=f))
    return rows, rep


def add_modes(scope: Scope, rows: list[dict[str, Any]]) -> None:
    """How each shown workload's pods had their GPUs handed out (`modes`): read for the page's rows only."""
    w = scope.window
    keys = [(r["cluster"], r["namespace"], r["workload"]) for r in rows]
    modes = workload_modes(start=w.start, end=w.end, visible_teams=scope.visible_teams, workloads=keys)
    for row, key in zip(rows, keys, strict=True):
        row["modes"] = mode_labels(modes.get(key, []))


def sort_rows(rows: list[dict[str, Any]], key: str, descending: bool) -> list[dict[str, Any]]:
    """Stable sort by one column (missing values last), then by cost and names so the order never jitters."""
    rows = sorted(rows, key=lambda r: (r["team"], r["cluster"], r["namespace"], r["workload"]))
    rows.sort(key=lambda r: -r["cost"])
    present = [r for r in rows if r.get(key) is not None]
    missing = [r for r in rows if r.get(key) is None]
    present.sort(key=lambda r: r[key], reverse=descending)
    return present + missing


def too_many_workloads(scope: Scope) -> str:
    return (f"More than {settings.GPUFINOPS_API_MAX_ROWS:,} workloads in {scope.window.caption()}: too many to "
            "list on one page. Choose a team, a cluster or a namespace in the filters, or a shorter period.")


def workloads_page(scope: Scope, *, sort: str = "idle_cost", order: str = "desc", page: int = 1,
                   busy_below: float | None = None, every_row: bool = False) -> dict[str, Any]:
    """The page's rows, sorted and paged. How each workload's GPUs were handed out is read for the shown page,
    or for every row when `every_row` (the CSV has them all)."""
    too_many = ""
    try:
        rows, rep = workload_rows(scope)
    except TooLarge:
        rows, rep = [], report(scope, [])
        too_many = too_many_workloads(scope)
    if busy_below is not None:
        rows = [r for r in rows if r["activity"] is not None and r["activity"] * 100 < busy_below]
        shown_total = UsageFigures.fold(r["figures"] for r in rows)
    else:
        shown_total = rep.totals
    totals = figures_row(shown_total, workload=f"Total ({len(rows):,} workloads)")
    sort = sort if sort in SORT_KEYS else "idle_cost"
    rows = sort_rows(rows, sort, order != "asc")
    pages = max(1, math.ceil(len(rows) / PAGE_SIZE))
    page = min(max(page, 1), pages)
    shown = rows[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    add_modes(scope, rows if every_row else shown)
    idle = totals["idle_cost"]
    title = (f"{len(rows):,} workloads held {totals['allocated_gpu_hours']:,.1f} GPU-hours; "
             f"${idle:,.2f} of their ${totals['cost']:,.2f} was idle in allocations") if rows else "No workloads"
    block = Block("workloads", title, WORKLOAD_COLUMNS, shown, totals=totals, open=True,
                  note=NOTE.format(signal=SIGNAL_NAMES[scope.signal]),
                  empty=too_many or empty_text(scope, "workloads"))
    block.extra = {"all_rows": rows}
    return {"table_block": block, "sort": sort, "order": "asc" if order == "asc" else "desc", "page": page,
            "pages": pages, "first": (page - 1) * PAGE_SIZE + 1 if rows else 0,
            "last": min(page * PAGE_SIZE, len(rows)), "count": len(rows), "busy_below": busy_below, "report": rep}
