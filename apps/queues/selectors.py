"""Reads of the queues app: quota per queue, admission waits, and what the quota bought.

Visibility (``visible_teams`` from ``apps.accounts.selectors.visible_team_names``; None = every team):
a ClusterQueue is visible to a team when one of its LocalQueues sits in a namespace of that team;
admission waits and GPU-hours are counted over the team's own workloads and pods only.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime

from django.db.models import QuerySet, Sum

from apps.common.snapshots import latest_per_cluster
from apps.common.timeutils import floor_hour
from apps.inventory.gpus import is_device_resource
from apps.inventory.models import Cluster
from apps.inventory.selectors import visible_clusters
from apps.queues.models import ClusterQueueSnapshot, LocalQueueSnapshot, QueueCollection, QuotaSnapshot, Workload
from apps.usage.models import PodHour


def _latest_collection(cluster: Cluster, at: datetime) -> QueueCollection | None:
    return QueueCollection.objects.filter(cluster=cluster, taken_at__lte=at).order_by("-taken_at").first()


def visible_cluster_queues(collection: QueueCollection, visible_teams: set[str] | None) -> set[str] | None:
    """Names of the collection's ClusterQueues the caller may see; None means all of them."""
    if visible_teams is None:
        return None
    rows = LocalQueueSnapshot.objects.filter(collection=collection, team__in=sorted(visible_teams))
    return set(rows.values_list("cluster_queue", flat=True))


# ---- /api/v1/queues/ ----


def latest_collections(clusters: QuerySet[Cluster], at: datetime) -> list[QueueCollection]:
    """Each cluster's latest queue collection at or before `at`, in two queries whatever the number of clusters."""
    match = latest_per_cluster(QueueCollection, clusters, at)
    return list(QueueCollection.objects.filter(match).select_related("cluster")) if match else []


def queue_list(*, at: datetime, visible_teams: set[str] | None, cluster: str | None = None) -> list[QuotaSnapshot]:
    """One row per ClusterQueue, flavor and resource from each cluster's latest snapshot at or before `at`.

    A ClusterQueue is visible to a team member when one of its LocalQueues sits in a namespace of their teams.
    """
    collections = latest_collections(visible_clusters(visible_teams=visible_teams, cluster=cluster), at)
    if not collections:
        return []
    rows = list(QuotaSnapshot.objects.filter(cluster_queue__collection__in=collections).select_related(
        "cluster", "cluster_queue"
    ))
    if visible_teams is not None:
        allowed = LocalQueueSnapshot.objects.filter(collection__in=collections, team__in=sorted(visible_teams))
        pairs = set(allowed.values_list("collection_id", "cluster_queue"))
        rows = [q for q in rows if (q.cluster_queue.collection_id, q.cluster_queue.name) in pairs]
    return sorted(rows, key=lambda q: (q.cluster.name, q.cluster_queue.name, q.flavor, q.resource))


