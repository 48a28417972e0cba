"""The model of a simulated GPU cluster: constants, helpers, the dataclasses and ``Scenario``.

Imports nothing of the simulator: the scenario builders (``scenarios``), the object and metric
renderings (``objects``, ``exposition``) and the servers (``k8s_api``, ``prometheus_api``) import this
module, never the other way round. A scenario is a pure function of (scenario name, seed, end, days):
node inventory, pods over time, Kueue objects over time, and DCGM values at any instant.

Modelling conventions (documented for the oracle and for other engineers):

* All pod events (start, finish, deletion, pending creation) are aligned to 5-minute UTC
  boundaries.  Activity signals are piecewise-constant on 5-minute UTC-aligned segments, so the
  exact time-average over any held interval equals the mean of 30 s samples over that interval.
* A started pod is created at its ``status.startTime`` (no bound-but-not-started phase).  Pending
  pods are never bound (no ``spec.nodeName``), carry ``PodScheduled=False/Unschedulable`` and are
  exported by kube-state-metrics with ``node=""``.
* Completed pods (Succeeded/Failed) stay listed for 3 h after finishing.  A pod deleted while
  running disappears at its deletion time; during the last 30 s before that it shows
  ``metadata.deletionTimestamp`` (= the disappearance time).
* A pod holds GPUs from ``startTime`` to finish/deletion; it holds nothing while pending.
* Nothing happens after ``end``: pods running at ``end`` keep running, so state at t >= end is
  the state at ``end``.
* Owners: a pod's ``owner`` is its controller (kind, name); ReplicaSets and Jobs are ``Controller`` objects
  (``Scenario.controllers``) with their own controller (a Deployment, CronJob or JobSet) or none.
* Health (``Scenario.health``, see ``Health``): every health event sits on the 5-minute grid, so every DCGM
  value, health fields included, is constant within a segment. Counters step at segment boundaries:
  violation counters (ns) hold, during segment k, the throttled time of the segments before k; event
  counters (ECC, remapped rows) count the events at or before the segment's start.
* GPUs handed out by NVIDIA's DRA driver (``Node.kind == "dra"``) and by HAMi (``Node.kind == "hami"``): their
  devices, claims and tenants, what pods and nodes show of them and what dcgm-exporter attributes are defined in
  ``dra.py`` and ``hami.py``. Their units (``Unit.resource`` ``"dra"`` / ``"hami"``) sit on the entities like any
  other, so activity and holders work as for device-plugin GPUs.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import uuid as uuidlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

SEG = 300  # activity segment, seconds
INF = float("inf")
M64 = (1 << 64) - 1
ACTIVITY_KEYS = ("sm", "gr", "tensor", "util")  # the activity signals; every other DCGM value is dearer
# Clock-event reasons (DCGM_FI_DEV_CLOCKS_EVENT_REASONS bits, dcgm-exporter clock_events_collector.go).
CLOCK_GPU_IDLE, CLOCK_SW_POWER_CAP, CLOCK_HW_SLOWDOWN = 0x1, 0x4, 0x8
CLOCK_SW_THERMAL, CLOCK_HW_THERMAL, CLOCK_HW_POWER_BRAKE = 0x20, 0x40, 0x80
POWER_BITS = CLOCK_SW_POWER_CAP | CLOCK_HW_POWER_BRAKE  # time with these set counts in DCGM_FI_DEV_POWER_VIOLATION
THERMAL_BITS = CLOCK_SW_THERMAL | CLOCK_HW_THERMAL  # ... and with these in DCGM_FI_DEV_THERMAL_VIOLATION

# --------------------------------------------------------------------------------------
# GPU models
# --------------------------------------------------------------------------------------
MODELS = {
    "H100": {
        "product": "NVIDIA-H100-80GB-HBM3",
        "modelName": "NVIDIA H100 80GB HBM3",
        "memory": 81559,
        "family": "hopper",
        "major": "9",
        "minor": "0",
        "idle_w": 70.0,
        "max_w": 700.0,
        "slices": 7,
        "remap": True,  # HBM parts remap rows (DCGM_FI_DEV_*REMAPPED_ROWS); the others report no such fields
    },
    "A100": {
        "product": "NVIDIA-A100-SXM4-80GB",
        "modelName": "NVIDIA A100-SXM4-80GB",
        "memory": 81920,
        "family": "ampere",
        "major": "8",
        "minor": "0",
        "idle_w": 55.0,
        "max_w": 400.0,
        "slices": 7,
        "remap": True,
    },
    "L4": {
        "product": "NVIDIA-L4",
        "modelName": "NVIDIA L4",
        "memory": 23034,
        "family": "ada-lovelace",
        "major": "8",
        "minor": "9",
        "idle_w": 16.0,
        "max_w": 72.0,
        "slices": 0,
    },
    "L40S": {
        "product": "NVIDIA-L40S",
        "modelName": "NVIDIA L40S",
        "memory": 46068,
        "family": "ada-lovelace",
        "major": "8",
        "minor": "9",
        "idle_w": 35.0,
        "max_w": 350.0,
        "slices": 0,
    },
}
# MIG profile -> (compute slices, memory MiB) for 80 GB parts
MIG_PROFILES = {
    "1g.10gb": (1, 9984),
    "2g.20gb": (2, 20096),
    "3g.40gb": (3, 40320),
    "4g.40gb": (4, 40320),
    "7g.80gb": (7, 80896),
}
DRIVER = "550.54.15"

ACT_KINDS = {
    # kind: (base, jitter, tensor fraction, memory fraction)
    "train": (0.82, 0.06, 0.75, 0.88),
    "train_throttled": (0.52, 0.06, 0.72, 0.88),
    "batch": (0.62, 0.20, 0.50, 0.70),
    "eval": (0.45, 0.10, 0.55, 0.60),
    "infer": (0.30, 0.08, 0.45, 0.62),
    # an inference service sized for more than it serves: its daily peak and memory fit a smaller MIG profile
    "infer_light": (0.18, 0.04, 0.45, 0.20),
    "notebook": (0.18, 0.14, 0.30, 0.25),
    "notebook_idle": (0.0, 0.004, 0.30, 0.15),  # idle after active_until, its memory released (kernel stopped)
    "notebook_held": (0.0, 0.004, 0.30, 0.55),  # idle after active_until, a model kept in GPU memory
    "train_fast": (0.90, 0.04, 0.78, 0.85),
    "straggler": (0.40, 0.04, 0.70, 0.85),  # a slow rank (activity override of one GPU, see Scenario.overrides)
    "rogue": (0.65, 0.08, 0.50, 0.35),  # a process outside Kubernetes' accounting (Health.rogue)
    "ghost": (0.0, 0.0, 0.0, 0.0),
}
NOTEBOOK_KINDS = ("notebook_idle", "notebook_held")


def _mix(*vals: int) -> int:
    x = 0x243F6A8885A308D3
    for v in vals:
        x = (x ^ (v & M64)) * 0x9E3779B97F4A7C15 & M64
        x ^= x >> 31
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & M64
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & M64
    return x ^ (x >> 31)


def _u01(*vals: int) -> float:
    return (_mix(*vals) >> 11) / float(1 << 53)


def _stable_int(*parts) -> int:
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "big")


def _uuid(*parts) -> str:
    return str(uuidlib.UUID(bytes=hashlib.blake2b(repr(parts).encode(), digest_size=16).digest(), version=4))


def owner_uid(sc, namespace: str | None, name: str) -> str:
    """The uid of a pod's (or a ReplicaSet's, a Job's) owner ``name``, as every reference to it writes it."""
    return _uuid("owner", sc.name, namespace, name)


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def provider_id(cluster_name: str, node_name: str) -> str:
    """A node's `spec.providerID`. The simulated cluster is an EKS-like one (Amazon Linux, EKS node labels), so an
    AWS instance id derived from the names: stable across runs, and what the demo's cloud bill
    (devtools/simulator/bill.py) names as ResourceId."""
    return f"aws:///us-east-1a/i-{hashlib.sha256(f'{cluster_name}/{node_name}'.encode()).hexdigest()[:17]}"


