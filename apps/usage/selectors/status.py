"""The state of the ledger: which buckets are due for collection, and whether the ledger is complete, as of when,
and what it is measured with (data status, clusters missing a signal)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone

from apps.common.timeutils import HOUR, floor_hour, hours_between
from apps.inventory.models import Cluster
from apps.inventory.selectors import visible_clusters
from apps.usage.activity import DEFAULT_METRICS, MetricsFix, default_signal, metrics_fix
from apps.usage.figures import coverage
from apps.usage.models import Bucket, UsageDay

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
        first = firsts.get(c.pk)
        if first is None:
            continue
        by_day = all_buckets[c.pk]
        usage = {day: d for (cluster_id, day), d in all_usage.items() if cluster_id == c.pk}
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

    @property
    def fix(self) -> MetricsFix:
        """The metrics-list line to add, and where (the chart's customMetrics, the Operator's ConfigMap)."""
        return metrics_fix(self.metric)


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


# ---- Freshness: when the ledger was last written ----


def data_as_of(*, visible_teams: set[str] | None) -> dict[str, datetime | None]:
    """When the ledger of the clusters the caller may see was last written: the newest collection time and the
    newest collected hour (None before anything was collected)."""
    agg = Bucket.objects.filter(
        cluster__in=visible_clusters(visible_teams=visible_teams), status=Bucket.Status.OK
    ).aggregate(collected_at=Max("collected_at"), hour=Max("hour"))
    return {"collected_at": agg["collected_at"], "hour": agg["hour"]}



# ---- Coverage of a period: how much of it is final (comparisons need comparable coverage) ----


def final_share(start: datetime, end: datetime, *, clusters: Sequence[str] | None = None) -> float | None:
    """The share of `[start, end)`'s hours that are final and OK, over the clusters collecting by its end (all of
    them, or those named): every hour of the range counts for such a cluster, including those before its first
    bucket (as a report period's coverage does, `apps.reports.periods.period_state`). None when no cluster was
    collecting."""
    return final_shares([(start, end)], clusters=clusters)[0]


def final_shares(ranges: Sequence[tuple[datetime, datetime]], *,
                 clusters: Sequence[str] | None = None) -> list[float | None]:
    """`final_share` of each range, in two queries whatever their number (a page compares against several
    periods: one query per period would grow with them)."""
    if not ranges:
        return []
    firsts = Bucket.objects.values("cluster_id").annotate(first=Min("hour"))
    if clusters:
        firsts = firsts.filter(cluster__name__in=list(clusters))
    first = {row["cluster_id"]: row["first"] for row in firsts}
    if not first:
        return [None] * len(ranges)
    counts = Bucket.objects.filter(cluster_id__in=list(first), state=Bucket.State.FINAL,
                                   status=Bucket.Status.OK).aggregate(**{
        f"r{i}": Count("id", filter=Q(hour__gte=start, hour__lt=end)) for i, (start, end) in enumerate(ranges)})
    shares: list[float | None] = []
    for i, (start, end) in enumerate(ranges):
        collecting = [cid for cid, hour in first.items() if hour < end]
        if not collecting:
            shares.append(None)
            continue
        # Only the clusters collecting by this range's end count; a later cluster has no final hour in it.
        shares.append(counts[f"r{i}"] / (len(collecting) * len(hours_between(start, end))))
    return shares
