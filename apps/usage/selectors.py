"""Reads of the GPU-hour ledger for the API and the dashboards (ledger.md defines every number).

Aggregations read the rollups, never the pod rows: ``UsageDay``/``CapacityDay`` when the range is
whole UTC days and nobody asked for hours, else ``UsageHour``/``CapacityHour``. Idle allocations are
findings: ``apps.findings.selectors.idle_allocation_list``.

Access control is one argument, ``visible_teams``: the set from
``apps.accounts.selectors.visible_team_names`` (None means every team). Every read filters by it.
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Max, Min, Q, QuerySet, Subquery, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from apps.common.timeutils import HOUR, floor_hour, hours_between, is_midnight
from apps.inventory.models import Cluster
from apps.inventory.selectors import visible_clusters
from apps.usage import money
from apps.usage.activity import DEFAULT_METRICS, SIGNALS, default_signal
from apps.usage.models import Bucket, CapacityDay, CapacityHour, PodHour, UsageDay, UsageHour, WorkloadDay

# group_by keys, in the order the API documents them.
GROUP_KEYS: tuple[str, ...] = (
    "team", "namespace", "workload", "pod", "cluster", "node_group", "gpu_model", "day", "hour",
)
# Keys that always come along: a workload is named within its namespace; a pod row carries its namespace,
# workload and node (interfaces.md).
IMPLIED_KEYS: dict[str, tuple[str, ...]] = {"workload": ("namespace",), "pod": ("namespace", "workload", "node")}
# Filters (each repeatable) and the column each reads.
FILTER_KEYS: tuple[str, ...] = ("cluster", "team", "namespace", "workload", "node_group", "gpu_model")
# The figures of every usage row, in CSV column order.
USAGE_FIELDS: tuple[str, ...] = (
    "allocated_gpu_hours",
    "working_gpu_hours",
    "idle_gpu_hours",
    "unmeasured_gpu_hours",
    "cost",
    "idle_cost",
    "unpriced_gpu_hours",
)
MONEY_FIELDS = frozenset({"cost", "idle_cost", "capacity_cost", "unallocated_cost"})
CAPACITY_FIELDS: tuple[str, ...] = (
    "capacity_gpu_hours",
    "unallocated_gpu_hours",
    "unavailable_gpu_hours",
    "unpriced_gpu_hours",
    "capacity_cost",
    "unallocated_cost",
)
# Output precision of GPU-hours: a millionth. Money is exact decimal to the micro-dollar (apps/usage/money.py).
DECIMALS = 6
# IN-list size for pod lookups (SQLite allows 999 parameters per statement).
CHUNK = 500


def _round(value: float | None) -> float:
    return round(float(value or 0.0), DECIMALS)


def _total(name: str, values: list) -> float | Decimal:
    """Money adds up exactly (the printed total is the sum of the printed rows); GPU-hours with fsum."""
    return sum(values, money.ZERO) if name in MONEY_FIELDS else math.fsum(values)


def coverage(allocated: float, unmeasured: float) -> float | None:
    """Attribution coverage: the measured share of allocated GPU-hours; None when nothing was allocated."""
    if allocated <= 0:
        return None
    return round(max(0.0, min(1.0, 1.0 - unmeasured / allocated)), DECIMALS)


def is_whole_day_range(start: datetime, end: datetime) -> bool:
    """True when both ends are midnight UTC, so the day rollups answer exactly."""
    return is_midnight(start) and is_midnight(end)


def _team_filter(visible_teams: set[str] | None, team: str | None) -> Q:
    """The team part of every usage filter: what the caller may see, narrowed by ``?team=``."""
    q = Q()
    if visible_teams is not None:
        q &= Q(team__in=sorted(visible_teams))
    if team is not None:
        q &= Q(team=team)
    return q


Filters = dict[str, tuple[str, ...]]


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


def _apply_filters(qs: QuerySet, visible_teams: set[str] | None, filters: Filters) -> QuerySet:
    """Visibility first (what the caller may see), then the caller's own filters."""
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    for key, values in filters.items():
        qs = qs.filter(**{"cluster__name__in" if key == "cluster" else f"{key}__in": list(values)})
    return qs


