"""Rankings: workloads, pods or namespaces ordered by any figure over any period and filter, one page at a time,
computed in the database (what the workloads page, the overview's top lists and `/api/v1/rankings/` read).

A ranking has no answer cap: the database groups, orders and pages, and only the page leaves it, with the number
of rows and their totals (one aggregate over the same grouped rows, in the same statement). Whole ISO weeks come
from the week rollup (`WorkloadWeek`, for workloads: a month is 4-5 rows per workload), the other whole UTC days
from the day rollups (`WorkloadDay` for workloads, `UsageDay` for namespaces) and the partial days at the period's
edges from the hour rows (`PodHour`, `UsageHour`), cut by the one period rule (`apps.common.periods.split_days`),
so the figures equal the ledger's exactly. Pods have no day rollup: a pod ranking reads the pod rows and keeps the
hour-level bound (`GPUFINOPS_API_MAX_HOURLY_DAYS`, `TooLarge` beyond it).

The order is stable: the sort key (figures compared at the output precision, a millionth; a missing activity
last), then the row's names (team, cluster, namespace, workload, pod, pod uid) in code-point order, which together
are unique, so page 10 never repeats or skips a row of page 9.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import F, Model, Q, QuerySet, Sum

from apps.common.periods import split_days
from apps.common.timeutils import iso_week_start
from apps.inventory.models import Cluster
from apps.usage.activity import SIGNALS, default_signal
from apps.usage.figures import DECIMALS, UsageFigures
from apps.usage.models import PodHour, UsageDay, UsageHour, WorkloadDay, WorkloadWeek
from apps.usage.selectors.report import TooLarge
from apps.usage.selectors.rollups import Filters, apply_filters, make_filters

# What a ranked row is: its names, in tiebreak order (together unique for the level).
LEVELS: dict[str, tuple[str, ...]] = {
    "workload": ("team", "cluster", "namespace", "workload"),
    "namespace": ("team", "cluster", "namespace"),
    "pod": ("team", "cluster", "namespace", "workload", "pod", "pod_uid"),
}
# The figures of a row (UsageFigures' fields) and the derived activity, each a sort key.
FIGURES: tuple[str, ...] = ("allocated_gpu_hours", "working_gpu_hours", "idle_gpu_hours", "unmeasured_gpu_hours",
                            "cost", "idle_cost", "unpriced_gpu_hours")
DEFAULT_ORDERING = "-idle_cost"


def sort_keys(level: str) -> tuple[str, ...]:
    """What a ranking of `level` can be ordered by: every figure, the activity, and the row's names."""
    return (*FIGURES, "activity", *LEVELS[level])


@dataclass(frozen=True)
class Ordering:
    key: str
    descending: bool

    @property
    def text(self) -> str:
        return f"{'-' if self.descending else ''}{self.key}"


def parse_ordering(text: str | None, level: str) -> Ordering:
    """`-idle_cost` (largest first) or `cost` (smallest first); ValueError naming the choices otherwise."""
    raw = (text or DEFAULT_ORDERING).strip()
    key = raw.removeprefix("-")
    if key not in sort_keys(level):
        raise ValueError(f"unknown ordering {raw[:40]!r}; one of {', '.join(sort_keys(level))}, "
                         "with a leading '-' for largest first")
    return Ordering(key, raw.startswith("-"))


@dataclass(frozen=True)
class RankedRow:
    """One row of a ranking: its place (1 = first), its names, its figures (at the output precision)."""

    rank: int
    names: dict[str, str]
    figures: UsageFigures

    def as_dict(self) -> dict[str, object]:
        return {"rank": self.rank, **self.names, **self.figures.as_dict(), "activity": self.figures.activity,
                "coverage": self.figures.coverage}


@dataclass(frozen=True)
class Ranking:
    """A page of a ranking: `count` rows in all (after `activity_below`/`idle_only`), their `totals`, and the rows
    `offset` .. `offset + limit` in order."""

    level: str
    ordering: Ordering
    start: datetime
    end: datetime
    signal: str
    count: int
    offset: int
    limit: int | None
    rows: list[RankedRow]
    totals: UsageFigures


