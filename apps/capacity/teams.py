"""A pod's or namespace's team, by the ledger's rule (ledger.md, "Teams")."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

from apps.ingest.collectors.types import NamespaceInfo
from apps.inventory.models import Cluster, NamespaceTeam


class TeamResolver:
    """Pod label, then namespace label, then the NamespaceTeam mapping, else `unassigned`."""

    def __init__(self, cluster: Cluster, namespaces: Iterable[NamespaceInfo]) -> None:
        self.label = settings.GPUFINOPS_TEAM_LABEL
        self.unassigned = settings.GPUFINOPS_UNASSIGNED_TEAM
        self.namespace_labels = {ns.name: ns.labels for ns in namespaces}
        self.mapping: dict[str, str] = {}
        # A cluster-specific mapping wins over one for all clusters: read the global ones first.
        rows = NamespaceTeam.objects.filter(cluster__isnull=True).select_related("team")
        rows_for_cluster = NamespaceTeam.objects.filter(cluster=cluster).select_related("team")
        for row in [*rows, *rows_for_cluster]:
            self.mapping[row.namespace] = row.team.name

    def for_namespace(self, namespace: str) -> str:
        """The team of a namespace: its label, else the mapping, else `unassigned`."""
        labelled = self.namespace_labels.get(namespace, {}).get(self.label)
        return labelled or self.mapping.get(namespace) or self.unassigned

    def for_object(self, labels: dict[str, str], namespace: str) -> str:
        """The team of a pod or workload: its own label first."""
        return labels.get(self.label) or self.for_namespace(namespace)
