"""The usage report: what ``/api/v1/usage/`` answers, and what the reports and the dashboard read (ledger.md
defines every number). Typed figures (`apps.usage.figures`); ``UsageReport.as_dict`` is the API's JSON.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Max, QuerySet, Subquery

from apps.inventory.models import Cluster
from apps.usage.activity import SIGNALS, default_signal
from apps.usage.figures import CapacityFigures, PrintedRows, UsageFigures, UsageRow, coverage
from apps.usage.models import Bucket
from apps.usage.selectors.capacity import capacity_and_provisional, has_provisional_buckets
from apps.usage.selectors.report_queries import (
    SUM_NAMES,
    figure_sums,
    grouped_queryset,
    report_rows,
    report_source,
    source_kind,
)
from apps.usage.selectors.rollups import apply_filters, group_printer, make_filters

# group_by keys, in the order the API documents them.
GROUP_KEYS: tuple[str, ...] = (
    "team", "namespace", "workload", "pod", "cluster", "node_group", "gpu_model", "day", "hour",
)
# Keys that always come along: a workload is named within its namespace; a pod row carries its namespace,
# workload, node and how its GPUs were handed out, `allocation_mode` (interfaces.md).
IMPLIED_KEYS: dict[str, tuple[str, ...]] = {"workload": ("namespace",),
                                            "pod": ("namespace", "workload", "node", "allocation_mode")}
# Part of the cache key: a cached answer is a pickled `UsageReport`, and one of an older shape (a shared Redis
# across a deploy) must never be read back as the new one. Bump when UsageReport or its figures change shape.
CACHE_FORMAT = 2


def expand_group_by(group_by: Sequence[str]) -> list[str]:
    """`group_by` with the keys that come along (workload -> namespace; pod -> namespace, workload, node)."""
    out: list[str] = []
    for key in group_by:
        for k in (*IMPLIED_KEYS.get(key, ()), key):
            if k not in out:
                out.append(k)
    return out


class TooLarge(ValueError):
    """The answer asked for would exceed a bound on work per request; `param` names what to change."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class UsageReport:
    """What ``/api/v1/usage/`` answers, before rendering: rows and totals at the output precision (totals summed
    from the unrounded rows), the fleet's capacity for callers who see every team."""

    start: datetime
    end: datetime
    group_by: list[str]
    signal: str
    results: list[UsageRow]
    totals: UsageFigures
    capacity: CapacityFigures | None
    provisional: bool
    coverage: float | None
    source: str  # "day" or "hour": which rollup answered

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "start": self.start,
            "end": self.end,
            "group_by": self.group_by,
            "signal": self.signal,
            "currency": "USD",
            "provisional": self.provisional,
            "coverage": self.coverage,
            "results": [row.as_dict() for row in self.results],
            "totals": self.totals.as_dict(),
        }
        if self.capacity is not None:
            data["capacity"] = self.capacity.as_dict()
        return data

    def figures_by(self, key: str) -> dict[str, UsageFigures]:
        """Each row's figures by its value of one group key (the report grouped by that key alone)."""
        return {row.group[key]: row.figures for row in self.results}

    def printed_rows(self, teams: Sequence[str], *, fleet: bool) -> PrintedRows:
        """The teams' rows (a team without hours: zero) and totals as printed, adding up; with the unallocated
        row and the fleet's capacity as the total when `fleet` (and the capacity was read)."""
        by_team = self.figures_by("team")
        rows = [by_team.get(team, UsageFigures()) for team in teams]
        return PrintedRows.of(rows, self.totals, self.capacity if fleet else None)


def ledger_version() -> tuple[str, int, int | None]:
    """Changes whenever the ledger does: every bucket write stamps `collected_at` (indexed, so its maximum is
    one index probe), and deleting a cluster (which drops its buckets) changes the clusters' count and
    largest id. Cheap on purpose: it runs on every usage request."""
    newest = Bucket.objects.filter(collected_at__isnull=False).order_by("-collected_at").values("collected_at")[:1]
    v = Cluster.objects.aggregate(n=Count("id"), top=Max("id"), latest=Max(Subquery(newest)))  # one query
    return (v["latest"].isoformat() if v["latest"] else "", v["n"], v["top"])


def usage_report(
    *,
    start: datetime,
    end: datetime,
    group_by: list[str],
    signal: str | None = None,
    visible_teams: set[str] | None,
    cluster: str | None = None,
    team: str | None = None,
    filters: Mapping[str, Sequence[str]] | None = None,
) -> UsageReport:
    """`compute_usage_report`, answered from the cache while the ledger has not changed.

    Dashboards and reporting tools ask the same ranges over and over; the key holds every input,
    including which teams the caller sees, and the ledger's version, so an answer is never shared
    across visibility or outlived by a bucket write. `GPUFINOPS_API_CACHE_SECONDS=0` turns it off.
    """
    signal = signal or default_signal()
    normalized = make_filters(filters, cluster=cluster, team=team)
    args: dict[str, Any] = {"start": start, "end": end, "group_by": list(group_by), "signal": signal,
                            "visible_teams": visible_teams, "filters": normalized}
    ttl = settings.GPUFINOPS_API_CACHE_SECONDS
    if ttl <= 0:
        return compute_usage_report(**args)
    raw = repr((ledger_version(), start.isoformat(), end.isoformat(), tuple(group_by), signal,
                None if visible_teams is None else tuple(sorted(visible_teams)), sorted(normalized.items())))
    key = f"usage_report:{CACHE_FORMAT}:" + hashlib.sha256(raw.encode()).hexdigest()
    report: UsageReport | None = cache.get(key)
    if report is None:
        report = compute_usage_report(**args)
        # Only answers of bounded size are kept: the cache (Redis, or a capped in-process one) never grows by
        # what a caller asks for.
        if len(pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL)) <= settings.GPUFINOPS_API_CACHE_MAX_BYTES:
            cache.set(key, report, ttl)
    return report


