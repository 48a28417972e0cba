"""Reads of the capacity app: fragmentation and pending work at a time or over a range.

Visibility (``visible_teams`` from ``apps.accounts.selectors.visible_team_names``; None = every team):

* Fragmentation is about node groups, not teams, so it carries no team's data; a caller sees it
  for the clusters they may see (``apps.inventory.selectors.visible_clusters``, the one rule every
  page and endpoint uses).
* Pending work and its counts are team data: non-staff see only rows of their teams.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, QuerySet, Sum, Value
from django.db.models.functions import Concat

from apps.capacity.models import CapacityCollection, NodeGroupSnapshot, PendingReasonCount, PendingWork
from apps.common.snapshots import latest_per_cluster
from apps.inventory.selectors import visible_clusters

# ---- Fragmentation ----


def fragmentation_at(
    *, at: datetime, visible_teams: set[str] | None, cluster: str | None = None
) -> list[NodeGroupSnapshot]:
    """Per visible cluster, the node-group rows of its latest snapshot at or before `at` (two queries)."""
    match = latest_per_cluster(NodeGroupSnapshot, visible_clusters(visible_teams=visible_teams, cluster=cluster), at)
    if match is None:
        return []
    return list(
        NodeGroupSnapshot.objects.filter(match).select_related("cluster").order_by("cluster__name", "node_group")
    )


def fragmentation_range(
    *, start: datetime, end: datetime, visible_teams: set[str] | None, cluster: str | None = None
) -> QuerySet[NodeGroupSnapshot]:
    """Every node-group row taken in `[start, end)`: collection resolution for 7 days, hourly after."""
    clusters = visible_clusters(visible_teams=visible_teams, cluster=cluster)
    return (
        NodeGroupSnapshot.objects.filter(cluster__in=clusters, taken_at__gte=start, taken_at__lt=end)
        .select_related("cluster")
        .order_by("cluster__name", "taken_at", "node_group")
    )


# ---- Pending work ----


def pending_list(
    *,
    at: datetime,
    visible_teams: set[str] | None,
    cluster: str | None = None,
    team: str | None = None,
    reason: str | None = None,
) -> list[PendingWork]:
    """Pending GPU work of each visible cluster's latest collection at or before `at` (two queries)."""
    match = latest_per_cluster(CapacityCollection, visible_clusters(visible_teams=visible_teams, cluster=cluster), at)
    if match is None:
        return []
    qs = PendingWork.objects.filter(match).select_related("cluster")
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    if team is not None:
        qs = qs.filter(team=team)
    if reason is not None:
        qs = qs.filter(reason=reason)
    return list(qs.order_by("cluster__name", "waiting_since", "namespace", "name"))


@dataclass(frozen=True)
class ReasonCount:
    """Pending work of one reason at one collection, summed over the teams the caller may see."""

    cluster: str
    taken_at: datetime
    reason: str
    items: int
    pods: int
    units: int


def pending_counts(
    *,
    start: datetime,
    end: datetime,
    visible_teams: set[str] | None,
    cluster: str | None = None,
    team: str | None = None,
) -> list[ReasonCount]:
    """Counts of pending GPU work by reason at every collection in `[start, end)`."""
    clusters = visible_clusters(visible_teams=visible_teams, cluster=cluster)
    qs = PendingReasonCount.objects.filter(cluster__in=clusters, taken_at__gte=start, taken_at__lt=end)
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    if team is not None:
        qs = qs.filter(team=team)
    grouped = (
        qs.values("cluster__name", "taken_at", "reason")
        .annotate(items=Sum("items"), pods=Sum("pods"), units=Sum("units"))
        .order_by("cluster__name", "taken_at", "reason")
    )
    return [
        ReasonCount(g["cluster__name"], g["taken_at"], g["reason"], g["items"], g["pods"], g["units"]) for g in grouped
    ]


# ---- GPU-hours waited: what pending work asked for, over time ----

# A collection stands for the time until the cluster's next one, at most this long (a gap in collection is not
# counted as waiting).
WAIT_STEP_CAP = timedelta(hours=1)


@dataclass(frozen=True)
class Waited:
    """GPU-hours a team's pending work waited in `[start, end)`, per queue and reason: at each collection, the GPUs
    asked for (pods x per-pod request x the share of one unit, in physical-GPU equivalents) times the time until
    the next collection."""

    cluster: str
    team: str
    cluster_queue: str
    local_queue: str
    reason: str
    gpu_hours: float
    items: int  # distinct pending pods and Kueue workloads seen


def pending_gpu_hours(
    *, start: datetime, end: datetime, visible_teams: set[str] | None, cluster: str | None = None
) -> list[Waited]:
    """GPU-hours waited per cluster, team, queue and reason over `[start, end)` (pending-work snapshots)."""
    out: list[Waited] = []
    for c in visible_clusters(visible_teams=visible_teams, cluster=cluster):
        times = sorted(CapacityCollection.objects.filter(cluster=c, taken_at__gte=start, taken_at__lt=end)
                       .values_list("taken_at", flat=True))
        if not times:
            continue
        step = {t: (min(nxt, end, t + WAIT_STEP_CAP) - t).total_seconds() / 3600
                for t, nxt in zip(times, [*times[1:], end], strict=True)}
        qs = PendingWork.objects.filter(cluster=c, taken_at__gte=start, taken_at__lt=end)
        if visible_teams is not None:
            qs = qs.filter(team__in=sorted(visible_teams))
        key = ("team", "cluster_queue", "local_queue", "reason")
        hours: dict[tuple[str, str, str, str], float] = defaultdict(float)  # (team, queues, reason) -> hours
        for r in qs.values(*key, "taken_at", "per_pod", "share").annotate(pods=Sum("pods")).order_by():
            hours[tuple(r[k] for k in key)] += r["per_pod"] * r["pods"] * r["share"] * step.get(r["taken_at"], 0.0)
        items = {
            tuple(r[k] for k in key): r["n"]
            for r in qs.values(*key).annotate(n=Count(Concat("kind", Value("/"), "namespace", Value("/"), "name"),
                                                      distinct=True)).order_by()
        }
        out.extend(Waited(c.name, *k, gpu_hours=round(v, 6), items=items.get(k, 0)) for k, v in sorted(hours.items()))
    return out
