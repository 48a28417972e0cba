"""What a cluster showed at one read: plain data the collectors produce and the domain consumes.

The collectors (apps/ingest/collectors/) turn Kubernetes and Kueue API objects into these dataclasses;
inventory, usage, capacity and queues read them and never see a client-library type. Nothing here
imports a collector.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from apps.inventory.gpus.dra import DraInventory
from apps.inventory.gpus.dra_claims import Consumer, HeldDevice
from apps.inventory.workloads import workload_of

# ---- Kubernetes core objects ----


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
    hami_register: str = ""  # annotation `hami.io/node-nvidia-register` as written ("" on a node HAMi does not run)
    # spec.providerID (`aws:///us-east-2a/i-0fea…`, `gce://project/zone/name`, `azure:///subscriptions/…`): the
    # cloud's name for the machine, which the bill's ResourceId is matched against (apps/billing/matching.py).
    provider_id: str = ""


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
    owner: tuple[str, str] | None = None  # (kind, name) of its controller (ownerReferences, controller: true)
    # DRA: the ResourceClaims (in its namespace) it consumes (gpus.dra_claims.pod_claim_names), and the
    # (container, resource) pairs of its requests a claim serves (extended resources), counted from the claim.
    claims: tuple[str, ...] = ()
    claim_served: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class NamespaceInfo:
    name: str
    labels: dict[str, str]


# ---- resource.k8s.io objects (DRA), of whichever version the server serves ----


@dataclass(frozen=True)
class ClaimInfo:
    """A ResourceClaim as one read showed it, reduced by the DRA rules (gpus.dra_claims)."""

    uid: str
    namespace: str
    name: str
    labels: dict[str, str]
    allocated: bool  # has `status.allocation` (it may hold devices with no pod consuming it)
    devices: tuple[HeldDevice, ...]  # the GPU devices its allocation holds (adminAccess results hold none)
    consumers: tuple[Consumer, ...]  # the pods of `status.reservedFor`
    created: datetime | None = None

    @property
    def node(self) -> str:
        return self.devices[0].node if self.devices else ""


@dataclass(frozen=True)
class DraObjects:
    """What the cluster's `resource.k8s.io` showed: its GPU drivers' devices per node and the claims."""

    version: str  # the version read: "v1", "v1beta2" or "v1beta1" (the highest served)
    inventory: DraInventory
    claims: tuple[ClaimInfo, ...]
    extended_resources: frozenset[str] = frozenset()  # DeviceClasses' `extendedResourceName`s
    warnings: tuple[str, ...] = ()

    @cached_property
    def _claims_by_name(self) -> dict[tuple[str, str], ClaimInfo]:
        return {(c.namespace, c.name): c for c in self.claims}

    def claim(self, namespace: str, name: str) -> ClaimInfo | None:
        return self._claims_by_name.get((namespace, name))

    @cached_property
    def held(self) -> dict[str, frozenset[str]]:
        """Node -> names of its devices some allocated claim holds."""
        out: dict[str, set[str]] = {}
        for c in self.claims:
            if c.allocated:
                for d in c.devices:
                    out.setdefault(d.node, set()).add(d.key.device)
        return {node: frozenset(names) for node, names in out.items()}


# ---- Kueue objects (kueue.x-k8s.io v1beta2, or v1beta1 read into the same shape) ----

# Kueue's marks on a pod: its LocalQueue, its ClusterQueue, and the Workload it belongs to.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
KUEUE_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"


@dataclass(frozen=True)
class Quota:
    """One flavor and resource of a ClusterQueue: spec quota and status reservation/usage."""

    flavor: str
    resource: str
    nominal_quota: float = 0.0
    borrowing_limit: float | None = None  # None: unlimited
    lending_limit: float | None = None  # None: may lend everything
    reserved: float = 0.0
    used: float = 0.0
    borrowed: float = 0.0


@dataclass(frozen=True)
class ClusterQueueInfo:
    name: str
    cohort: str
    quotas: tuple[Quota, ...]
    pending_workloads: int
    reserving_workloads: int
    admitted_workloads: int


@dataclass(frozen=True)
class LocalQueueInfo:
    namespace: str
    name: str
    cluster_queue: str
    pending_workloads: int
    reserving_workloads: int
    admitted_workloads: int


@dataclass(frozen=True)
class Condition:
    status: str
    reason: str
    message: str
    last_transition: datetime | None


@dataclass(frozen=True)
class PodSetInfo:
    name: str
    count: int
    request: dict[str, int]  # device units per pod (effective request of the pod template)


@dataclass(frozen=True)
class WorkloadInfo:
    uid: str
    namespace: str
    name: str
    labels: dict[str, str]
    queue_name: str
    cluster_queue: str  # status.admission.clusterQueue; "" before admission
    created: datetime | None
    pod_sets: tuple[PodSetInfo, ...]
    conditions: dict[str, Condition] = field(default_factory=dict)

    def condition_true(self, kind: str) -> bool:
        """Whether condition `kind` (QuotaReserved, Admitted, Finished) is True."""
        c = self.conditions.get(kind)
        return c is not None and c.status == "True"

    def since(self, kind: str) -> datetime | None:
        """When condition `kind` last became True; None when it is not True."""
        return self.conditions[kind].last_transition if self.condition_true(kind) else None

    @property
    def gpu_pod_sets(self) -> tuple[PodSetInfo, ...]:
        """The pod sets that ask for GPU devices."""
        return tuple(ps for ps in self.pod_sets if ps.request)


@dataclass(frozen=True)
class KueueObjects:
    version: str
    cluster_queues: tuple[ClusterQueueInfo, ...]
    local_queues: tuple[LocalQueueInfo, ...]
    workloads: tuple[WorkloadInfo, ...]

    @cached_property
    def _cluster_queue_by_local_queue(self) -> dict[tuple[str, str], str]:
        return {(lq.namespace, lq.name): lq.cluster_queue for lq in self.local_queues}

    def cluster_queue_of(self, namespace: str, local_queue: str) -> str:
        """The ClusterQueue a LocalQueue points to, or ""."""
        return self._cluster_queue_by_local_queue.get((namespace, local_queue), "")


# ---- One read of a cluster ----


@dataclass(frozen=True)
class ClusterSnapshot:
    """One consistent-enough read of the cluster's GPU objects at `taken_at`.

    `kueue` is None when the cluster has no Kueue; `kueue_error` says why Kueue could not be read when
    it is installed but failed (the rest of the snapshot is still good).
    """

    taken_at: datetime
    nodes: tuple[NodeInfo, ...]
    pods: tuple[PodInfo, ...]
    namespaces: tuple[NamespaceInfo, ...]
    kueue: KueueObjects | None = None
    kueue_error: str = ""
    # (namespace, kind, name) -> (kind, name) of that ReplicaSet's or Job's controller, to climb owner chains.
    owners: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict)
    owners_error: str = ""  # why ReplicaSets/Jobs/StatefulSets could not be listed (workloads then stop at them)
    # `resource.k8s.io` (DRA): None when the cluster serves no version of it (normal: no DRA). Served but
    # unreadable fails the read (the ledger would otherwise drop every claim's GPUs).
    dra: DraObjects | None = None

    def workload_of(self, pod: PodInfo) -> str:
        """The pod's workload, `Kind/name` (apps/inventory/workloads.py)."""
        return workload_of(pod.namespace, pod.name, pod.owner, pod.labels, self.owners)

    @property
    def namespace_labels(self) -> dict[str, dict[str, str]]:
        return {ns.name: ns.labels for ns in self.namespaces}