def _source(start: datetime, end: datetime, group_by: Sequence[str], filters: Filters) -> tuple[QuerySet, str]:
    """The rollup that answers exactly and cheapest: pod rows for pods (and hour-level workloads), the
    workload day rollup for whole-day workload answers, else the usage day or hour rollup."""
    by_day = is_whole_day_range(start, end) and "hour" not in group_by
    workloads = "workload" in group_by or "workload" in filters
    if "pod" in group_by or (workloads and not by_day):
        return PodHour.objects.filter(hour__gte=start, hour__lt=end), "pod"
    if workloads:
        return WorkloadDay.objects.filter(day__gte=start.date(), day__lt=end.date()), "workload-day"
    if by_day:
        return UsageDay.objects.filter(day__gte=start.date(), day__lt=end.date()), "day"
    return UsageHour.objects.filter(hour__gte=start, hour__lt=end), "hour"


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
    """What ``/api/v1/usage/`` answers, before rendering."""

    start: datetime
    end: datetime
    group_by: list[str]
    signal: str
    results: list[dict[str, Any]]
    totals: dict[str, float]
    capacity: dict[str, float] | None
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
            "results": self.results,
            "totals": self.totals,
        }
        if self.capacity is not None:
            data["capacity"] = self.capacity
        return data


def busy_share(totals: dict[str, float]) -> float | None:
    """Working share of the measured GPU-hours of a usage total (unmeasured hours are left out, never guessed)."""
    measured = totals["working_gpu_hours"] + totals["idle_gpu_hours"]
    return totals["working_gpu_hours"] / measured if measured else None


def ledger_version() -> tuple:
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
    args = {"start": start, "end": end, "group_by": list(group_by), "signal": signal,
            "visible_teams": visible_teams, "filters": normalized}
    ttl = settings.GPUFINOPS_API_CACHE_SECONDS
    if ttl <= 0:
        return compute_usage_report(**args)
    raw = repr((ledger_version(), start.isoformat(), end.isoformat(), tuple(group_by), signal,
                None if visible_teams is None else tuple(sorted(visible_teams)), sorted(normalized.items())))
    key = "usage_report:" + hashlib.sha256(raw.encode()).hexdigest()
    report = cache.get(key)
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

    qs, source = _source(start, end, group_by, filters)
    by_day = source in ("day", "workload-day")
    limit = settings.GPUFINOPS_API_MAX_HOURLY_DAYS
    if not by_day and end - start > timedelta(days=limit):
        raise TooLarge(
            "group_by" if {"hour", "pod", "workload"} & set(group_by) else "end",
            f"Hour-level answers (group_by=hour or pod, or start/end not at midnight UTC) cover at most {limit} "
            "days; narrow start/end, or use whole days and group by day or workload.",
        )
    qs = _apply_filters(qs, visible_teams, filters)

    columns: list[str] = []
    for key in group_by:
        if key == "cluster":
            columns.append("cluster_id")
        elif key == "day" and not by_day:
            qs = qs.annotate(day_utc=TruncDate("hour", tzinfo=UTC))
            columns.append("day_utc")
        else:
            columns.append(key)

    rows = (
        qs.values(*columns)
        .annotate(
            _allocated=Sum("allocated_gpu_hours"),
            _working=Sum(f"working_{signal}"),
            _idle=Sum(f"idle_{signal}"),
            _unmeasured=Sum(f"unmeasured_{signal}"),
            _cost=Sum("cost"),
            _idle_cost=Sum(f"idle_cost_{signal}"),
            _unpriced=Sum("unpriced_gpu_hours"),
        )
        .order_by(*columns)
    )[: settings.GPUFINOPS_API_MAX_ROWS + 1]
    if len(rows) > settings.GPUFINOPS_API_MAX_ROWS:
        raise TooLarge(
            "group_by",
            f"More than {settings.GPUFINOPS_API_MAX_ROWS} rows: group by fewer keys, filter (team, cluster, "
            "namespace, workload) or narrow start/end.",
        )
    cluster_names = dict(Cluster.objects.values_list("id", "name")) if "cluster" in group_by else {}

    results: list[dict[str, Any]] = []
    partials: dict[str, list] = {name: [] for name in USAGE_FIELDS}
    for row in rows:
        out: dict[str, Any] = {}
        for key, column in zip(group_by, columns, strict=True):
            value = row[column]
            if key == "cluster":
                value = cluster_names.get(value, str(value))
            elif key == "day":
                value = value.isoformat() if isinstance(value, date) else str(value)
            elif key == "hour":
                value = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            out[key] = value
        figures = {
            "allocated_gpu_hours": row["_allocated"] or 0.0,
            "working_gpu_hours": row["_working"] or 0.0,
            "idle_gpu_hours": row["_idle"] or 0.0,
            "unmeasured_gpu_hours": row["_unmeasured"] or 0.0,
            "cost": money.micro(row["_cost"]),
            "idle_cost": money.micro(row["_idle_cost"]),
            "unpriced_gpu_hours": row["_unpriced"] or 0.0,
        }
        for name, value in figures.items():
            partials[name].append(value)
            out[name] = value if name in MONEY_FIELDS else _round(value)
        out["coverage"] = coverage(figures["allocated_gpu_hours"], figures["unmeasured_gpu_hours"])
        results.append(out)
    sums = {name: _total(name, partials[name]) for name in USAGE_FIELDS}
    totals = {name: value if name in MONEY_FIELDS else _round(value) for name, value in sums.items()}

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
        totals=totals,
        capacity=capacity,
        provisional=provisional,
        coverage=coverage(sums["allocated_gpu_hours"], sums["unmeasured_gpu_hours"]),
        source=source,
    )