# ---- Admission wait ----


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of one or more values, with linear interpolation between closest ranks
    (numpy's default)."""
    if not values:
        raise ValueError("the percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _waits(workloads: QuerySet[Workload]) -> Iterator[tuple[str, str, datetime, float]]:
    """(cluster, ClusterQueue, admitted at, seconds from creation to admission) of each admitted workload."""
    rows = workloads.values_list("cluster__name", "cluster_queue", "created", "admitted_at")
    for name, cq, created, admitted in rows:
        if created is not None and admitted is not None:  # the callers' queries ask for both
            yield name, cq, admitted, max(0.0, (admitted - created).total_seconds())


@dataclass(frozen=True)
class AdmissionWait:
    """Creation-to-admission wait of the workloads one ClusterQueue admitted on one UTC day."""

    cluster: str
    cluster_queue: str
    day: date
    workloads: int
    p50_seconds: float
    p95_seconds: float
    max_seconds: float


def admission_waits(
    *, start: datetime, end: datetime, visible_teams: set[str] | None, cluster: str | None = None
) -> list[AdmissionWait]:
    """p50/p95 admission wait per ClusterQueue and day of admission, over workloads admitted in `[start, end)`."""
    qs = Workload.objects.filter(
        cluster__in=visible_clusters(visible_teams=visible_teams, cluster=cluster),
        admitted_at__gte=start,
        admitted_at__lt=end,
        created__isnull=False,
    )
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    waits: dict[tuple[str, str, date], list[float]] = defaultdict(list)
    for name, cq, admitted, seconds in _waits(qs):
        waits[(name, cq, admitted.date())].append(seconds)
    return [
        AdmissionWait(c, cq, day, len(v), percentile(v, 50), percentile(v, 95), max(v))
        for (c, cq, day), v in sorted(waits.items())
    ]


# ---- What the quota bought ----


@dataclass
class QueueUsage:
    """GPU quota held by one ClusterQueue next to the GPU-hours its pods allocated and worked.

    `borrowed_idle_gpu_hours` = Σ over hours of min(GPUs borrowed from the cohort, idle GPU-hours of
    the queue's pods): quota taken from other queues while at least that much of it sat idle.
    """

    cluster: str
    cluster_queue: str
    cohort: str = ""
    nominal_gpus: float = 0.0
    borrowed_gpus: float = 0.0  # at the latest snapshot in the range
    allocated_gpu_hours: float = 0.0
    working_gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    unmeasured_gpu_hours: float = 0.0
    borrowed_gpu_hours: float = 0.0
    borrowed_idle_gpu_hours: float = 0.0
    idle_by_hour: dict[datetime, float] = field(default_factory=dict, repr=False)

    @property
    def borrowed_idle(self) -> bool:
        """Flag: the queue borrowed GPU quota while its GPUs idled (at least 0.5 GPU-hours of it)."""
        return self.borrowed_idle_gpu_hours >= 0.5


def queue_usage(
    *,
    start: datetime,
    end: datetime,
    signal: str,
    visible_teams: set[str] | None,
    cluster: str | None = None,
) -> list[QueueUsage]:
    """Per ClusterQueue over `[start, end)`: GPU quota, GPU-hours of its pods, borrowed-but-idle hours.

    A pod counts for the ClusterQueue on its `kueue.x-k8s.io/cluster-queue-name` label, else the one
    its LocalQueue (`kueue.x-k8s.io/queue-name` in its namespace) points to.
    """
    out: list[QueueUsage] = []
    for c in visible_clusters(visible_teams=visible_teams, cluster=cluster):
        latest = QueueCollection.objects.filter(cluster=c, taken_at__lt=end).order_by("-taken_at").first()
        if latest is None:
            continue
        allowed = visible_cluster_queues(latest, visible_teams)
        rows = _quota_rows(c, latest, allowed)
        _add_pod_hours(rows, c, latest, start, end, signal, visible_teams)
        _add_borrowed(rows, c, start, end)
        out.extend(rows[name] for name in sorted(rows))
    return out


def _quota_rows(c: Cluster, latest: QueueCollection, allowed: set[str] | None) -> dict[str, QueueUsage]:
    rows: dict[str, QueueUsage] = {}
    for cq in latest.cluster_queues.prefetch_related("quotas"):
        if allowed is not None and cq.name not in allowed:
            continue
        row = QueueUsage(cluster=c.name, cluster_queue=cq.name, cohort=cq.cohort)
        for q in cq.quotas.all():
            if is_device_resource(q.resource):
                row.nominal_gpus += q.nominal_quota
                row.borrowed_gpus += q.borrowed
        rows[cq.name] = row
    return rows


def _add_pod_hours(
    rows: dict[str, QueueUsage],
    c: Cluster,
    latest: QueueCollection,
    start: datetime,
    end: datetime,
    signal: str,
    visible_teams: set[str] | None,
) -> None:
    lq_to_cq = {(lq.namespace, lq.name): lq.cluster_queue for lq in latest.local_queues.all()}
    qs = PodHour.objects.filter(cluster=c, hour__gte=start, hour__lt=end)
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    grouped = qs.values("hour", "namespace", "cluster_queue", "local_queue").annotate(
        allocated=Sum("allocated_gpu_hours"),
        working=Sum(f"working_{signal}"),
        idle=Sum(f"idle_{signal}"),
        unmeasured=Sum(f"unmeasured_{signal}"),
    )
    for g in grouped:
        name = g["cluster_queue"] or lq_to_cq.get((g["namespace"], g["local_queue"]), "")
        row = rows.get(name)
        if row is None:
            continue
        row.allocated_gpu_hours += g["allocated"] or 0.0
        row.working_gpu_hours += g["working"] or 0.0
        row.idle_gpu_hours += g["idle"] or 0.0
        row.unmeasured_gpu_hours += g["unmeasured"] or 0.0
        row.idle_by_hour[g["hour"]] = row.idle_by_hour.get(g["hour"], 0.0) + (g["idle"] or 0.0)


def _add_borrowed(rows: dict[str, QueueUsage], c: Cluster, start: datetime, end: datetime) -> None:
    """Borrowed GPUs per hour = the most borrowed at any snapshot in the hour."""
    snapshots = (
        QuotaSnapshot.objects.filter(cluster=c, taken_at__gte=start, taken_at__lt=end)
        .values("taken_at", "cluster_queue__name", "resource")
        .annotate(borrowed=Sum("borrowed"))
    )
    per_hour: dict[tuple[str, datetime], float] = defaultdict(float)
    per_snapshot: dict[tuple[str, datetime], float] = defaultdict(float)
    for s in snapshots:
        if is_device_resource(s["resource"]):
            per_snapshot[(s["cluster_queue__name"], s["taken_at"])] += s["borrowed"] or 0.0
    for (name, taken_at), borrowed in per_snapshot.items():
        key = (name, floor_hour(taken_at))
        per_hour[key] = max(per_hour[key], borrowed)
    for (name, hour), borrowed in per_hour.items():
        row = rows.get(name)
        if row is None or borrowed <= 0:
            continue
        row.borrowed_gpu_hours += borrowed
        row.borrowed_idle_gpu_hours += min(borrowed, row.idle_by_hour.get(hour, 0.0))


# ---- Over a range, per queue: admission wait summary, LocalQueues, what Kueue answered, quota over time ----


@dataclass(frozen=True)
class WaitSummary:
    """Creation-to-admission wait of the workloads one ClusterQueue admitted in a range (the caller's teams')."""

    cluster: str
    cluster_queue: str
    workloads: int
    p50_seconds: float | None
    p95_seconds: float | None
    max_seconds: float | None


def admission_wait_summary(
    *, start: datetime, end: datetime, visible_teams: set[str] | None, cluster: str | None = None
) -> dict[tuple[str, str], WaitSummary]:
    """p50/p95/max admission wait per (cluster, ClusterQueue) over workloads admitted in `[start, end)`."""
    qs = Workload.objects.filter(
        cluster__in=visible_clusters(visible_teams=visible_teams, cluster=cluster),
        admitted_at__gte=start, admitted_at__lt=end, created__isnull=False,
    )
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    waits: dict[tuple[str, str], list[float]] = defaultdict(list)
    for name, cq, _admitted, seconds in _waits(qs):
        waits[(name, cq)].append(seconds)
    return {k: WaitSummary(k[0], k[1], len(v), percentile(v, 50), percentile(v, 95), max(v))
            for k, v in sorted(waits.items())}


def local_queue_list(
    *, at: datetime, visible_teams: set[str] | None, cluster: str | None = None
) -> list[LocalQueueSnapshot]:
    """The LocalQueues of each visible cluster's latest collection at or before `at`: the caller's teams' only."""
    rows: list[LocalQueueSnapshot] = []
    for c in visible_clusters(visible_teams=visible_teams, cluster=cluster):
        collection = _latest_collection(c, at)
        if collection is None:
            continue
        qs = LocalQueueSnapshot.objects.filter(collection=collection).select_related("cluster")
        if visible_teams is not None:
            qs = qs.filter(team__in=sorted(visible_teams))
        rows.extend(qs.order_by("namespace", "name"))
    return rows


@dataclass(frozen=True)
class QueuePresence:
    """What a cluster's latest queue collection saw, whoever's queues they are: whether Kueue answered at all and
    how many ClusterQueues it had (so a page can tell "none" from "not yours" from "not collected yet")."""

    cluster: str
    collected: bool
    kueue: bool
    cluster_queues: int


def queue_presence(*, at: datetime, visible_teams: set[str] | None) -> list[QueuePresence]:
    out = []
    for c in visible_clusters(visible_teams=visible_teams):
        collection = _latest_collection(c, at)
        if collection is None:
            out.append(QueuePresence(c.name, False, False, 0))
            continue
        count = ClusterQueueSnapshot.objects.filter(collection=collection).count()
        out.append(QueuePresence(c.name, True, bool(collection.api_version), count))
    return out


def quota_series(
    *, start: datetime, end: datetime, visible_teams: set[str] | None, cluster: str | None = None
) -> list[dict]:
    """GPU quota per ClusterQueue and hour over `[start, end)`: nominal and the most reserved and borrowed at any
    snapshot of the hour (device resources only), for the queues the caller may see now."""
    out: list[dict] = []
    for c in visible_clusters(visible_teams=visible_teams, cluster=cluster):
        latest = QueueCollection.objects.filter(cluster=c, taken_at__lt=end).order_by("-taken_at").first()
        if latest is None:
            continue
        allowed = visible_cluster_queues(latest, visible_teams)
        # Names by snapshot id (two index scans: no join, whatever the planner's statistics say).
        names = dict(ClusterQueueSnapshot.objects.filter(cluster=c, taken_at__gte=start, taken_at__lt=end)
                     .values_list("id", "name"))
        qs = QuotaSnapshot.objects.filter(cluster=c, taken_at__gte=start, taken_at__lt=end)
        per_snapshot: dict[tuple[str, datetime], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for r in qs.values("cluster_queue_id", "taken_at", "resource").annotate(
            n=Sum("nominal_quota"), r=Sum("reserved"), b=Sum("borrowed")
        ).order_by():
            name = names.get(r["cluster_queue_id"])
            if name is None or (allowed is not None and name not in allowed):
                continue
            if is_device_resource(r["resource"]):
                acc = per_snapshot[(name, r["taken_at"])]
                acc[0] += r["n"] or 0.0
                acc[1] += r["r"] or 0.0
                acc[2] += r["b"] or 0.0
        per_hour: dict[tuple[str, datetime], list[float]] = {}
        for (name, taken_at), (nominal, reserved, borrowed) in per_snapshot.items():
            key = (name, floor_hour(taken_at))
            acc = per_hour.setdefault(key, [nominal, reserved, borrowed])
            acc[:] = [max(acc[0], nominal), max(acc[1], reserved), max(acc[2], borrowed)]
        out.extend({"cluster": c.name, "cluster_queue": name, "hour": hour, "nominal_gpus": v[0],
                    "reserved_gpus": v[1], "borrowed_gpus": v[2]} for (name, hour), v in sorted(per_hour.items()))
    return out
