"""What every read of the ledger shares: which rollup answers a range, the filters and how group values print.

Aggregations read the rollups, never the pod rows when they can help it: ``UsageDay``/``CapacityDay`` when the
range is whole UTC days and nobody asked for hours, else ``UsageHour``/``CapacityHour``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime

from django.db.models import QuerySet
from django.db.models.functions import TruncDate

from apps.common.timeutils import is_midnight

# Filters (each repeatable) and the column each reads.
FILTER_KEYS: tuple[str, ...] = ("cluster", "team", "namespace", "workload", "node_group", "gpu_model")

Filters = dict[str, tuple[str, ...]]


def is_whole_day_range(start: datetime, end: datetime) -> bool:
    """True when both ends are midnight UTC, so the day rollups answer exactly."""
    return is_midnight(start) and is_midnight(end)


def make_filters(filters: Mapping[str, Sequence[str]] | None = None, *, cluster: str | None = None,
                 team: str | None = None) -> Filters:
    """Normalized filters: each key of FILTER_KEYS to a sorted tuple of values (absent = no filter)."""
    out: dict[str, set[str]] = {k: set(v) for k, v in (filters or {}).items() if v}
    if cluster is not None:
        out.setdefault("cluster", set()).add(cluster)
    if team is not None:
        out.setdefault("team", set()).add(team)
    unknown = set(out) - set(FILTER_KEYS)
    if unknown:
        raise ValueError(f"unknown filters {sorted(unknown)}")
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}


def apply_filters(qs: QuerySet, visible_teams: set[str] | None, filters: Filters) -> QuerySet:
    """Visibility first (what the caller may see), then the caller's own filters."""
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    for key, values in filters.items():
        qs = qs.filter(**{"cluster__name__in" if key == "cluster" else f"{key}__in": list(values)})
    return qs


def group_columns(qs: QuerySet, group_by: Sequence[str], *, by_day: bool,
                  cluster_column: str) -> tuple[QuerySet, list[str]]:
    """The column each group key reads, in order (the cluster by `cluster_column`: its id or its name); hour rows
    grouped by day get their UTC day."""
    columns: list[str] = []
    for key in group_by:
        if key == "cluster":
            columns.append(cluster_column)
        elif key == "day" and not by_day:
            qs = qs.annotate(day_utc=TruncDate("hour", tzinfo=UTC))
            columns.append("day_utc")
        else:
            columns.append(key)
    return qs, columns


def group_value(key: str, value: object) -> str:
    """A group key's value as the API prints it: days ISO 8601, hours `YYYY-MM-DDTHH:MM:SSZ` in UTC."""
    return group_printer(key)(value)


def group_printer(key: str) -> Callable[[object], str]:
    """`group_value` for one key, chosen once (an answer prints every row's group values)."""
    return _PRINTERS.get(key, str)


def _print_day(value: object) -> str:
    return value.isoformat() if isinstance(value, date) else str(value)


def _print_hour(value: object) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(value, datetime) else str(value)


_PRINTERS: dict[str, Callable[[object], str]] = {"day": _print_day, "hour": _print_hour}