def _capacity_rows(start: datetime, end: datetime, names: Sequence[str], by_day: bool | None) -> QuerySet:
    if by_day is None:
        by_day = is_whole_day_range(start, end)
    if by_day:
        qs: QuerySet = CapacityDay.objects.filter(day__gte=start.date(), day__lt=end.date())
    else:
        qs = CapacityHour.objects.filter(hour__gte=start, hour__lt=end)
    return qs.filter(cluster__name__in=names) if names else qs


def _capacity_figures(sums: Mapping[str, Any]) -> dict:
    return {name: money.micro(sums[name]) if name in MONEY_FIELDS else _round(sums[name]) for name in CAPACITY_FIELDS}


def capacity_totals(
    *, start: datetime, end: datetime, cluster: str | None = None, clusters: Sequence[str] | None = None,
    by_day: bool | None = None,
) -> dict:
    """Capacity, unallocated and unavailable GPU-hours, capacity cost and unallocated cost over ``[start, end)``."""
    names = [*(clusters or ()), *([cluster] if cluster else [])]
    sums = _capacity_rows(start, end, names, by_day).aggregate(**{name: Sum(name) for name in CAPACITY_FIELDS})
    return _capacity_figures(sums)


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
) -> tuple[dict, bool]:
    """`capacity_totals` and `has_provisional_buckets` (every cluster's buckets) in one round trip.

    Every uncached usage answer for a caller who sees every team needs both; under load each round trip to the
    database costs a wait for the CPU (bench/api.py --compare-trivial). The same two queries, one statement: an
    aggregate without GROUP BY always yields one row, so the EXISTS is answered even with no capacity rows.
    """
    names = list(clusters or ())
    if connection.vendor != "postgresql":  # elsewhere Django's converters shape the sums: two queries
        capacity = capacity_totals(start=start, end=end, clusters=names, by_day=by_day)
        return capacity, has_provisional_buckets(start=start, end=end, clusters=names)
    rows = _capacity_rows(start, end, names, by_day).order_by().values(*CAPACITY_FIELDS)
    rows_sql, rows_params = rows.query.sql_with_params()
    prov_sql, prov_params = _provisional_rows(start, end, names, None).order_by().values("id").query.sql_with_params()
    sums = ", ".join(f'SUM(capacity_rows."{name}")' for name in CAPACITY_FIELDS)
    with connection.cursor() as cur:
        cur.execute(f"SELECT {sums}, EXISTS({prov_sql}) FROM ({rows_sql}) capacity_rows", [*prov_params, *rows_params])
        *values, provisional = cur.fetchone()
    return _capacity_figures(dict(zip(CAPACITY_FIELDS, values, strict=True))), bool(provisional)


# ---- Collection: which buckets are due ----


