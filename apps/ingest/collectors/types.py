"""Plain data the collectors return: what domain services consume, free of client-library types."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class NodeInfo:
    """A node as the Kubernetes API shows it, reduced to what accounting and capacity need."""

    name: str
    labels: dict[str, str]
    capacity: dict[str, str]  # raw quantities, NVIDIA resources only
    allocatable: dict[str, str]
    ready: bool
    unschedulable: bool
    created: datetime | None


@dataclass(frozen=True)
class ContainerRequest:
    name: str
    kind: str  # "app" | "init" | "sidecar" (restartable init container)
    resources: dict[str, float]  # NVIDIA resources: requests, or limits when requests are absent


@dataclass(frozen=True)
class PodInfo:
    """A pod that asks for NVIDIA resources."""

    uid: str
    namespace: str
    name: str
    node: str  # "" when not bound
    phase: str
    labels: dict[str, str]
    annotations: dict[str, str]
    containers: tuple[ContainerRequest, ...]
    created: datetime | None
    started: datetime | None  # status.startTime
    finished: datetime | None  # latest terminated.finishedAt when Succeeded/Failed
    deletion: datetime | None  # metadata.deletionTimestamp
    conditions: dict[str, str] = field(default_factory=dict)  # type -> status (e.g. PodScheduled: False)
    scheduling_message: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NamespaceInfo:
    name: str
    labels: dict[str, str]


@dataclass(frozen=True)
class ClusterSnapshot:
    """One consistent-enough read of the cluster's GPU objects at `taken_at`."""

    taken_at: datetime
    nodes: tuple[NodeInfo, ...]
    pods: tuple[PodInfo, ...]
    namespaces: tuple[NamespaceInfo, ...]
