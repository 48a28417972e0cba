"""View 2, the workloads page: every workload in scope, ranked by any column in the database and paged, with the node
groups, GPU models and allocation modes of the rows shown."""

from __future__ import annotations

import math
from typing import Any

from apps.dashboard.scope import SIGNAL_NAMES, Scope
from apps.dashboard.selectors.shared import (
    NOTE,
    empty_text,
    figures_row,
    mode_labels,
    plain_query,
    workload_url,
)
from apps.dashboard.tables import Block, Column
from apps.usage.selectors import Ranking, rank, workload_traits

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

# A ranking of at most this many rows is read whole, so its printed cells are apportioned to the printed totals
# over every row (`Block.printed`); past it only the page leaves the database, each row printed on its own.
WHOLE_RANKING_ROWS = 2_000


def ranked_rows(scope: Scope, ranking: Ranking) -> list[dict[str, Any]]:
    """A ranking's rows as the table's rows, each keeping its `figures`."""
    rows = []
    for r in ranking.rows:
        n = r.names
        rows.append(figures_row(
            r.figures, team=n["team"], cluster=n["cluster"], namespace=n["namespace"],
            workload=n["workload"] or "(not recorded)", recorded_workload=n["workload"],
            href=workload_url(n["cluster"], n["namespace"], n["workload"]) + "?" + plain_query(scope),
            figures=r.figures))
    return rows


def workload_ranking(scope: Scope, *, ordering: str = "-idle_cost", limit: int | None = PAGE_SIZE, offset: int = 0,
                     busy_below: float | None = None, idle_only: bool = False) -> Ranking:
    """The scope's workloads ranked in the database (`apps.usage.selectors.rank`): no answer cap, any period."""
    w = scope.window
    return rank(level="workload", start=w.start, end=w.end, visible_teams=scope.visible_teams, ordering=ordering,
                filters=scope.usage_filters, signal=scope.signal, limit=limit, offset=offset,
                activity_below=None if busy_below is None else busy_below / 100, idle_only=idle_only)


def add_traits(scope: Scope, rows: list[dict[str, Any]]) -> None:
    """Where each shown workload ran and how its GPUs were handed out: read for the rows shown only."""
    w = scope.window
    keys = [(r["team"], r["cluster"], r["namespace"], r["recorded_workload"]) for r in rows]
    traits = workload_traits(start=w.start, end=w.end, visible_teams=scope.visible_teams, workloads=keys)
    for row, key in zip(rows, keys, strict=True):
        t = traits.get(key)
        row["node_groups"] = ", ".join(t.node_groups) if t else ""
        row["gpu_models"] = ", ".join(t.gpu_models) if t else ""
        row["modes"] = mode_labels(t.modes if t else [])


def workloads_page(scope: Scope, *, sort: str = "idle_cost", order: str = "desc", page: int = 1,
                   busy_below: float | None = None, every_row: bool = False) -> dict[str, Any]:
    """The page's rows, ranked and paged in the database; every row when `every_row` (the CSV has them all) or
    when the ranking is short enough to print apportioned (WHOLE_RANKING_ROWS)."""
    sort = sort if sort in SORT_KEYS else "idle_cost"
    ordering = ("" if order == "asc" else "-") + sort

    def read(page: int | None) -> Ranking:  # one page, or every row (None)
        return workload_ranking(scope, ordering=ordering, limit=None if page is None else PAGE_SIZE,
                                offset=0 if page is None else (page - 1) * PAGE_SIZE, busy_below=busy_below)

    page = max(page, 1)
    ranking = read(None if every_row else page)
    pages = max(1, math.ceil(ranking.count / PAGE_SIZE))
    if page > pages:  # past the last page: the last one
        page = pages
        ranking = read(page)
    if ranking.limit is not None and len(ranking.rows) < ranking.count <= WHOLE_RANKING_ROWS:
        ranking = read(None)
    count = ranking.count
    rows = ranked_rows(scope, ranking)
    whole = ranking.offset == 0 and len(rows) == count  # every row read
    shown = rows[(page - 1) * PAGE_SIZE: page * PAGE_SIZE] if whole else rows
    add_traits(scope, rows if every_row else shown)
    totals = figures_row(ranking.totals, workload=f"Total ({count:,} workloads)")
    idle = totals["idle_cost"]
    title = (f"{count:,} workloads held {totals['allocated_gpu_hours']:,.1f} GPU-hours; "
             f"${idle:,.2f} of their ${totals['cost']:,.2f} was idle in allocations") if count else "No workloads"
    block = Block("workloads", title, WORKLOAD_COLUMNS, shown, totals=totals, open=True,
                  note=NOTE.format(signal=SIGNAL_NAMES[scope.signal]), empty=empty_text(scope, "workloads"))
    if whole:  # the CSV and the printed cells cover every row
        block.extra = {"all_rows": rows}
    return {"table_block": block, "sort": sort, "order": "asc" if order == "asc" else "desc", "page": page,
            "pages": pages, "first": (page - 1) * PAGE_SIZE + 1 if count else 0,
            "last": min(page * PAGE_SIZE, count), "count": count, "busy_below": busy_below, "ranking": ranking}