def due_hours(cluster: Cluster, now: datetime, *, limit: int | None = None) -> list[datetime]:
    """The buckets a scheduled run should (re)collect, oldest first, at most `limit` (the current hour always):

    * the current (provisional) hour;
    * hours since the last final bucket (on a first run, `GPUFINOPS_FIRST_RUN_HOURS`) never attempted;
    * OK buckets still provisional whose hour has ended (to finalize them);
    * buckets that failed, came out without DCGM data or degraded, once their backoff has passed.
    Abandoned buckets and those waiting out their backoff are not due, however many there are.
    """
    current = floor_hour(now)
    last_final = (
        Bucket.objects.filter(cluster=cluster, state=Bucket.State.FINAL, status=Bucket.Status.OK)
        .order_by("-hour").values_list("hour", flat=True).first()
    )
    first = last_final + HOUR if last_final else current - timedelta(hours=settings.GPUFINOPS_FIRST_RUN_HOURS)
    attempted = set(Bucket.objects.filter(cluster=cluster, hour__gte=first).values_list("hour", flat=True))
    hours = {h for h in hours_between(first, current) if h not in attempted}
    retried = [Bucket.Status.FAILED, Bucket.Status.SOURCE_MISSING, Bucket.Status.DEGRADED_SOURCE]
    due = Bucket.objects.filter(cluster=cluster).filter(
        Q(status=Bucket.Status.PENDING)  # claimed and never written (a worker died): the lease decides at claim
        | Q(status__in=retried, next_attempt_at__lte=now)
        | Q(status=Bucket.Status.OK, state=Bucket.State.PROVISIONAL, hour__lt=current)
    )
    hours.update(due.values_list("hour", flat=True))
    hours.discard(current)
    ordered = sorted(hours)
    if limit is not None:
        ordered = ordered[: max(limit - 1, 0)]
    return [*ordered, current]


# ---- Data status: is the ledger complete, and what is it measured with ----

BUCKET_STATES = ("ok", "provisional", "failed", "source_missing", "degraded_source", "abandoned", "pending", "missing")


@dataclass(frozen=True)
class DayStatus:
    """One cluster's buckets of one UTC day, by state, with coverage and the reasons things went wrong."""

    cluster: str
    day: date
    hours: int  # hours of the day up to now (and since the cluster's first bucket)
    counts: dict[str, int]  # each of BUCKET_STATES
    coverage: float | None  # attribution coverage under the default signal
    signals: list[str]  # signals the day's DCGM series carried
    reasons: list[str]  # distinct errors of the day's failed, degraded or abandoned buckets (at most 5)

    @property
    def complete(self) -> bool:
        return self.counts["ok"] == self.hours


