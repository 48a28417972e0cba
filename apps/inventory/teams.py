"""The team rule: who pays for a pod, a workload, a local queue (ledger.md "Teams").

In order: an *enforced* namespace mapping (every mapping is, unless the operator marks its namespace
self-labelling); the pod (or object) label; the namespace label; a self-labelling namespace's mapping;
otherwise `unassigned`. The label key is a setting (`GPUFINOPS_TEAM_LABEL`).

Labels are written by tenants. A label value that is not a valid label value (at most 63 characters,
alphanumerics, `-`, `_`, `.`, beginning and ending with an alphanumeric) never names a team: its hours go
to `unassigned` and the attempt is reported. In an enforced namespace a label naming another team is
reported (who tried to bill whom), not obeyed. Where labels decide, a label naming another existing team
than the namespace's own (its mapping's, else its namespace label's) is obeyed and still reported. Hours are
never dropped for want of a team.

This is the one home of the rule: the ledger, capacity, queues and views all ask a `TeamRule`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.conf import settings

from apps.inventory.models import Cluster, NamespaceTeam, Team

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
MAX_TEAM_NAME = 63
OTHER_TEAM = "other_team"


def is_valid_team_name(value: str) -> bool:
    """A team name must be a valid Kubernetes label value, so labels and mappings name teams alike."""
    return bool(_LABEL_VALUE.match(value or ""))


@dataclass(frozen=True)
class Mapping_:
    team: str
    enforced: bool


@dataclass(frozen=True)
class TeamChoice:
    """The team an object is charged to, and what was refused on the way (empty when nothing was)."""

    team: str
    rejected: str = ""  # the label value reported (not obeyed, except for "other_team")
    # "invalid" (not a label value), "enforced" (names another team in an enforced namespace: not obeyed) or
    # "other_team" (names another existing team than the namespace's own: obeyed, reported)
    reason: str = ""

    @property
    def obeyed(self) -> bool:
        return self.reason == OTHER_TEAM


class TeamRule:
    """The rule for one cluster at one time: its namespace mappings and its namespaces' labels."""

    def __init__(
        self,
        mappings: Mapping[str, Mapping_],
        namespace_labels: Mapping[str, Mapping[str, str]],
        *,
        label_key: str | None = None,
        unassigned: str | None = None,
        known_teams: Iterable[str] = (),
    ) -> None:
        self.mappings = dict(mappings)
        self.namespace_labels = dict(namespace_labels)
        self.known_teams = frozenset(known_teams)
        self.label_key = label_key or settings.GPUFINOPS_TEAM_LABEL
        self.unassigned = unassigned or settings.GPUFINOPS_UNASSIGNED_TEAM

    @classmethod
    def for_cluster(cls, cluster: Cluster, namespace_labels: Mapping[str, Mapping[str, str]]) -> TeamRule:
        """The database's mappings for `cluster` (a cluster-specific row wins over one for all clusters)."""
        return cls(namespace_mappings(cluster), namespace_labels,
                   known_teams=Team.objects.values_list("name", flat=True))

    def for_namespace(self, namespace: str) -> TeamChoice:
        """The team of a namespace (a local queue, or a pod without its own label)."""
        return self.for_object({}, namespace)

    def for_object(self, labels: Mapping[str, str], namespace: str) -> TeamChoice:
        """The team of a pod or workload with these labels in `namespace`."""
        mapping = self.mappings.get(namespace)
        own = (labels.get(self.label_key) or "").strip()
        ns_label = (self.namespace_labels.get(namespace, {}).get(self.label_key) or "").strip()
        label = own or ns_label
        if mapping is not None and mapping.enforced:
            if label and label != mapping.team:
                return TeamChoice(mapping.team, rejected=label, reason="enforced")
            return TeamChoice(mapping.team)
        if not label:
            return TeamChoice(mapping.team if mapping is not None else self.unassigned)
        choice = self._checked(label)
        if choice.reason:
            return choice
        home = mapping.team if mapping is not None else (ns_label if own and is_valid_team_name(ns_label) else "")
        if home and label != home and label in self.known_teams:
            return TeamChoice(label, rejected=label, reason=OTHER_TEAM)
        return choice

    def _checked(self, value: str) -> TeamChoice:
        if is_valid_team_name(value):
            return TeamChoice(value)
        return TeamChoice(self.unassigned, rejected=value[:MAX_TEAM_NAME * 4], reason="invalid")

    def team_of(self, labels: Mapping[str, str], namespace: str) -> str:
        return self.for_object(labels, namespace).team


def namespace_mappings(cluster: Cluster) -> dict[str, Mapping_]:
    """Namespace -> mapping from the database; a cluster-specific row wins over a global one."""
    out: dict[str, Mapping_] = {}
    rows: Iterable[NamespaceTeam] = NamespaceTeam.objects.filter(cluster__isnull=True).select_related("team")
    for row in [*rows, *NamespaceTeam.objects.filter(cluster=cluster).select_related("team")]:
        out[row.namespace] = Mapping_(row.team.name, row.enforced)
    return out
