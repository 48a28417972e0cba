"""What the ledger needs from a metrics source, as plain data and a protocol.

The Prometheus collector (apps/ingest/collectors/prometheus.py) implements `MetricsSource`; the ledger's
bucket assembly (`inputs.py`) calls it and never imports the adapter. Everything a source returns is
already aggregated over the bucket (PromQL `*_over_time`), never raw samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from apps.usage.ledger import SeriesFact

# kube-state-metrics history is read on this step (subqueries); a pod or node seen within two steps of a
# bucket edge was there at the edge.
HISTORY_STEP_SECONDS = 30


class SourceError(Exception):
    """The source is unreachable, or its answer unusable: the bucket fails and is retried."""


@dataclass(frozen=True)
class PodHistory:
    """A GPU pod as kube-state-metrics recorded it during a bucket (for hours the collector missed)."""

    uid: str
    namespace: str
    name: str
    node: str
    started: datetime | None
    finished: datetime | None
    last_seen: datetime | None
    labels: dict[str, str]  # the asked-for label keys, as written on the pod
    app_requests: dict[str, dict[str, float]]  # container -> resource -> quantity
    init_requests: dict[str, dict[str, float]]
    owner: tuple[str, str] | None = None  # (kind, name) of its controller (kube_pod_owner)


@dataclass(frozen=True)
class NodeHistory:
    """A node as kube-state-metrics recorded it during a bucket."""

    name: str
    labels: dict[str, str]  # the asked-for label keys, as written on the node
    allocatable: dict[str, float]
    capacity: dict[str, float]
    unschedulable: bool
    ready: bool
    first_seen: datetime
    last_seen: datetime


class MetricsSource(Protocol):
    """A cluster's metrics, aggregated over `[start, end)`."""

    warnings: list[str]
    queries: int
    samples: int

    def activity(self, start: datetime, end: datetime) -> list[SeriesFact]:
        """DCGM device series carrying a pod identity, each signal time-averaged over the bucket."""
        ...

    def has_dcgm(self, start: datetime, end: datetime) -> bool:
        """Whether any DCGM activity series existed in the bucket (with or without pod identity)."""
        ...

    def pod_history(self, start: datetime, end: datetime, label_keys: Sequence[str]) -> list[PodHistory]: ...

    def owner_history(self, start: datetime, end: datetime) -> dict[tuple[str, str, str], tuple[str, str]]:
        """(namespace, kind, name) -> controller (kind, name) of ReplicaSets and Jobs seen in the bucket."""
        ...

    def node_history(self, start: datetime, end: datetime, label_keys: Sequence[str]) -> list[NodeHistory]: ...

    def namespace_labels(self, start: datetime, end: datetime, label_keys: Sequence[str]) -> dict[str, dict[str, str]]:
        ...
