"""Reads of the inventory: prices, and which clusters and teams a caller may see.

Visibility (``visible_teams`` from ``apps.accounts.selectors.visible_team_names``; None = every team) has
one rule for every page and endpoint: a caller who sees every team sees every cluster; anyone else sees
the clusters in which one of their teams has appeared (ledger hours, pending work or a local queue, as
recorded in ``ClusterTeam``), and never a cluster's connection settings.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.db.models import QuerySet

from apps.common.params import MAX_TEXT_LENGTH
from apps.inventory.models import Cluster, ClusterTeam, GpuPrice, Node, Team


def plausible_name(name: str) -> bool:
    """Names from URL paths: anything too long or with control characters (NUL breaks PostgreSQL) is no object."""
    return 0 < len(name) <= MAX_TEXT_LENGTH and name.isprintable()


def visible_clusters(*, visible_teams: set[str] | None, cluster: str | None = None) -> QuerySet[Cluster]:
    """Clusters the caller may see, by name; only the one named `cluster` when given."""
    clusters = Cluster.objects.all()
    if cluster is not None:
        clusters = clusters.filter(name=cluster)
    if visible_teams is not None:
        present = ClusterTeam.objects.filter(team__name__in=sorted(visible_teams)).values("cluster_id")
        clusters = clusters.filter(id__in=present)
    return clusters.order_by("name")


def team_clusters(team: str) -> list[str]:
    """Names of the clusters a team has appeared in."""
    return sorted(ClusterTeam.objects.filter(team__name=team).values_list("cluster__name", flat=True))


def team_named(name: str) -> Team | None:
    return Team.objects.filter(name=name).first()


def visible_team_rows(*, visible_teams: set[str] | None) -> QuerySet[Team]:
    rows = Team.objects.all()
    if visible_teams is not None:
        rows = rows.filter(name__in=sorted(visible_teams))
    return rows.order_by("name")


def price_for(cluster: Cluster, gpu_model: str, on: date) -> Decimal | None:
    """USD per physical GPU-hour in force on `on`; a cluster-specific price wins over a global one."""
    qs = GpuPrice.objects.filter(gpu_model=gpu_model, effective_from__lte=on).order_by("-effective_from")
    row = qs.filter(cluster=cluster).first() or qs.filter(cluster__isnull=True).first()
    return row.usd_per_gpu_hour if row else None


def gpu_nodes(*, visible_teams: set[str] | None, clusters: set[str] | None = None) -> QuerySet[Node]:
    """The GPU nodes (not gone) of the clusters the caller may see, as last observed, by cluster and name."""
    rows = Node.objects.filter(gone=False, cluster__in=visible_clusters(visible_teams=visible_teams))
    if clusters:
        rows = rows.filter(cluster__name__in=sorted(clusters))
    return rows.select_related("cluster", "node_group").order_by("cluster__name", "node_group__name", "name")