def data_status(
    *, start: datetime, end: datetime, visible_teams: set[str] | None, cluster: str | None = None,
    now: datetime | None = None,
) -> list[DayStatus]:
    """Per visible cluster and day of `[start, end)`: buckets ok, provisional, failed, without DCGM data,
    degraded, abandoned, pending or missing (never attempted), the day's coverage and why."""
    now = now or timezone.now()
    signal = default_signal()
    clusters = list(visible_clusters(visible_teams=visible_teams, cluster=cluster))
    # Four queries whatever the number of clusters and days.
    firsts = dict(
        Bucket.objects.filter(cluster__in=clusters).values("cluster_id").annotate(f=Min("hour"))
        .values_list("cluster_id", "f")
    )
    all_buckets: dict[int, dict[date, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    for b in Bucket.objects.filter(cluster__in=clusters, hour__gte=start, hour__lt=end).values_list(
        "cluster_id", "hour", "state", "status", "last_error", "signals"
    ):
        all_buckets[b[0]][b[1].date()].append(b[1:])
    all_usage = {
        (d["cluster_id"], d["day"]): d
        for d in UsageDay.objects.filter(
            cluster__in=clusters, day__gte=start.date(), day__lt=end.date() + timedelta(days=1)
        ).values("cluster_id", "day").annotate(a=Sum("allocated_gpu_hours"), u=Sum(f"unmeasured_{signal}"))
    }
    out: list[DayStatus] = []
    for c in clusters:
        first = firsts.get(c.id)
        if first is None:
            continue
        by_day = all_buckets[c.id]
        usage = {day: d for (cluster_id, day), d in all_usage.items() if cluster_id == c.id}
        day = max(start, floor_hour(first)).date()
        while datetime(day.year, day.month, day.day, tzinfo=UTC) < min(end, now):
            day_start = datetime(day.year, day.month, day.day, tzinfo=UTC)
            span = hours_between(max(day_start, start, floor_hour(first)), min(day_start + timedelta(days=1), end, now))
            counts = dict.fromkeys(BUCKET_STATES, 0)
            reasons: list[str] = []
            signals: set[str] = set()
            for _hour, state, status, error, sigs in by_day.get(day, []):
                key = "provisional" if status == "ok" and state == "provisional" else status
                counts[key] += 1
                signals.update(sigs or [])
                if error and error not in reasons and len(reasons) < 5:
                    reasons.append(error)
            counts["missing"] = max(len(span) - len(by_day.get(day, [])), 0)
            u = usage.get(day)
            out.append(DayStatus(
                cluster=c.name, day=day, hours=len(span), counts=counts,
                coverage=coverage(u["a"] or 0.0, u["u"] or 0.0) if u else None,
                signals=sorted(signals), reasons=reasons,
            ))
            day += timedelta(days=1)
    return out


@dataclass(frozen=True)
class MissingSignal:
    """A cluster whose DCGM series lack a signal: its hours are unmeasured under that signal."""

    cluster: str
    signal: str
    metric: str
    since: datetime  # the oldest recent bucket without it


def clusters_missing_signal(
    *, visible_teams: set[str] | None, signal: str | None = None, within: timedelta = timedelta(hours=24)
) -> list[MissingSignal]:
    """Visible clusters whose recent buckets had DCGM series but not `signal` (default: the default signal)."""
    signal = signal or default_signal()
    since = timezone.now() - within
    out = []
    for c in visible_clusters(visible_teams=visible_teams):
        recent = list(
            Bucket.objects.filter(cluster=c, hour__gte=since, series__gt=0)
            .order_by("hour")
            .values_list("hour", "signals")
        )
        lacking = [hour for hour, signals in recent if signal not in (signals or [])]
        if recent and len(lacking) == len(recent):
            metric = (c.metric_names or {}).get(signal) or DEFAULT_METRICS[signal]
            out.append(MissingSignal(c.name, signal, metric, lacking[0]))
    return out


# ---- Reads for the dashboard pages (appended; the functions above are unchanged) ----


def data_as_of(*, visible_teams: set[str] | None) -> dict[str, datetime | None]:
    """When the ledger of the clusters the caller may see was last written: the newest collection time and the
    newest collected hour (None before anything was collected)."""
    agg = Bucket.objects.filter(
        cluster__in=visible_clusters(visible_teams=visible_teams), status=Bucket.Status.OK
    ).aggregate(collected_at=Max("collected_at"), hour=Max("hour"))
    return {"collected_at": agg["collected_at"], "hour": agg["hour"]}


def workload_pods(
    *, start: datetime, end: datetime, visible_teams: set[str] | None, cluster: str, namespace: str,
    workload: str, signal: str | None = None,
) -> list[dict[str, Any]]:
    """The pods of one workload in `[start, end)` (PodHour, read by the workload index): where each ran, what it
    held (most GPUs in any hour, its request), its queue, its first and last hour, and its figures under `signal`."""
    signal = signal or default_signal()
    qs = PodHour.objects.filter(cluster__name=cluster, namespace=namespace, workload=workload,
                                hour__gte=start, hour__lt=end)
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    rows = (
        qs.values("team", "pod", "pod_uid", "node", "node_group", "gpu_model", "resources", "cluster_queue",
                  "local_queue")
        .annotate(
            gpus=Max("gpus"), first_hour=Min("hour"), last_hour=Max("hour"), hours=Count("id"),
            _allocated=Sum("allocated_gpu_hours"), _working=Sum(f"working_{signal}"), _idle=Sum(f"idle_{signal}"),
            _unmeasured=Sum(f"unmeasured_{signal}"), _cost=Sum("cost"), _idle_cost=Sum(f"idle_cost_{signal}"),
            _unpriced=Sum("unpriced_gpu_hours"),
        )
        .order_by("first_hour", "pod", "pod_uid")
    )[: settings.GPUFINOPS_API_MAX_ROWS]
    out = []
    for r in rows:
        out.append({
            "team": r["team"], "pod": r["pod"], "pod_uid": r["pod_uid"], "node": r["node"],
            "node_group": r["node_group"], "gpu_model": r["gpu_model"], "resources": r["resources"],
            "cluster_queue": r["cluster_queue"], "local_queue": r["local_queue"], "gpus": _round(r["gpus"]),
            "first_hour": r["first_hour"], "last_hour": r["last_hour"], "hours": r["hours"],
            "allocated_gpu_hours": _round(r["_allocated"]), "working_gpu_hours": _round(r["_working"]),
            "idle_gpu_hours": _round(r["_idle"]), "unmeasured_gpu_hours": _round(r["_unmeasured"]),
            "cost": money.micro(r["_cost"]), "idle_cost": money.micro(r["_idle_cost"]),
            "unpriced_gpu_hours": _round(r["_unpriced"]),
        })
    return out


def workload_seen(
    *, visible_teams: set[str] | None, cluster: str, namespace: str, workload: str
) -> dict[str, datetime | None]:
    """The first and last hour the ledger has any pod of one workload in (over its whole history)."""
    qs = PodHour.objects.filter(cluster__name=cluster, namespace=namespace, workload=workload)
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    agg = qs.aggregate(first=Min("hour"), last=Max("hour"))
    return {"first": agg["first"], "last": agg["last"]}


def pod_workloads(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str], str]:
    """{(cluster, namespace, pod): workload} for idle-allocation rows (each names its cluster's latest bucket):
    one query per cluster."""
    by_cluster: dict[tuple[str, datetime], set[tuple[str, str]]] = defaultdict(set)
    for r in rows:
        by_cluster[(r["cluster"], r["last_bucket"])].add((r["namespace"], r["pod"]))
    out: dict[tuple[str, str, str], str] = {}
    for (cluster, hour), pods in by_cluster.items():
        names = sorted({p for _, p in pods})
        for i in range(0, len(names), CHUNK):
            for namespace, pod, workload in PodHour.objects.filter(
                cluster__name=cluster, hour=hour, pod__in=names[i : i + CHUNK]
            ).values_list("namespace", "pod", "workload"):
                if (namespace, pod) in pods:
                    out[(cluster, namespace, pod)] = workload
    return out


CAPACITY_GROUP_KEYS: tuple[str, ...] = ("cluster", "node_group", "gpu_model", "day", "hour")


def capacity_rows(
    *, start: datetime, end: datetime, group_by: Sequence[str], clusters: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Capacity, unallocated and unavailable GPU-hours and their cost over `[start, end)` grouped by any of
    CAPACITY_GROUP_KEYS (the rows of `capacity_totals`): the day rollup for whole days, else the hour rollup.
    Capacity belongs to no team: only callers who see every team may be shown it."""
    unknown = set(group_by) - set(CAPACITY_GROUP_KEYS)
    if unknown:
        raise ValueError(f"unknown group_by keys {sorted(unknown)}")
    by_day = is_whole_day_range(start, end) and "hour" not in group_by
    if by_day:
        qs: QuerySet = CapacityDay.objects.filter(day__gte=start.date(), day__lt=end.date())
    else:
        qs = CapacityHour.objects.filter(hour__gte=start, hour__lt=end)
    if clusters:
        qs = qs.filter(cluster__name__in=list(clusters))
    columns = []
    for key in group_by:
        if key == "cluster":
            columns.append("cluster__name")
        elif key == "day" and not by_day:
            qs = qs.annotate(day_utc=TruncDate("hour", tzinfo=UTC))
            columns.append("day_utc")
        else:
            columns.append(key)
    rows = qs.values(*columns).annotate(**{f"_{n}": Sum(n) for n in CAPACITY_FIELDS}).order_by(*columns)
    out = []
    for row in rows[: settings.GPUFINOPS_API_MAX_ROWS]:
        item: dict[str, Any] = {}
        for key, column in zip(group_by, columns, strict=True):
            value = row[column]
            if key == "day":
                value = value.isoformat() if isinstance(value, date) else str(value)
            elif key == "hour":
                value = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            item[key] = value
        for name in CAPACITY_FIELDS:
            v = row[f"_{name}"]
            item[name] = money.micro(v) if name in MONEY_FIELDS else _round(v)
        out.append(item)
    return out