def compute_usage_report(
    *,
    start: datetime,
    end: datetime,
    group_by: list[str],
    signal: str | None = None,
    visible_teams: set[str] | None,
    cluster: str | None = None,
    team: str | None = None,
    filters: Mapping[str, Sequence[str]] | None = None,
) -> UsageReport:
    """Allocated, working, idle, unmeasured GPU-hours and cost over ``[start, end)``, grouped and filtered.

    ``capacity`` (fleet, or the filtered clusters' capacity; never narrowed by team or namespace) is
    computed only when ``visible_teams`` is None: only callers who see every team see the unallocated
    remainder.
    """
    signal = signal or default_signal()
    if signal not in SIGNALS:
        raise ValueError(f"unknown signal {signal!r}")
    unknown = set(group_by) - set(GROUP_KEYS)
    if unknown:
        raise ValueError(f"unknown group_by keys {sorted(unknown)}")
    filters = make_filters(filters, cluster=cluster, team=team)
    group_by = expand_group_by(group_by)

    source = source_kind(start, end, group_by, filters)
    by_day = source in ("day", "workload-day")
    _check_hourly_span(start, end, group_by, by_day)
    compiled = report_rows(start=start, end=end, group_by=group_by, signal=signal, visible_teams=visible_teams,
                           filters=filters)
    if compiled is not None:  # PostgreSQL: the same statements, compiled once per shape, one round trip
        results, sums = _results(compiled.rows, compiled.names, group_by, compiled.columns)
        capacity, provisional = compiled.capacity, compiled.provisional
    else:
        qs = apply_filters(report_source(start, end, group_by, filters)[0], visible_teams, filters)
        results, sums = _grouped_rows(qs, group_by, signal, by_day)
        capacity = None
        if visible_teams is None:
            capacity, provisional = capacity_and_provisional(
                start=start, end=end, clusters=filters.get("cluster"), by_day=by_day
            )
        else:
            provisional = has_provisional_buckets(
                start=start, end=end, clusters=filters.get("cluster"), among=qs.values("cluster_id")
            )
    return UsageReport(
        start=start,
        end=end,
        group_by=group_by,
        signal=signal,
        results=results,
        totals=sums.rounded(),
        capacity=capacity,
        provisional=provisional,
        coverage=sums.coverage,
        source=source,
    )


def _check_hourly_span(start: datetime, end: datetime, group_by: Sequence[str], by_day: bool) -> None:
    limit = settings.GPUFINOPS_API_MAX_HOURLY_DAYS
    if not by_day and end - start > timedelta(days=limit):
        raise TooLarge(
            "group_by" if {"hour", "pod", "workload"} & set(group_by) else "end",
            f"Hour-level answers (group_by=hour or pod, or start/end not at midnight UTC) cover at most {limit} "
            "days; narrow start/end, or use whole days and group by day or workload.",
        )


def _grouped_rows(
    qs: QuerySet, group_by: Sequence[str], signal: str, by_day: bool
) -> tuple[list[UsageRow], UsageFigures]:
    """`_results` of the grouped sum under `signal` through the ORM (at most GPUFINOPS_API_MAX_ROWS groups)."""
    # No group: one row of the sums, none when nothing matched (`values()` would group by every column).
    if not group_by:
        total = qs.aggregate(**figure_sums(signal))
        rows = [tuple(total[name] for name in SUM_NAMES)] if total["_allocated"] is not None else []
        return _results(rows, SUM_NAMES, group_by, [])
    grouped, columns = grouped_queryset(qs, group_by, signal, by_day)
    names = (*columns, *(["cluster__name"] if "cluster" in group_by else []), *SUM_NAMES)
    return _results([tuple(row[name] for name in names) for row in grouped], names, group_by, columns)


def _results(rows: Sequence[Sequence[Any]], names: Sequence[str], group_by: Sequence[str],
             columns: Sequence[str]) -> tuple[list[UsageRow], UsageFigures]:
    """The grouped sum's rows (columns `names`) as the answer's rows, at the output precision, and their exact,
    unrounded sum; more than GPUFINOPS_API_MAX_ROWS rows is `TooLarge`. Each column's position and printer are
    found once: every row of every uncached usage answer passes through this loop."""
    if len(rows) > settings.GPUFINOPS_API_MAX_ROWS:
        raise TooLarge(
            "group_by",
            f"More than {settings.GPUFINOPS_API_MAX_ROWS} rows: group by fewer keys, filter (team, cluster, "
            "namespace, workload) or narrow start/end.",
        )
    at = {name: i for i, name in enumerate(names)}
    groups = [(key, at["cluster__name"] if key == "cluster" else at[column], group_printer(key))
              for key, column in zip(group_by, columns, strict=True)]
    sums_of = itemgetter(*(at[name] for name in SUM_NAMES))
    sums = [sums_of(row) for row in rows]
    results = [
        UsageRow({key: show(row[i]) for key, i, show in groups}, UsageFigures.of_sums(s, rounded=True),
                 coverage(float(s[0] or 0.0), float(s[3] or 0.0)))
        for row, s in zip(rows, sums, strict=True)
    ]
    total = UsageFigures.exact_sum(sums)  # of the unrounded rows
    return results, total
