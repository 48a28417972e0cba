"""Reads of the capacity app: fragmentation and pending work at a time or over a range.

Visibility (``visible_teams`` from ``apps.accounts.selectors.visible_team_names``; None = every team):

* Fragmentation is about node groups, not teams, so it carries no team's data; a caller sees it
  for the clusters they may see (``apps.inventory.selectors.visible_clusters``, the one rule every
  page and endpoint uses).
* Pending work and its counts are team data: non-staff see only rows of their teams.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Max, QuerySet, Sum

from apps.capacity.models import CapacityCollection, NodeGroupSnapshot, PendingReasonCount, PendingWork
from apps.inventory.models import Cluster
from apps.inventory.selectors import visible_clusters


def _latest_taken_at(model: type, cluster: Cluster, at: datetime) -> datetime | None:
    return model.objects.filter(cluster=cluster, taken_at__lte=at).aggregate(t=Max("taken_at"))["t"]


# ---- Fragmentation ----


def fragmentation_at(
    *, at: datetime, visible_teams: set[str] | None, cluster: str | None = None
) -> list[NodeGroupSnapshot]:
    """Per visible cluster, the node-group rows of its latest snapshot at or before `at`."""
    rows: list[NodeGroupSnapshot] = []
    for c in visible_clusters(visible_teams=visible_teams, cluster=cluster):
        taken_at = _latest_taken_at(NodeGroupSnapshot, c, at)
        if taken_at is not None:
            rows.extend(NodeGroupSnapshot.objects.filter(cluster=c, taken_at=taken_at).select_related("cluster"))
    return rows


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
    """Pending GPU work of each visible cluster's latest collection at or before `at`."""
    rows: list[PendingWork] = []
    for c in visible_clusters(visible_teams=visible_teams, cluster=cluster):
        taken_at = _latest_taken_at(CapacityCollection, c, at)
        if taken_at is None:
            continue
        qs = PendingWork.objects.filter(cluster=c, taken_at=taken_at).select_related("cluster")
        if visible_teams is not None:
            qs = qs.filter(team__in=sorted(visible_teams))
        if team is not None:
            qs = qs.filter(team=team)
        if reason is not None:
            qs = qs.filter(reason=reason)
        rows.extend(qs.order_by("waiting_since", "namespace", "name"))
    return rows


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
