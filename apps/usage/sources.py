"""What the ledger needs from a metrics source, as plain data and a protocol.

The Prometheus collector (apps/ingest/collectors/prometheus.py) implements `MetricsSource`; the ledger's
bucket assembly (`inputs.py`) calls it and never imports the adapter. Everything a source returns is
already aggregated over the bucket (PromQL `*_over_time`), never raw samples.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
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


@dataclass(frozen=True)
class DeviceHealth:
    """One physical GPU's health fields over a bucket, aggregated in PromQL over every series of the GPU (all
    holders, MIG instances included). Sources return only GPUs with something to report.

    Counter fields are increases over the bucket (max - min of the counter; a counter reset overstates them).
    """

    node: str  # the exporter's Hostname/hostname label: a node name, or the exporter pod's (no NODE_NAME)
    uuid: str
    xid_codes: tuple[int, ...] = ()  # non-zero XID codes seen (the last one and the highest: a code, not a count)
    clock_events: tuple[int, int, float] | None = None  # (min, max, mean) of the clock-event reasons bitmask
    power_violation_seconds: float = 0.0  # DCGM_FI_DEV_POWER_VIOLATION increase (ns -> s)
    thermal_violation_seconds: float = 0.0  # DCGM_FI_DEV_THERMAL_VIOLATION increase (ns -> s)
    uncorrectable_remapped_rows: float = 0.0  # DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS increase
    row_remap_failure: bool = False  # DCGM_FI_DEV_ROW_REMAP_FAILURE was set
    ecc_dbe: float = 0.0  # DCGM_FI_DEV_ECC_DBE_VOL_TOTAL increase


@dataclass(frozen=True)
class VanishedDevice:
    """A GPU that reported in the hour before a bucket and has no sample in it, with the pod its last series
    named ("" when none)."""

    node: str
    uuid: str
    last_seen: datetime
    namespace: str = ""
    pod: str = ""


@dataclass(frozen=True)
class PodMemory:
    """Framebuffer in use on one device series carrying a pod identity, averaged over the bucket."""

    namespace: str
    pod: str
    uuid: str
    gpu_instance_id: str
    fb_used_mib: float


@dataclass(frozen=True)
class DeviceActivity:
    """A device series without a pod identity (no pod holds the device), its activity averaged over the bucket."""

    node: str
    uuid: str
    gpu_instance_id: str
    profile: str
    value: float  # default signal, ratio in [0, 1]


class MetricsSource(Protocol):
    """A cluster's metrics, aggregated over `[start, end)`."""

    warnings: list[str]
    queries: int
    samples: int

    def activity(self, start: datetime, end: datetime) -> list[SeriesFact]:
        """DCGM device series carrying a pod identity, each signal time-averaged over the bucket."""
        ...

    def device_activity(self, start: datetime, end: datetime, uuids: Collection[str]) -> dict[str, dict[str, float]]:
        """Physical GPU UUID -> signal -> time-average over `[start, end)` of its series without a pod identity
        (HAMi tenants are measured by their GPU's series: ledger.md)."""
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

    # ---- Findings (apps/findings): health, memory held, activity nobody holds ----

    def device_health(self, start: datetime, end: datetime) -> list[DeviceHealth]:
        """GPUs with an XID, clock-event reasons above power capping, violations, remapped rows or ECC double-bit
        errors in the bucket."""
        ...

    def vanished_devices(self, start: datetime, end: datetime) -> list[VanishedDevice]:
        """GPUs that reported in the hour before `start` and not at all in `[start, end)`."""
        ...

    def devices_reporting(self, start: datetime, end: datetime, uuids: Collection[str]) -> frozenset[str]:
        """Those of `uuids` with a sample in `[start, end)`."""
        ...

    def pod_memory(self, start: datetime, end: datetime, pods: Collection[str] | None = None) -> list[PodMemory]:
        """DCGM_FI_DEV_FB_USED per device series carrying a pod identity (only of the named pods when given)."""
        ...

    def unheld_activity(self, start: datetime, end: datetime, *, above: float) -> list[DeviceActivity]:
        """Device series without a pod identity whose default-signal activity averaged above `above`."""
        ...

    def pod_nodes(self, start: datetime, end: datetime, pods: Collection[str]) -> dict[str, str]:
        """Pod name -> the node kube-state-metrics put it on in `[start, end)` (`kube_pod_info`), for the named
        pods: where an exporter whose `Hostname` is its own pod name runs."""
        ...