def to_ts(at) -> float:
    if isinstance(at, (int, float)):
        return float(at)
    if at.tzinfo is None:
        raise ValueError("datetimes must be timezone-aware (UTC)")
    return at.timestamp()


def floor_hour(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def ceil_hour(dt: datetime) -> datetime:
    f = floor_hour(dt)
    return f if f == dt.astimezone(UTC) else f + timedelta(hours=1)


def align5(ts: float) -> float:
    """``ts`` floored to its 5-minute UTC segment (pod events and activity changes sit on these)."""
    return math.floor(ts / SEG) * SEG


@functools.lru_cache(maxsize=65536)
def sanitize(name: str) -> str:
    """A Kubernetes label key or resource name as kube-state-metrics writes it (``a.b/c`` -> ``a_b_c``)."""
    return _UNSAFE.sub("_", name)


_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


# --------------------------------------------------------------------------------------
# Data classes
# --------------------------------------------------------------------------------------
@dataclass
class Entity:
    """A DCGM entity: a physical GPU or a MIG GPU instance."""

    idx: int
    node: str
    gpu: int
    uuid: str
    pci: str
    model: str
    profile: str | None = None  # MIG profile for instances
    gi_id: str | None = None
    slices: int = 0  # compute slices for MIG instances
    mem: int = 0
    mig_parent: bool = False  # GPU entity whose GPU is in MIG mode
    children: list = field(default_factory=list)  # instance entity idxs (for MIG parents)
    replicas: int = 0  # >0: time-sliced device
    labels_lost: bool = False  # exporter never attaches pod identity to this entity
    intervals: list = field(default_factory=list)  # (start, end, pod_idx, container, vgpu, ghost)


@dataclass
class Node:
    name: str
    model: str
    gpus: int
    labels: dict
    capacity: dict
    allocatable: dict
    created: float
    cpu: str = "192"
    memory: str = "2097152Mi"
    instance_type: str = ""
    unschedulable_from: float | None = None
    zero_alloc: bool = False
    timesliced: int = 0  # replicas per GPU
    shared_resource: str | None = None
    uid: str = ""
    ip: str = ""
    entities: list = field(default_factory=list)  # GPU entity idxs
    kind: str = "whole"  # whole | mig | timesliced | shared | noplugin | cpu

    def unschedulable(self, t: float) -> bool:
        return self.unschedulable_from is not None and t >= self.unschedulable_from


@dataclass
class Container:
    name: str
    image: str
    gpu: dict  # resource -> int
    cpu: str = "4"
    memory: str = "16Gi"
    restartable: bool = False  # sidecar init container


@dataclass
class Unit:
    entity: int
    resource: str
    share: float
    vgpu: str | None = None
    ghost: bool = False  # held but never attributed (e.g. init-container-only GPU)


@dataclass
class Pod:
    idx: int
    namespace: str
    name: str
    uid: str
    labels: dict
    containers: list
    init_containers: list = field(default_factory=list)
    annotations: dict = field(default_factory=dict)
    owner: tuple | None = None  # (kind, name)
    node: str | None = None
    created: float = 0.0
    start: float | None = None
    finish: float | None = None
    end_phase: str | None = None  # Succeeded | Failed
    deleted: float = INF
    deleted_running: bool = False
    act: str = "batch"
    active_until: float = INF  # notebooks: idle after this time
    units: list = field(default_factory=list)
    node_selector: dict = field(default_factory=dict)
    pending_message: str = ""
    workload: str | None = None
    xid: int = 0  # XID emitted at failure
    ip: str = ""
    owner_parent: tuple | None = None  # (kind, name) of the controller of ``owner`` (a ReplicaSet's Deployment...)

    @property
    def hold_end(self) -> float:
        if self.start is None:
            return self.start or 0.0
        if self.finish is not None:
            return self.finish
        return self.deleted

    def visible(self, t: float) -> bool:
        return self.created <= t < self.deleted

    def held(self, t: float) -> bool:
        return self.start is not None and self.start <= t < self.hold_end

    def phase(self, t: float) -> str:
        if self.start is None or t < self.start:
            return "Pending"
        if self.finish is not None and t >= self.finish:
            return self.end_phase
        return "Running"

    @property
    def gpu_container(self) -> str:
        for c in self.containers:
            if c.gpu:
                return c.name
        return self.containers[0].name

    def effective_request(self) -> dict:
        res: dict = {}
        for c in self.containers + [c for c in self.init_containers if c.restartable]:
            for r, n in c.gpu.items():
                res[r] = res.get(r, 0) + n
        for c in self.init_containers:
            if not c.restartable:
                for r, n in c.gpu.items():
                    res[r] = max(res.get(r, 0), n)
        return res


@dataclass
class Controller:
    """A ReplicaSet, a Job or a StatefulSet (the owners the collector lists), with its own controller or none
    (a LeaderWorkerSet's worker StatefulSet: its leader pod, ``("Pod", name)``).

    Visible from ``created`` until ``deleted``: a ReplicaSet or Job exists from its first pod's creation until
    its last pod is gone (a Job is deleted with its pods, 3 h after it finished); a Job that Kueue keeps
    suspended (a quota-pending workload, no pods) exists while its Kueue workload does."""

    namespace: str
    kind: str  # ReplicaSet | Job | StatefulSet
    name: str
    uid: str
    owner: tuple | None = None  # (kind, name): Deployment, CronJob, JobSet, ...
    created: float = INF
    deleted: float = 0.0
    pods: list = field(default_factory=list)  # pod idxs
    suspended: bool = False

    def visible(self, t: float) -> bool:
        return self.created <= t < self.deleted


@dataclass
class Health:
    """Health events of one DCGM entity (a physical GPU; ``xid_events`` of the scenario also cover MIG
    instances), all on the 5-minute grid (see the module docstring for how counters step)."""

    throttle: list = field(default_factory=list)  # (start, end, clock-event bits) while the bits are set
    counters: list = field(default_factory=list)  # (at, key, increment): ecc_dbe, remap_uncorrectable, ...
    remap_failure_from: float | None = None  # DCGM_FI_DEV_ROW_REMAP_FAILURE is 1 from then on
    gaps: list = field(default_factory=list)  # (start, end): the exporter reports nothing of this GPU
    rogue: list = field(default_factory=list)  # (start, end): a process no pod holds keeps the GPU busy

    def bits(self, t: float) -> int:
        out = 0
        for s, e, b in self.throttle:
            if s <= t < e:
                out |= b
        return out

    def vanished(self, t: float) -> bool:
        return any(s <= t < e for s, e in self.gaps)

    def violation_ns(self, t: float, mask: int) -> float:
        """Throttled ns with ``mask`` bits set before the start of t's segment."""
        start = (t // SEG) * SEG
        total = 0.0
        for s, e, b in self.throttle:
            if b & mask and s < start:
                total += min(e, start) - s
        return total * 1e9

    def counter(self, t: float, key: str) -> float:
        start = (t // SEG) * SEG
        return float(sum(n for at, k, n in self.counters if k == key and at <= start))


@dataclass
class Workload:
    namespace: str
    name: str
    uid: str
    queue: str
    cluster_queue: str
    flavor: str
    count: int
    per_pod: dict  # resource -> quantity string (cpu, memory, nvidia.com/gpu)
    created: float
    admitted: float | None  # quota reserved + admitted at
    finished: float | None = None
    finish_reason: str = "Succeeded"
    deleted: float = INF
    owner: tuple = ("Job", "")
    pending_message: str = ""
    priority: int = 0

    def visible(self, t):
        return self.created <= t < self.deleted

    def admitted_at(self, t):
        return self.admitted is not None and self.admitted <= t and not self.finished_at(t)

    def finished_at(self, t):
        return self.finished is not None and t >= self.finished


@dataclass
class ClusterQueue:
    name: str
    cohort: str | None
    flavors: list  # [(flavor, {resource: (nominal, borrowing|None, lending|None)})]
    namespace_selector: dict = field(default_factory=dict)


@dataclass
class Flavor:
    name: str
    node_labels: dict


@dataclass
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str


# --------------------------------------------------------------------------------------
# Quantities
# --------------------------------------------------------------------------------------
_SUFFIX = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3}


def parse_quantity(q) -> float:
    q = str(q)
    for s in ("Ki", "Mi", "Gi", "Ti"):
        if q.endswith(s):
            return float(q[:-2]) * _SUFFIX[s]
    for s in ("k", "M", "G", "T", "m"):
        if q.endswith(s):
            return float(q[:-1]) * _SUFFIX[s]
    return float(q)


def format_quantity(v: float, kind: str) -> str:
    if kind == "memory":
        gi = v / 1024**3
        if gi == int(gi):
            return f"{int(gi)}Gi"
        return f"{int(v / 1024**2)}Mi"
    if v == int(v):
        return str(int(v))
    return f"{int(round(v * 1000))}m"


# --------------------------------------------------------------------------------------
# Scenario
# --------------------------------------------------------------------------------------
class Scenario:
    def __init__(self, name: str, seed: int, end: datetime, days: float):
        self.name = name
        self.seed = seed
        self.cluster_name = f"sim-{name}"
        self.end = end
        self.start = end - timedelta(days=days)
        self.t0 = self.start.timestamp()
        self.t1 = self.end.timestamp()
        self.nodes: list[Node] = []
        self.node_by_name: dict[str, Node] = {}
        self.entities: list[Entity] = []
        self.pods: list[Pod] = []
        self.namespaces: dict[str, dict] = {}  # name -> labels
        self.ns_created: dict[str, float] = {}
        self.workloads: list[Workload] = []
        self.cluster_queues: list[ClusterQueue] = []
        self.flavors: list[Flavor] = []
        self.local_queues: list[LocalQueue] = []
        self.xid_events: dict[int, list] = {}  # entity -> [(start, end, code)]
        self.controllers: dict[tuple, Controller] = {}  # (namespace, kind, name) -> ReplicaSet or Job
        self.health: dict[int, Health] = {}  # entity -> its health events
        self.overrides: dict[tuple, list] = {}  # (pod idx, entity) -> [(start, end, activity kind)]
        # GPUs handed out by DRA claims and by HAMi fractions: ``dra.py`` and ``hami.py`` define the elements, build
        # them and document the conventions. A scenario without them serves no resource.k8s.io group at all.
        self.dra_versions: tuple[str, ...] = ()  # resource.k8s.io versions the API server serves, highest first
        self.dra_attribution = True  # dcgm-exporter labels a DRA device's series with its consumers (DRA on)
        # How the cluster's exporters are set up (the demo's variants, ``scenarios.DEMO_VARIANTS``):
        self.exporter_node_name = True  # dcgm-exporter gets NODE_NAME: Hostname = node (else its own pod's name)
        self.stock_counters = False  # dcgm-exporter's stock list: no DCGM_FI_PROF_SM_ACTIVE (exposition.STOCK_OFF)
        # Its Prometheus evaluates deploy/monitoring/gpufinops-recording.yaml at every scrape (exposition.RECORDED)
        self.recording_rules = False
        self.rbac_denied: frozenset[tuple[str, str]] = frozenset()  # (apiGroup, resource) the collector may not list
        self.ksm_labels: tuple[str, ...] | None = None  # kube-state-metrics' label allowlist (None: all labels)
        self.dra_devices: dict[str, list] = {}  # node -> [dra.Device] its gpu.nvidia.com pool publishes
        self.dra_other_slices: list = []  # [dra.OtherSlice]: other drivers' devices (not GPUs)
        self.templates: list = []  # [dra.Template]: ResourceClaimTemplates
        self.claims: list = []  # [dra.Claim]: ResourceClaims, named and generated
        self.pod_claims: dict[int, list] = {}  # pod idx -> [dra.PodClaim]: its spec.resourceClaims
        self.dra_held: dict[tuple, tuple] = {}  # (pod idx, entity idx) -> (claim idx, device name)
        self.hami: dict[str, Any] = {}  # node -> hami.HamiNode: what HAMi registered
        self.hami_allocs: dict[int, list] = {}  # pod idx -> [hami.HamiAlloc]: its vgpu-devices-allocated
        self.node_annotations: dict[str, dict] = {}  # node -> annotations beside the usual ones
        self._seed_mix = _stable_int("seed", name, seed)

    # ------------------------------------------------------------------ building helpers
    def add_namespace(self, name: str, labels: dict | None = None):
        lab = {"kubernetes.io/metadata.name": name}
        lab.update(labels or {})
        self.namespaces[name] = lab
        self.ns_created[name] = self.t0 - 90 * 86400

    def add_node(
        self,
        name: str,
        model: str,
        gpus: int,
        labels: dict,
        *,
        kind: str = "whole",
        instance_type: str = "",
        cpu: str = "192",
        memory: str = "2097152Mi",
        mig_layout: list | None = None,
        replicas: int = 0,
        shared_resource: str | None = None,
        created: float | None = None,
        unschedulable_from: float | None = None,
        zero_alloc: bool = False,
        zone: str = "us-east-1a",
    ) -> Node:
        m = MODELS.get(model)
        lab = {
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "kubernetes.io/hostname": name,
            "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": zone[:-1],
        }
        lab.update(labels)
        cap = {
            "cpu": cpu,
            "memory": memory,
            "pods": "110",
            "ephemeral-storage": "1000Gi",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
        }
        node = Node(
            name=name,
            model=model,
            gpus=gpus,
            labels=lab,
            capacity=cap,
            allocatable={},
            created=0.0,
            cpu=cpu,
            memory=memory,
            instance_type=instance_type,
            kind=kind,
            unschedulable_from=unschedulable_from,
            zero_alloc=zero_alloc,
            timesliced=replicas,
            shared_resource=shared_resource,
        )
        node.created = created if created is not None else self.t0 - 30 * 86400
        node.uid = _uuid("node", self.name, self.seed, name)
        node.ip = "10.%d.%d.%d" % (  # noqa: UP031
            _stable_int(name) % 200 + 10,
            _stable_int(name, 1) % 250,
            _stable_int(name, 2) % 250 + 2,
        )
        if m is not None and gpus:
            lab.update(
                {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.count": str(gpus),
                    "nvidia.com/gpu.product": m["product"],
                    "nvidia.com/gpu.memory": str(m["memory"]),
                    "nvidia.com/gpu.family": m["family"],
                    "nvidia.com/gpu.compute.major": m["major"],
                    "nvidia.com/gpu.compute.minor": m["minor"],
                    "nvidia.com/gpu.machine": instance_type or "server",
                    "nvidia.com/gpu.mode": "compute",
                    "nvidia.com/gpu.deploy.dcgm-exporter": "true",
                    "nvidia.com/gpu.deploy.device-plugin": "true",
                    "nvidia.com/cuda.driver-version.full": DRIVER,
                    "nvidia.com/cuda.driver-version.major": "550",
                    "nvidia.com/cuda.driver-version.minor": "54",
                    "nvidia.com/cuda.driver-version.revision": "15",
                    "nvidia.com/cuda.runtime-version.full": "12.4",
                    "nvidia.com/cuda.runtime-version.major": "12",
                    "nvidia.com/cuda.runtime-version.minor": "4",
                    "nvidia.com/mig.capable": str(m["slices"] > 0).lower(),
                    "nvidia.com/mps.capable": "false",
                    "nvidia.com/vgpu.present": "false",
                    "nvidia.com/gpu.sharing-strategy": "none",
                    "nvidia.com/mig.strategy": "none",
                    "nvidia.com/gpu.replicas": "1",
                    "nvidia.com/gfd.timestamp": str(int(node.created)),
                }
            )
            # entities
            gpu_res = {}
            for g in range(gpus):
                ent = Entity(
                    idx=len(self.entities),
                    node=name,
                    gpu=g,
                    uuid="GPU-" + _uuid("gpu", self.name, self.seed, name, g),
                    pci="00000000:%02X:00.0" % (0x18 + 0x10 * g if g < 14 else g),
                    model=model,
                    mem=m["memory"],
                    replicas=replicas,
                )
                self.entities.append(ent)
                node.entities.append(ent.idx)
                layout = mig_layout[g] if mig_layout and g < len(mig_layout) else None
                if layout:
                    ent.mig_parent = True
                    for prof, gi in layout:
                        sl, mem = MIG_PROFILES[prof]
                        child = Entity(
                            idx=len(self.entities),
                            node=name,
                            gpu=g,
                            uuid=ent.uuid,
                            pci=ent.pci,
                            model=model,
                            profile=prof,
                            gi_id=str(gi),
                            slices=sl,
                            mem=mem,
                        )
                        self.entities.append(child)
                        ent.children.append(child.idx)
                        r = f"nvidia.com/mig-{prof}"
                        gpu_res[r] = gpu_res.get(r, 0) + 1
                else:
                    gpu_res["nvidia.com/gpu"] = gpu_res.get("nvidia.com/gpu", 0) + 1
            if kind == "mig":
                lab["nvidia.com/mig.strategy"] = "mixed"
                lab["nvidia.com/mig.config"] = "custom-config"
                lab["nvidia.com/mig.config.state"] = "success"
                lab["nvidia.com/gpu.replicas"] = "0"
                for r, n in gpu_res.items():
                    if r.startswith("nvidia.com/mig-"):
                        prof = r[len("nvidia.com/mig-") :]
                        sl, mem = MIG_PROFILES[prof]
                        lab[f"nvidia.com/{r[len('nvidia.com/') :]}.count"] = str(n)
                        lab[f"nvidia.com/{r[len('nvidia.com/') :]}.memory"] = str(mem)
                        lab[f"nvidia.com/{r[len('nvidia.com/') :]}.slices.gi"] = str(sl)
                        lab[f"nvidia.com/{r[len('nvidia.com/') :]}.slices.ci"] = str(sl)
                        lab[f"nvidia.com/{r[len('nvidia.com/') :]}.product"] = f"{m['product']}-MIG-{prof}"
            if replicas:
                lab["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
                lab["nvidia.com/gpu.replicas"] = str(replicas)
                lab["nvidia.com/device-plugin.config"] = f"time-sliced-{replicas}"
                if shared_resource == "nvidia.com/gpu.shared":
                    gpu_res = {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": gpus * replicas}
                else:
                    lab["nvidia.com/gpu.product"] = m["product"] + "-SHARED"
                    gpu_res = {"nvidia.com/gpu": gpus * replicas}
            if zero_alloc:
                gpu_res = {"nvidia.com/gpu": 0}
            cap.update({k: str(v) for k, v in gpu_res.items()})
        alloc = dict(cap)
        alloc["cpu"] = str(int(parse_quantity(cpu)) - 1) if "m" not in cpu else cpu
        alloc["memory"] = str(int(parse_quantity(memory) / 1024**2 * 0.95)) + "Mi"
        alloc["ephemeral-storage"] = "950Gi"
        node.allocatable = alloc
        self.nodes.append(node)
        self.node_by_name[name] = node
        return node

    def gpu_entity(self, node: str, gpu: int) -> Entity:
        return self.entities[self.node_by_name[node].entities[gpu]]

    def mig_entity(self, node: str, gpu: int, gi: int | str) -> Entity:
        parent = self.gpu_entity(node, gpu)
        for c in parent.children:
            if self.entities[c].gi_id == str(gi):
                return self.entities[c]
        raise KeyError((node, gpu, gi))

    def add_pod(
        self,
        namespace: str,
        name: str,
        *,
        node: str | None,
        start: float | None,
        gpus: dict | None = None,
        units: list | None = None,
        act: str = "batch",
        finish: float | None = None,
        end_phase: str | None = None,
        deleted: float | None = None,
        deleted_running: bool = False,
        labels: dict | None = None,
        owner: tuple | None = None,
        container: str = "main",
        image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
        init_gpus: dict | None = None,
        created: float | None = None,
        active_until: float = INF,
        cpu: str = "8",
        memory: str = "64Gi",
        node_selector: dict | None = None,
        pending_message: str = "",
        workload: Workload | None = None,
        xid: int = 0,
        annotations: dict | None = None,
        owner_parent: tuple | None = None,
    ) -> Pod:
        gpus = gpus or {}
        containers = [Container(name=container, image=image, gpu=dict(gpus), cpu=cpu, memory=memory)]
        inits = []
        if init_gpus:
            inits.append(
                Container(
                    name="prefetch-weights",
                    image="nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                    gpu=dict(init_gpus),
                    cpu="2",
                    memory="8Gi",
                )
            )
        lab = dict(labels or {})
        ann = dict(annotations or {})
        if workload is not None:
            lab.setdefault("kueue.x-k8s.io/queue-name", workload.queue)
            lab.setdefault("kueue.x-k8s.io/cluster-queue-name", workload.cluster_queue)
            lab.setdefault("kueue.x-k8s.io/local-queue-name", workload.queue)
            lab.setdefault("kueue.x-k8s.io/podset", "main")
            ann.setdefault("kueue.x-k8s.io/workload", workload.name)
        p = Pod(
            idx=len(self.pods),
            namespace=namespace,
            name=name,
            uid=_uuid("pod", self.name, self.seed, namespace, name),
            labels=lab,
            containers=containers,
            init_containers=inits,
            annotations=ann,
            owner=owner,
            node=node,
            start=start,
            finish=finish,
            end_phase=end_phase,
            act=act,
            active_until=active_until,
            node_selector=dict(node_selector or {}),
            pending_message=pending_message,
            workload=workload.name if workload else None,
            xid=xid,
            owner_parent=owner_parent,
        )
        p.created = created if created is not None else (start if start is not None else self.t0)
        if finish is not None:
            p.deleted = finish + 3 * 3600
        if deleted is not None:
            p.deleted = deleted
            p.deleted_running = deleted_running
        p.ip = f"10.244.{p.idx // 250 % 250}.{p.idx % 250 + 2}"
        self.pods.append(p)
        if owner is not None and owner[0] in ("ReplicaSet", "Job", "StatefulSet"):
            self.controller(namespace, owner[0], owner[1], owner_parent).pods.append(p.idx)
        if node is not None and start is not None:
            for u in units or []:
                p.units.append(u)
                ent = self.entities[u.entity]
                ent.intervals.append((start, p.hold_end, p.idx, p.gpu_container, u.vgpu, u.ghost))
            if xid and finish is not None:
                for u in p.units:
                    self.xid_events.setdefault(u.entity, []).append((finish - SEG, finish + 3600, xid))
        return p

    def controller(self, namespace: str, kind: str, name: str, owner: tuple | None = None) -> Controller:
        """The ReplicaSet or Job ``name`` (created on first use); ``owner``: its controller, when it has one."""
        key = (namespace, kind, name)
        c = self.controllers.get(key)
        if c is None:
            c = self.controllers[key] = Controller(namespace, kind, name, owner_uid(self, namespace, name), owner)
        elif owner is not None and c.owner is None:
            c.owner = owner
        return c

    def health_of(self, entity: int) -> Health:
        h = self.health.get(entity)
        if h is None:
            h = self.health[entity] = Health()
        return h

    def finalize(self):
        for e in self.entities:
            e.intervals.sort()
        # A thermally throttled rank: its GPUs show SW thermal slowdown + HW slowdown while it holds them.
        hot = CLOCK_SW_THERMAL | CLOCK_HW_SLOWDOWN
        for p in self.pods:
            if p.act == "train_throttled" and p.start is not None:
                for u in p.units:
                    self.health_of(u.entity).throttle.append((p.start, p.hold_end, hot))
        for h in self.health.values():
            h.throttle.sort()
            h.counters.sort()
        for c in self.controllers.values():
            pods = [self.pods[i] for i in c.pods]
            if pods:
                c.created = min(p.created for p in pods)
                c.deleted = max(p.deleted for p in pods)
        for w in self.workloads:  # Jobs that Kueue keeps suspended: no pods, they live with their workload
            kind, name = w.owner
            if kind == "Job" and name and (w.namespace, kind, name) not in self.controllers:
                c = self.controller(w.namespace, kind, name)
                c.created, c.deleted, c.suspended = w.created, w.deleted, True

    # ------------------------------------------------------------------ activity model
    def pod_level(self, pod: Pod, seg: int, ent: int) -> float:
        """SM_ACTIVE demand of ``pod`` on entity ``ent`` during 5-min segment ``seg``."""
        kind = pod.act
        if self.overrides:  # one GPU of a pod running differently for a while (a straggling rank)
            for s, e, k in self.overrides.get((pod.idx, ent), ()):
                if s <= seg * SEG < e:
                    kind = k
        base, jit, _, _ = ACT_KINDS[kind]
        if kind == "ghost":
            return 0.0
        u = _u01(self._seed_mix, pod.idx, ent, seg)
        if kind in NOTEBOOK_KINDS:
            v = 0.35 + 0.3 * (u - 0.5) if seg * SEG < pod.active_until else jit * u
        elif kind in ("infer", "infer_light"):
            hod = (seg * SEG % 86400) / 3600.0
            swing = 0.18 if kind == "infer" else 0.06  # the light one never idles: busy 10-26 %
            v = base + swing * math.sin(2 * math.pi * (hod - 8) / 24.0) + jit * (u - 0.5)
        else:
            v = base + jit * (u - 0.5)
        return round(min(1.0, max(0.0, v)), 4)

    def entity_state(self, ent: Entity, t: float):
        """Holders active at t: list of (pod, container, vgpu, ghost)."""
        out = []
        for s, e, pidx, cont, vgpu, ghost in ent.intervals:
            if s > t:
                break
            if t < e:
                out.append((self.pods[pidx], cont, vgpu, ghost))
        return out

    def entity_values(self, ent: Entity, t: float, holders=None, kids=None, activity_only: bool = False) -> dict:
        """DCGM values of an entity at t (piecewise constant per segment).

        ``holders``: ``entity_state(ent, t)`` when the caller has it; ``kids``: the values of a MIG parent's
        instances at t, when the caller has them; ``activity_only``: only the ``ACTIVITY_KEYS``."""
        seg = int(t // SEG)
        if holders is None:
            holders = self.entity_state(ent, t)
        m = MODELS[ent.model]
        health = self.health.get(ent.idx)
        if ent.mig_parent:
            if kids is None:
                kids = [self.entity_values(self.entities[c], t, activity_only=activity_only) for c in ent.children]
            s = round(sum(k["sm"] * self.entities[c].slices for k, c in zip(kids, ent.children, strict=False)) / 7.0, 4)
            gr = round(
                sum(k["gr"] * self.entities[c].slices for k, c in zip(kids, ent.children, strict=False)) / 7.0, 4
            )
            tn = round(
                sum(k["tensor"] * self.entities[c].slices for k, c in zip(kids, ent.children, strict=False)) / 7.0, 4
            )
            used = 0 if activity_only else sum(k["fb_used"] for k in kids)
            kind = None
        else:
            live = [h for h in holders if not h[3]]
            s = 0.0
            kind = None
            for pod, _c, _v, _g in live:
                s += self.pod_level(pod, seg, ent.idx)
                kind = kind or pod.act
            if not live and health is not None and health.rogue and any(a <= t < b for a, b in health.rogue):
                base, jit, _, _ = ACT_KINDS["rogue"]
                s = max(0.0, base + jit * (_u01(self._seed_mix, 79, ent.idx, seg) - 0.5))
                kind = "rogue"
            s = round(min(1.0, s), 4)
            gr = round(min(1.0, s + 0.12 * s * (1 - s)), 4)
            tf = ACT_KINDS[kind][2] if kind else 0.0
            tn = round(s * tf, 4)
            mf = ACT_KINDS[kind][3] if kind else 0.0
            if kind is not None and not activity_only:
                jit = _u01(self._seed_mix, 77, ent.idx, seg)
                first = live[0][0] if live else None
                if first is not None and first.act == "notebook_idle" and seg * SEG >= first.active_until:
                    used = 300 + int(200 * jit)  # the kernel is gone: a CUDA context at most
                else:
                    share = 1.0 if not ent.replicas else min(1.0, 0.3 * max(1, len(live)))
                    used = int(ent.mem * min(0.97, mf * share + 0.03 * jit)) + 400
            else:
                used = 0
        util = None
        if not ent.mig_parent and ent.profile is None:
            util = float(min(100, math.ceil(round(100 * (gr + 0.6 * gr * (1 - gr)), 6))))
        vals = {"sm": s, "gr": gr, "tensor": tn, "util": util}
        if activity_only:
            return vals
        total = ent.mem
        vals["fb_used"] = float(used)
        vals["fb_free"] = float(max(0, total - used - (0 if ent.profile else 512)))
        if ent.profile is None:  # device-level fields: not on MIG instances
            bits = health.bits(t) if health is not None else 0
            vals["power"] = round(
                m["idle_w"] + (m["max_w"] - m["idle_w"]) * 0.92 * s + 3 * _u01(self._seed_mix, 78, ent.idx, seg), 3
            )
            vals["temp"] = float(int(29 + 48 * s + (11 if bits & THERMAL_BITS else 0)))
            vals["throttle"] = float(bits or (CLOCK_GPU_IDLE if s < 0.01 else 0))
            if health is None:
                vals["power_violation"] = vals["thermal_violation"] = vals["ecc_dbe"] = 0.0
                vals["remap_failure"] = vals["remap_correctable"] = vals["remap_uncorrectable"] = 0.0
            else:
                vals["power_violation"] = health.violation_ns(t, POWER_BITS)
                vals["thermal_violation"] = health.violation_ns(t, THERMAL_BITS)
                vals["ecc_dbe"] = health.counter(t, "ecc_dbe")
                vals["remap_correctable"] = health.counter(t, "remap_correctable")
                vals["remap_uncorrectable"] = health.counter(t, "remap_uncorrectable")
                failed = health.remap_failure_from is not None and t >= health.remap_failure_from
                vals["remap_failure"] = 1.0 if failed else 0.0
        xid = 0
        for xs, xe, code in self.xid_events.get(ent.idx, ()):
            if xs <= t < xe:
                xid = code
        vals["xid"] = float(xid)
        return vals