def rank(
    *,
    level: str,
    start: datetime,
    end: datetime,
    visible_teams: set[str] | None,
    ordering: Ordering | str | None = None,
    filters: Mapping[str, Sequence[str]] | None = None,
    signal: str | None = None,
    limit: int | None = 50,
    offset: int = 0,
    activity_below: float | None = None,
    idle_only: bool = False,
) -> Ranking:
    """Rows of `level` over `[start, end)` that the caller may see, filtered, ordered and paged in the database.

    `activity_below` (a share, 0-1) keeps rows whose activity is measured and below it; `idle_only` keeps rows with
    idle GPU-hours. `limit` None: every row (an export). Raises TooLarge for a pod ranking past the hour bound."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; one of {', '.join(LEVELS)}")
    signal = signal or default_signal()
    if signal not in SIGNALS:
        raise ValueError(f"unknown signal {signal!r}")
    order = ordering if isinstance(ordering, Ordering) else parse_ordering(ordering, level)
    if order.key not in sort_keys(level):
        raise ValueError(f"unknown ordering {order.text!r}")
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError("limit and offset are at least 0")
    normalized = make_filters(filters)
    grouped = _grouped_sql(level, start, end, visible_teams, normalized, signal, activity_below, idle_only)
    rows, count, totals = _page(*grouped, level, order, limit, offset) if grouped else ([], 0, UsageFigures())
    return Ranking(level=level, ordering=order, start=start, end=end, signal=signal, count=count, offset=offset,
                   limit=limit, rows=[RankedRow(offset + i + 1, names, f) for i, (names, f) in enumerate(rows)],
                   totals=totals)


# ---- The SQL ----


def _sources(level: str, filters: Filters) -> tuple[type[Model], type[Model]]:
    """(day rollup, hour rows): the cheapest exact pair for the level and filters (namespace rollups have no
    workload column)."""
    if level == "workload" or "workload" in filters:
        return WorkloadDay, PodHour
    return UsageDay, UsageHour


def _parts(level: str, start: datetime, end: datetime, filters: Filters) -> list[QuerySet]:
    """The querysets whose rows add up to `[start, end)`: whole ISO weeks from the week rollup (workloads), the
    other whole days from the day rollup, the partial days (or the whole range, for pods) from the hour rows."""
    if level == "pod":
        limit = settings.GPUFINOPS_API_MAX_HOURLY_DAYS
        if end - start > timedelta(days=limit):
            raise TooLarge("end", f"Pod rankings read the hourly ledger and cover at most {limit} days; narrow "
                                  "start/end, or rank workloads or namespaces.")
        return [_hours(PodHour, start, end)] if start < end else []
    day_model, hour_model = _sources(level, filters)
    split = split_days(start, end)
    parts = [_hours(hour_model, a, b) for a, b in split.hours]
    if split.days is None:
        return parts
    first, last = split.days
    weeks = whole_weeks(first, last) if day_model is WorkloadDay else None
    if weeks is None:
        parts.append(day_model._default_manager.filter(day__gte=first.date(), day__lt=last.date()))
        return parts
    monday, end_monday = weeks
    parts.append(WorkloadWeek.objects.filter(week__gte=monday.date(), week__lt=end_monday.date()))
    edges = Q(day__gte=first.date(), day__lt=monday.date()) | Q(day__gte=end_monday.date(), day__lt=last.date())
    if first < monday or end_monday < last:
        parts.append(WorkloadDay.objects.filter(edges))
    return parts


def _hours(model: type[Model], start: datetime, end: datetime) -> QuerySet:
    """The rows of `[start, end)`. Pod rows are indexed by cluster, then hour (no index on the hour alone, which
    every bucket written would pay for): naming the clusters lets the database read the hours from that index
    instead of scanning the month's partition."""
    rows = model._default_manager.filter(hour__gte=start, hour__lt=end)
    if model is PodHour:
        rows = rows.filter(cluster_id__in=list(Cluster.objects.order_by("pk").values_list("pk", flat=True)))
    return rows


def whole_weeks(first: datetime, last: datetime) -> tuple[datetime, datetime] | None:
    """The whole ISO weeks (Monday to Monday) inside the whole days `[first, last)`, None when there are none: a
    workload ranking reads those from `WorkloadWeek` and the days around them from `WorkloadDay`."""
    monday = iso_week_start(first)
    if monday < first:
        monday += timedelta(days=7)
    end_monday = iso_week_start(last)
    return (monday, end_monday) if monday < end_monday else None


def _figure_columns(signal: str) -> dict[str, str]:
    return {"allocated_gpu_hours": "allocated_gpu_hours", "working_gpu_hours": f"working_{signal}",
            "idle_gpu_hours": f"idle_{signal}", "unmeasured_gpu_hours": f"unmeasured_{signal}", "cost": "cost",
            "idle_cost": f"idle_cost_{signal}", "unpriced_gpu_hours": "unpriced_gpu_hours"}


