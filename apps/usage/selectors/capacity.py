"""Capacity reads (ledger.md "Capacity"): capacity, unallocated and unavailable GPU-hours and their cost over a
range, totalled or grouped, and whether the range is still provisional. Capacity belongs to no team: only
callers who see every team may be shown it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet, Sum

from apps.usage.figures import CAPACITY_FIELDS, CapacityFigures, CapacityRow
from apps.usage.models import Bucket, CapacityDay, CapacityHour
from apps.usage.selectors.rollups import group_columns, group_value, is_whole_day_range

CAPACITY_GROUP_KEYS: tuple[str, ...] = ("cluster", "node_group", "gpu_model", "day", "hour")


def _capacity_rows(start: datetime, end: datetime, names: Sequence[str], by_day: bool | None) -> QuerySet:
    if by_day is None:
        by_day = is_whole_day_range(start, end)
    if by_day:
        qs: QuerySet = CapacityDay.objects.filter(day__gte=start.date(), day__lt=end.date())
    else:
        qs = CapacityHour.objects.filter(hour__gte=start, hour__lt=end)
    return qs.filter(cluster__name__in=names) if names else qs


def capacity_totals(
    *, start: datetime, end: datetime, cluster: str | None = None, clusters: Sequence[str] | None = None,
    by_day: bool | None = None,
) -> CapacityFigures:
    """Capacity, unallocated and unavailable GPU-hours, capacity cost and unallocated cost over ``[start, end)``."""
    names = [*(clusters or ()), *([cluster] if cluster else [])]
    sums = _capacity_rows(start, end, names, by_day).aggregate(**{name: Sum(name) for name in CAPACITY_FIELDS})
    return CapacityFigures.from_sums(sums)


def _provisional_rows(start: datetime, end: datetime, names: Sequence[str], among: QuerySet | None) -> QuerySet:
    qs = Bucket.objects.filter(hour__gte=start, hour__lt=end, state=Bucket.State.PROVISIONAL)
    if among is not None:
        qs = qs.filter(cluster_id__in=among)
    return qs.filter(cluster__name__in=names) if names else qs


def has_provisional_buckets(
    *, start: datetime, end: datetime, cluster: str | None = None, clusters: Sequence[str] | None = None,
    among: QuerySet | None = None,
) -> bool:
    """True when any bucket in ``[start, end)`` is still provisional (its numbers may change).

    ``among`` (a queryset of cluster ids) limits the check to the clusters the caller's rows are in.
    """
    names = [*(clusters or ()), *([cluster] if cluster else [])]
    return _provisional_rows(start, end, names, among).exists()


def capacity_and_provisional(
    *, start: datetime, end: datetime, clusters: Sequence[str] | None = None, by_day: bool | None = None,
) -> tuple[CapacityFigures, bool]:
    """`capacity_totals` and `has_provisional_buckets` (every cluster's buckets) in one round trip.

    Every uncached usage answer for a caller who sees every team needs both; under load each round trip to the
    database costs a wait for the CPU (bench/api.py --compare-trivial). The same two queries, one statement: an
    aggregate without GROUP BY always yields one row, so the EXISTS is answered even with no capacity rows.
    """
    names = list(clusters or ())
    if connection.vendor != "postgresql":  # elsewhere Django's converters shape the sums: two queries
        capacity = capacity_totals(start=start, end=end, clusters=names, by_day=by_day)
        return capacity, has_provisional_buckets(start=start, end=end, clusters=names)
    sql, params = capacity_and_provisional_sql(start, end, names, by_day)
    with connection.cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
    return capacity_and_provisional_of(row)


def capacity_and_provisional_sql(
    start: datetime, end: datetime, names: Sequence[str], by_day: bool | None,
) -> tuple[str, list[Any]]:
    """`capacity_and_provisional`'s one statement (PostgreSQL): the two querysets' own SQL, composed."""
    rows = _capacity_rows(start, end, names, by_day).order_by().values(*CAPACITY_FIELDS)
    rows_sql, rows_params = rows.query.sql_with_params()
    prov_sql, prov_params = _provisional_rows(start, end, names, None).order_by().values("id").query.sql_with_params()
    sums = ", ".join(f'SUM(capacity_rows."{name}")' for name in CAPACITY_FIELDS)
    return (f"SELECT {sums}, EXISTS({prov_sql}) FROM ({rows_sql}) capacity_rows", [*prov_params, *rows_params])


def capacity_and_provisional_of(row: Sequence[Any]) -> tuple[CapacityFigures, bool]:
    """The figures and the flag from `capacity_and_provisional_sql`'s one row."""
    *values, provisional = row
    return CapacityFigures.from_sums(dict(zip(CAPACITY_FIELDS, values, strict=True))), bool(provisional)


def provisional_among_sql(
    start: datetime, end: datetime, names: Sequence[str], among: QuerySet,
) -> tuple[str, list[Any]]:
    """`has_provisional_buckets(..., among=...)` as one `SELECT EXISTS(...)` statement (one boolean row)."""
    sql, params = _provisional_rows(start, end, names, among).order_by().values("id").query.sql_with_params()
    return f"SELECT EXISTS({sql})", list(params)


def capacity_rows(
    *, start: datetime, end: datetime, group_by: Sequence[str], clusters: Sequence[str] | None = None,
) -> list[CapacityRow]:
    """Capacity, unallocated and unavailable GPU-hours and their cost over `[start, end)` grouped by any of
    CAPACITY_GROUP_KEYS (the rows of `capacity_totals`): the day rollup for whole days, else the hour rollup."""
    unknown = set(group_by) - set(CAPACITY_GROUP_KEYS)
    if unknown:
        raise ValueError(f"unknown group_by keys {sorted(unknown)}")
    by_day = is_whole_day_range(start, end) and "hour" not in group_by
    qs, columns = group_columns(_capacity_rows(start, end, list(clusters or ()), by_day), group_by, by_day=by_day,
                                cluster_column="cluster__name")
    rows = qs.values(*columns).annotate(**{f"_{n}": Sum(n) for n in CAPACITY_FIELDS}).order_by(*columns)
    return [
        CapacityRow({key: group_value(key, row[column]) for key, column in zip(group_by, columns, strict=True)},
                    CapacityFigures.from_sums({n: row[f"_{n}"] for n in CAPACITY_FIELDS}))
        for row in rows[: settings.GPUFINOPS_API_MAX_ROWS]
    ]
