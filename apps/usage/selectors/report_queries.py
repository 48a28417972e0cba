"""The usage report's queries: which rollup answers, the grouped sum, and on PostgreSQL the same compiled once per
query shape and sent with the capacity and provisional check in one round trip.

Why the compiled path (issue 24, bench/README.md "2026-12-02"): every uncached `/api/v1/usage/` answer compiled the
same few querysets to SQL again (the grouped sum, the capacity totals, the provisional check) and waited on two
round trips after authentication. `report_rows` builds each shape's SQL once per process through the very
querysets the ORM path runs (`grouped_queryset`, `capacity_and_provisional_sql`, `provisional_among_sql`), so both
paths ask the database the same statements; tests/api/test_report_queries.py compares their answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet, Sum

from apps.common.statements import Markers, RowShape, Template, fetch_together, text_values
from apps.usage.figures import CapacityFigures
from apps.usage.models import PodHour, UsageDay, UsageHour, WorkloadDay
from apps.usage.selectors.capacity import (
    capacity_and_provisional_of,
    capacity_and_provisional_sql,
    provisional_among_sql,
)
from apps.usage.selectors.rollups import Filters, apply_filters, group_columns, is_whole_day_range

# Query shapes kept per process: the API's group_by keys, filters and visibility make a few hundred at most in
# practice; a caller varying them on purpose only evicts the oldest.
SHAPES_KEPT = 256


def source_kind(start: datetime, end: datetime, group_by: Sequence[str], filters: Filters) -> str:
    """Which rows answer exactly and cheapest: pod rows for pods (and hour-level workloads, "pod"), the workload
    day rollup for whole-day workload answers ("workload-day"), else the usage day or hour rollup ("day", "hour")."""
    by_day = is_whole_day_range(start, end) and "hour" not in group_by
    workloads = "workload" in group_by or "workload" in filters
    if "pod" in group_by or (workloads and not by_day):
        return "pod"
    if workloads:
        return "workload-day"
    return "day" if by_day else "hour"


def report_source(start: datetime, end: datetime, group_by: Sequence[str], filters: Filters) -> tuple[QuerySet, str]:
    """The rows of `source_kind` over the range, and the kind."""
    kind = source_kind(start, end, group_by, filters)
    if kind == "pod":
        return PodHour.objects.filter(hour__gte=start, hour__lt=end), kind
    if kind == "workload-day":
        return WorkloadDay.objects.filter(day__gte=start.date(), day__lt=end.date()), kind
    if kind == "day":
        return UsageDay.objects.filter(day__gte=start.date(), day__lt=end.date()), kind
    return UsageHour.objects.filter(hour__gte=start, hour__lt=end), kind


# The sums' names in a grouped row, in UsageFigures' field order (`UsageFigures.of_sums` reads them so).
SUM_NAMES: tuple[str, ...] = ("_allocated", "_working", "_idle", "_unmeasured", "_cost", "_idle_cost", "_unpriced")


def figure_sums(signal: str) -> dict[str, Sum]:
    """The sums every usage row reads under `signal`, named as SUM_NAMES."""
    columns = ("allocated_gpu_hours", f"working_{signal}", f"idle_{signal}", f"unmeasured_{signal}", "cost",
               f"idle_cost_{signal}", "unpriced_gpu_hours")
    return {name: Sum(column) for name, column in zip(SUM_NAMES, columns, strict=True)}


def grouped_queryset(qs: QuerySet, group_by: Sequence[str], signal: str, by_day: bool) -> tuple[QuerySet, list[str]]:
    """The grouped sum over the filtered rows (at most GPUFINOPS_API_MAX_ROWS + 1 groups, ordered by the group
    columns) and the column each group key reads; `group_by` must not be empty."""
    qs, columns = group_columns(qs, group_by, by_day=by_day, cluster_column="cluster_id")
    # The cluster's name joined in the same query (one name per id: grouping by both is grouping by the id).
    named = ["cluster__name"] if "cluster" in group_by else []
    grouped = qs.values(*columns, *named).annotate(**figure_sums(signal)).order_by(*columns)
    return grouped[: settings.GPUFINOPS_API_MAX_ROWS + 1], columns


@dataclass(frozen=True)
class _Statements:
    grouped: Template
    rows: RowShape
    columns: tuple[str, ...]
    second: Template  # capacity and provisional (every team), or the provisional check (some teams)


@lru_cache(maxsize=SHAPES_KEPT)
def _statements(whole_days: bool, group_by: tuple[str, ...], signal: str, filter_counts: tuple[tuple[str, int], ...],
                visible_count: int | None, max_rows: int, alias: str) -> _Statements:
    """One shape's statements, compiled from marker values (`apps.common.statements`). Every argument is part of
    the SQL text: the key; `max_rows` and `alias` because a setting or database change must not reuse it."""
    found: dict[str, Any] = {}

    def markers_range(m: Markers) -> tuple[datetime, datetime]:
        # The rollup that answers follows whole days: the markers must fall on the same side of midnight.
        return m.moment("start", hour=0 if whole_days else 1), m.moment("end")

    def build_grouped(m: Markers) -> tuple[str, Sequence[Any]]:
        start, end = markers_range(m)
        filters = {key: tuple(m.texts(f"filter.{key}", n)) for key, n in filter_counts}
        visible = None if visible_count is None else set(m.texts("team", visible_count))
        qs, source = report_source(start, end, group_by, filters)
        qs = apply_filters(qs, visible, filters)
        grouped, columns = grouped_queryset(qs, group_by, signal, source in ("day", "workload-day"))
        shape, sql, params = RowShape.of(grouped, raw=SUM_NAMES)
        found.update(rows=shape, columns=tuple(columns), source=source)
        return sql, params

    grouped = Template.compile(build_grouped)

    def build_second(m: Markers) -> tuple[str, Sequence[Any]]:
        # The same marker values as the grouped statement (one Markers per template, the same names).
        start, end = markers_range(m)
        names = list(m.texts("filter.cluster", dict(filter_counts).get("cluster", 0)))
        if visible_count is None:
            return capacity_and_provisional_sql(start, end, names, found["source"] in ("day", "workload-day"))
        filters = {key: tuple(m.texts(f"filter.{key}", n)) for key, n in filter_counts}
        qs, _source = report_source(start, end, group_by, filters)
        qs = apply_filters(qs, set(m.texts("team", visible_count)), filters)
        return provisional_among_sql(start, end, names, qs.values("cluster_id"))

    return _Statements(grouped, found["rows"], found["columns"], Template.compile(build_second))


@dataclass(frozen=True)
class ReportRows:
    rows: list[tuple[Any, ...]]  # the grouped sum's rows, as the queryset's values() would give them, in `names` order
    names: tuple[str, ...]  # (the sums as the database gives them: `UsageFigures.of_sums` reads them)
    columns: list[str]
    capacity: CapacityFigures | None
    provisional: bool


def report_rows(*, start: datetime, end: datetime, group_by: Sequence[str], signal: str,
                visible_teams: set[str] | None, filters: Filters) -> ReportRows | None:
    """The grouped sum and the capacity and provisional check in one round trip, from statements compiled once
    per shape; None where the ORM path answers instead (not PostgreSQL, no group key, a caller without teams)."""
    if connection.vendor != "postgresql" or not group_by or visible_teams == set():
        return None
    statements = _statements(
        is_whole_day_range(start, end), tuple(group_by), signal, tuple((k, len(v)) for k, v in filters.items()),
        None if visible_teams is None else len(visible_teams), settings.GPUFINOPS_API_MAX_ROWS, connection.alias,
    )
    values: dict[str, object] = {"start": start, "end": end, **text_values("team", sorted(visible_teams or ()))}
    for key, chosen in filters.items():
        values.update(text_values(f"filter.{key}", chosen))
    grouped, second = fetch_together([
        (statements.grouped.sql, statements.grouped.params(values)),
        (statements.second.sql, statements.second.params(values)),
    ])
    rows, names = statements.rows.tuples(grouped), statements.rows.names
    if visible_teams is None:
        capacity, provisional = capacity_and_provisional_of(second[0])
        return ReportRows(rows, names, list(statements.columns), capacity, provisional)
    return ReportRows(rows, names, list(statements.columns), None, bool(second[0][0]))