def _grouped_sql(level: str, start: datetime, end: datetime, visible_teams: set[str] | None, filters: Filters,
                 signal: str, activity_below: float | None, idle_only: bool) -> tuple[str, list[Any]] | None:
    """One row per ranked item with its summed figures, with the cluster's name: a single part grouped, several
    parts' rows added (UNION ALL) and grouped once."""
    keys = LEVELS[level]
    names = {f"k_{k}": F("cluster_id" if k == "cluster" else k) for k in keys}
    parts = _parts(level, start, end, filters)
    # One part (whole days, or pods) is grouped in itself; several are added raw and grouped once, outside (each
    # grouped first would group every row twice: a month's parts have nearly one row per workload already).
    regroup = len(parts) > 1
    columns = _figure_columns(signal).items()
    sums = {f"f_{name}": F(column) if regroup else Sum(column) for name, column in columns}
    selects: list[str] = []
    params: list[Any] = []
    for qs in parts:
        qs = apply_filters(qs, visible_teams, filters).order_by()
        qs = qs.values(**names, **sums) if regroup else qs.values(**names).annotate(**sums)
        try:
            sql, part_params = qs.query.sql_with_params()
        except EmptyResultSet:  # a filter nothing can match (no visible team): the part adds no rows
            continue
        selects.append(sql)
        params.extend(part_params)
    if not selects:  # an empty range, or no team visible: nothing to ask the database
        return None
    out_names = [("c.name" if k == "cluster" else f"t.k_{k}") + f" AS {k}" for k in keys]
    group = [("c.name" if k == "cluster" else f"t.k_{k}") for k in keys]

    def total(figure: str) -> str:
        return f"SUM(t.f_{figure})" if regroup else f"t.f_{figure}"

    having = []
    if idle_only:
        having.append(f"{total('idle_gpu_hours')} > 0")
    if activity_below is not None:
        measured = f"{total('working_gpu_hours')} + {total('idle_gpu_hours')}"
        having.append(f"{measured} > 0 AND {total('working_gpu_hours')} < %s * ({measured})")
        params.append(float(activity_below))
    condition = f" {'HAVING' if regroup else 'WHERE'} {' AND '.join(having)}" if having else ""
    sql = (
        f"SELECT {', '.join(out_names)}, {', '.join(f'{total(f)} AS {f}' for f in FIGURES)} "
        f"FROM ({' UNION ALL '.join(selects)}) t JOIN {Cluster._meta.db_table} c ON c.id = t.k_cluster"
        + (f" GROUP BY {', '.join(group)}" if regroup else "") + condition
    )
    return sql, params


def _rounded(expr: str) -> str:
    """A figure as compared: at the output precision, so two rows equal as printed tie and go by their names."""
    return f"ROUND(CAST({expr} AS NUMERIC), {DECIMALS})"


def _order_by(level: str, order: Ordering) -> str:
    # Names in code-point order on every database (PostgreSQL's default collation ignores punctuation).
    collate = ' COLLATE "C"' if connection.vendor == "postgresql" else ""
    direction = "DESC" if order.descending else "ASC"
    if order.key == "activity":
        expr = "CASE WHEN g.working_gpu_hours + g.idle_gpu_hours > 0 THEN g.working_gpu_hours / " \
               "(g.working_gpu_hours + g.idle_gpu_hours) END"
        first = [f"({expr}) IS NULL", f"{_rounded(expr)} {direction}"]
    elif order.key in FIGURES:
        first = [f"{_rounded('g.' + order.key)} {direction}"]
    else:
        first = [f"g.{order.key}{collate} {direction}"]
    return ", ".join([*first, *(f"g.{k}{collate}" for k in LEVELS[level])])


def _page(grouped: str, params: list[Any], level: str, order: Ordering, limit: int | None,
          offset: int) -> tuple[list[tuple[dict[str, str], UsageFigures]], int, UsageFigures]:
    """The page's rows, the number of rows and their totals, in one statement (the grouped rows computed once, as a
    common table expression that both the page and the totals read: cheaper than window functions, which carry
    every row to the sort); a second, only when the page is past the last row, for the count and totals alone."""
    keys = LEVELS[level]
    order_by = _order_by(level, order)
    page = f"SELECT * FROM ranked g ORDER BY {order_by}"
    page_params = list(params)
    if limit is not None:
        page += " LIMIT %s OFFSET %s"
        page_params += [limit, offset]
    elif offset:
        page += " LIMIT -1 OFFSET %s" if connection.vendor == "sqlite" else " OFFSET %s"
        page_params.append(offset)
    totals_sql = ", ".join(["COUNT(*) AS n_rows", *(f"SUM(g.{f}) AS total_{f}" for f in FIGURES)])
    sql = (f"WITH ranked AS ({grouped}) SELECT g.*, t.* FROM ({page}) g CROSS JOIN "
           f"(SELECT {totals_sql} FROM ranked g) t ORDER BY {order_by}")
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql" and settings.GPUFINOPS_RANKING_WORK_MEM:  # this transaction only
            cursor.execute("SELECT set_config('work_mem', %s, true)", [settings.GPUFINOPS_RANKING_WORK_MEM])
        cursor.execute(sql, page_params)
        raw = cursor.fetchall()
        if raw:
            n = len(keys) + len(FIGURES)
            count, totals = raw[0][n], _figures(raw[0][n + 1:])
        else:
            cursor.execute(f"SELECT COUNT(*), {', '.join(f'SUM(g.{f})' for f in FIGURES)} FROM ({grouped}) g",
                           params)
            head = cursor.fetchone()
            count, totals = head[0], _figures(head[1:])
    rows = [({k: str(v) for k, v in zip(keys, r, strict=False)}, _figures(r[len(keys): len(keys) + len(FIGURES)]))
            for r in raw]
    return rows, count, totals


def _figures(values: Sequence[Any]) -> UsageFigures:
    """Summed figures as the database returns them (floats, decimals or NULL), at the output precision."""
    return UsageFigures.of_sums(values, rounded=True)
