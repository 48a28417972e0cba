"""Reads: the teams and clusters a caller may see, with what the ledger knows of them (``/api/v1/teams/``,
``/api/v1/clusters/``).

Visibility follows the one rule (``apps.inventory.selectors.visible_clusters``): callers who see every
team get every team and cluster; others get their own teams and the clusters those teams appeared in.
Cluster connection settings (Prometheus URL, credentials, kubeconfig) are never part of an answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Max
from rest_framework.exceptions import ValidationError

from apps.common.params import parse_text_list
from apps.inventory.models import NamespaceTeam, NodeGroup, Team
from apps.inventory.selectors import plausible_name, team_clusters, visible_clusters, visible_team_rows
from apps.usage.models import Bucket


@dataclass
class TeamInfo:
    """A team as the API shows it."""

    name: str
    display_name: str = ""
    namespaces: list[str] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)


@dataclass
class ClusterInfo:
    """A cluster as the API shows it."""

    name: str
    source: str
    last_collected_hour: datetime | None
    node_groups: list[str] = field(default_factory=list)


def team_list(*, visible_teams: set[str] | None) -> list[TeamInfo]:
    """The teams the caller may see, by name."""
    return [TeamInfo(name=t.name, display_name=t.display_name) for t in visible_team_rows(visible_teams=visible_teams)]


def team_get(*, name: str, visible_teams: set[str] | None) -> TeamInfo | None:
    """One team with its explicit namespace mappings and the clusters it appeared in; None when invisible."""
    if not plausible_name(name) or (visible_teams is not None and name not in visible_teams):
        return None
    team = Team.objects.filter(name=name).first()
    if team is None:
        return None
    namespaces = sorted(set(NamespaceTeam.objects.filter(team=team).values_list("namespace", flat=True)))
    return TeamInfo(name=name, display_name=team.display_name, namespaces=namespaces, clusters=team_clusters(name))


def _latest_ok_hours(cluster_ids: list[int]) -> dict[int, datetime]:
    return dict(
        Bucket.objects.filter(status=Bucket.Status.OK, cluster_id__in=cluster_ids)
        .values("cluster_id")
        .annotate(latest=Max("hour"))
        .values_list("cluster_id", "latest")
    )


def cluster_list(*, visible_teams: set[str] | None) -> list[ClusterInfo]:
    """The clusters the caller may see, with the hour of their newest successful bucket."""
    clusters = list(visible_clusters(visible_teams=visible_teams))
    latest = _latest_ok_hours([c.id for c in clusters])
    return [ClusterInfo(name=c.name, source=c.source, last_collected_hour=latest.get(c.id)) for c in clusters]


def cluster_get(*, name: str, visible_teams: set[str] | None) -> ClusterInfo | None:
    """One visible cluster with its node groups; None when it does not exist or is invisible."""
    if not plausible_name(name):
        return None
    cluster = visible_clusters(visible_teams=visible_teams, cluster=name).first()
    if cluster is None:
        return None
    groups = list(NodeGroup.objects.filter(cluster=cluster).order_by("name").values_list("name", flat=True))
    return ClusterInfo(cluster.name, cluster.source, _latest_ok_hours([cluster.id]).get(cluster.id), groups)


def unknown_filter_values(*, visible_teams: set[str] | None, teams: Sequence[str] = (),
                          clusters: Sequence[str] = ()) -> dict[str, list[str]]:
    """The `team` and `cluster` filter values that name nothing the caller may see, by parameter (an API filter
    that matches nothing by a typo must say so, not answer an empty 200). A team or cluster that exists but is not
    the caller's reads the same as one that does not exist: visibility is not leaked."""
    unknown: dict[str, list[str]] = {}
    if teams:
        known = set(visible_team_rows(visible_teams=visible_teams).filter(name__in=list(teams))
                    .values_list("name", flat=True))
        if missing := [t for t in teams if t not in known]:
            unknown["team"] = missing
    if clusters:
        known = set(visible_clusters(visible_teams=visible_teams).filter(name__in=list(clusters))
                    .values_list("name", flat=True))
        if missing := [c for c in clusters if c not in known]:
            unknown["cluster"] = missing
    return unknown


def refuse_unknown_filters(params: Mapping[str, str], *, visible_teams: set[str] | None) -> None:
    """A 400 naming every `team` and `cluster` filter value of an API request that matches nothing the caller may
    see (`{"team": ["Unknown team, or not one you may see: 'x'."]}`)."""
    unknown = unknown_filter_values(visible_teams=visible_teams, teams=parse_text_list(params, "team"),
                                    clusters=parse_text_list(params, "cluster"))
    if unknown:
        raise ValidationError({
            name: [f"Unknown {name}{'s' if len(values) > 1 else ''}, or not one you may see: "
                   f"{', '.join(repr(v[:60]) for v in values)}."]
            for name, values in unknown.items()
        })
