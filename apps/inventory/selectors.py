"""Reads of teams and clusters, filtered by what the caller may see.

Visibility (``visible_teams`` from ``apps.accounts.selectors.visible_team_names``; None = every team):

* Teams: callers who see every team get every Team row plus every team name that has ledger
  rows without a row of its own (teams are named by labels, e.g. ``unassigned``). Others get
  the Team rows they are members of.
* Clusters: callers who see every team get every cluster. Others get the clusters in which one
  of their teams has ledger rows, so a cluster's name is shown only to teams that used it.
  Cluster connection settings (Prometheus URL, credentials, kubeconfig) are never exposed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Max

from apps.common.params import MAX_TEXT_LENGTH
from apps.inventory.models import Cluster, NamespaceTeam, NodeGroup, Team
from apps.usage.models import Bucket, UsageDay


@dataclass
class TeamInfo:
    """A team as the API shows it."""

    name: str
    display_name: str = ""
    namespaces: list[str] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)


def _plausible_name(name: str) -> bool:
    """Names from URL paths: anything too long or with control characters (NUL breaks PostgreSQL) is no object."""
    return 0 < len(name) <= MAX_TEXT_LENGTH and name.isprintable()


def _ledger_team_names() -> set[str]:
    return set(UsageDay.objects.values_list("team", flat=True).distinct())


def team_list(*, visible_teams: set[str] | None) -> list[TeamInfo]:
    """The teams the caller may see, by name."""
    rows = Team.objects.all()
    if visible_teams is not None:
        rows = rows.filter(name__in=sorted(visible_teams))
    teams = {t.name: TeamInfo(name=t.name, display_name=t.display_name) for t in rows}
    if visible_teams is None:
        for name in _ledger_team_names() - set(teams):
            teams[name] = TeamInfo(name=name)
    return [teams[name] for name in sorted(teams)]


def team_get(*, name: str, visible_teams: set[str] | None) -> TeamInfo | None:
    """One team with its explicit namespace mappings and the clusters it has hours in; None when invisible."""
    if not _plausible_name(name) or (visible_teams is not None and name not in visible_teams):
        return None
    team = Team.objects.filter(name=name).first()
    in_ledger = UsageDay.objects.filter(team=name).exists()
    if team is None and not in_ledger:
        return None
    info = TeamInfo(name=name, display_name=team.display_name if team else "")
    if team is not None:
        info.namespaces = sorted(set(NamespaceTeam.objects.filter(team=team).values_list("namespace", flat=True)))
    info.clusters = sorted(set(UsageDay.objects.filter(team=name).values_list("cluster__name", flat=True).distinct()))
    return info


def _visible_clusters(visible_teams: set[str] | None):  # type: ignore[no-untyped-def]
    clusters = Cluster.objects.all()
    if visible_teams is not None:
        used = UsageDay.objects.filter(team__in=sorted(visible_teams)).values("cluster_id").distinct()
        clusters = clusters.filter(id__in=used)
    return clusters.order_by("name")


@dataclass
class ClusterInfo:
    """A cluster as the API shows it."""

    name: str
    source: str
    last_collected_hour: datetime | None
    node_groups: list[str] = field(default_factory=list)


def cluster_list(*, visible_teams: set[str] | None) -> list[ClusterInfo]:
    """The clusters the caller may see, with the hour of their newest successful bucket."""
    clusters = list(_visible_clusters(visible_teams))
    latest = dict(
        Bucket.objects.filter(status=Bucket.Status.OK, cluster__in=clusters)
        .values("cluster_id")
        .annotate(latest=Max("hour"))
        .values_list("cluster_id", "latest")
    )
    return [ClusterInfo(name=c.name, source=c.source, last_collected_hour=latest.get(c.id)) for c in clusters]


def cluster_get(*, name: str, visible_teams: set[str] | None) -> ClusterInfo | None:
    """One visible cluster with its node groups; None when it does not exist or is invisible."""
    if not _plausible_name(name):
        return None
    cluster = _visible_clusters(visible_teams).filter(name=name).first()
    if cluster is None:
        return None
    latest = Bucket.objects.filter(status=Bucket.Status.OK, cluster=cluster).aggregate(latest=Max("hour"))["latest"]
    groups = list(NodeGroup.objects.filter(cluster=cluster).order_by("name").values_list("name", flat=True))
    return ClusterInfo(name=cluster.name, source=cluster.source, last_collected_hour=latest, node_groups=groups)
