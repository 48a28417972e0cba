"""The ledger's truth: pods' held units, activity, teams, workloads, capacity (``tests/oracle/__init__.py`` has
the definitions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from devtools.simulator.model import SEG, Entity, Node, Pod, Scenario, to_ts

from . import accelerators as acc

SIGNALS = ("sm_active", "gr_engine_active", "tensor_active", "gpu_util")
POOL_LABELS = (
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
)
_KEY = {"sm_active": "sm", "gr_engine_active": "gr", "tensor_active": "tensor", "gpu_util": "util"}


@dataclass
class Ledger:
    signal: str
    pod_hours: list = field(default_factory=list)
    claim_hours: list = field(default_factory=list)  # DRA claims allocated with no running consumer: idle
    team_hours: dict = field(default_factory=dict)
    node_hours: dict = field(default_factory=dict)
    cache: object = None  # the _SignalCache the ledger was computed with
    splits: dict = field(default_factory=dict)  # hour -> accelerators.Splits of the hour (DRA and HAMi)

    @property
    def rows(self) -> list:
        """Every row that holds GPU-hours: pods', then claims'."""
        return self.pod_hours + self.claim_hours

    def totals(self) -> dict:
        out = {"allocated": 0.0, "working": 0.0, "idle": 0.0, "unmeasured": 0.0}
        for r in self.rows:
            for k in out:
                out[k] += r[k]
        return out


def gpu_model(n: Node) -> str:
    """The product label without the `-MIG-<profile>` (MIG single) or `-SHARED` (time-slicing) suffix; a DRA or
    HAMi node's model (which may have no GFD label) is its GPUs' product name."""
    if n.kind in ("dra", "hami"):
        return acc.node_model(n)
    product = n.labels.get("nvidia.com/gpu.product", "")
    product = product.split("-MIG-", 1)[0]
    return product[: -len("-SHARED")] if product.endswith("-SHARED") else product


def node_group(n: Node) -> str:
    """The first node-pool label present, else the GPU model (ledger.md "Node groups")."""
    for key in POOL_LABELS:
        if key in n.labels:
            return n.labels[key]
    return gpu_model(n)


def pod_team(sc: Scenario, p: Pod) -> str:
    return acc.team_of(sc, p.namespace, p.labels)


# Operator labels naming the custom resource a pod belongs to where its owner chain ends (ledger.md "Workloads").
OPERATOR_LABELS = (
    ("jobset.sigs.k8s.io/jobset-name", "JobSet"),
    ("training.kubeflow.org/job-name", None),  # kind from training.kubeflow.org/operator-name
    ("ray.io/cluster", "RayCluster"),
    ("leaderworkerset.sigs.k8s.io/name", "LeaderWorkerSet"),
)
KUBEFLOW_KINDS = {"pytorchjob-controller": "PyTorchJob", "tfjob-controller": "TFJob", "mpijob-controller": "MPIJob",
                  "xgboostjob-controller": "XGBoostJob", "paddlejob-controller": "PaddleJob",
                  "jaxjob-controller": "JAXJob"}


def expected_workload(pod: Pod) -> str:
    """The pod's workload, ``Kind/name`` (in its namespace): its controller (``ownerReferences`` with
    ``controller: true``), climbing from a ReplicaSet or a Job to their own controller (Deployment, CronJob,
    JobSet) or from a StatefulSet to its (a LeaderWorkerSet's leaders; a worker's StatefulSet names its leader
    pod); where that ends at a pod, a ReplicaSet, a Job or a StatefulSet, an operator label (JobSet, Kubeflow
    training job, Ray cluster, LeaderWorkerSet: every LWS pod carries it) names the workload; a pod without
    controller is ``Pod/name``."""
    kind, name = pod.owner or ("Pod", pod.name)
    if kind in ("ReplicaSet", "Job", "StatefulSet") and pod.owner_parent:
        kind, name = pod.owner_parent
    if kind in ("Pod", "ReplicaSet", "Job", "StatefulSet"):
        for label, label_kind in OPERATOR_LABELS:
            if pod.labels.get(label):
                kind = label_kind or KUBEFLOW_KINDS.get(pod.labels.get("training.kubeflow.org/operator-name", ""),
                                                        "TrainingJob")
                name = pod.labels[label]
                break
    return f"{kind}/{name}"


def _physical(sc: Scenario, ent: Entity) -> Entity:
    """The physical GPU of an entity (itself, or a MIG instance's parent)."""
    return sc.gpu_entity(ent.node, ent.gpu)


def _reports(sc: Scenario, ent: Entity, t: float) -> bool:
    """Whether the exporter reports the entity at t (its physical GPU is not in a ``vanish`` gap)."""
    h = sc.health.get(_physical(sc, ent).idx)
    return h is None or not h.vanished(t)


class _SignalCache:
    """The DCGM values of entities per 5-minute segment (they are constant within one), computed once."""

    def __init__(self, sc: Scenario, signal: str):
        self.sc = sc
        self.key = _KEY[signal]
        self.cache: dict = {}
        self.present: dict = {}

    def values(self, ent: int, seg: int) -> dict | None:
        """Every DCGM value of the entity during segment ``seg``; None when it reports nothing then."""
        k = (ent, seg)
        if k not in self.cache:
            e = self.sc.entities[ent]
            t = seg * SEG
            self.cache[k] = self.sc.entity_values(e, t) if _reports(self.sc, e, t) else None
        return self.cache[k]

    def value(self, ent: int, seg: int):
        vals = self.values(ent, seg)
        if vals is None:
            return None
        v = vals[self.key]
        if v is not None and self.key == "util":
            v = v / 100.0
        return v

    def average(self, ent: int, a: float, b: float, key: str | None = None):
        """Exact time-average over the part of [a, b) in which the entity reports ``key`` (default: the
        signal); None when it reports none (signals are piecewise constant per segment)."""
        tot = present = 0.0
        t = a
        while t < b:
            seg = int(t // SEG)
            nxt = min(b, (seg + 1) * SEG)
            if key is None:
                v = self.value(ent, seg)
            else:
                vals = self.values(ent, seg)
                v = None if vals is None else vals.get(key)
            if v is not None:
                tot += v * (nxt - t)
                present += nxt - t
            t = nxt
        return tot / present if present else None


def _hours(start: datetime, end: datetime):
    h = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    while h < end:
        yield h
        h += timedelta(hours=1)


def _units(sc: Scenario, p: Pod, a: float, b: float, split: acc.Splits, cache: _SignalCache) -> list[dict]:
    """The pod's units held within [a, b): allocated GPU-hours and activity (None: unmeasured). A device-plugin
    unit holds its share over [a, b); a DRA or HAMi unit what ``accelerators.splits`` gives it. Activity is the
    time-average over [a, b) of the series matched to the unit: the pod's own for device-plugin units (none for a
    ghost unit or lost labels) and DRA units (none without the exporter's DRA attribution), the GPU's for HAMi
    tenants (dcgm-exporter never names them)."""
    mode = acc.allocation_mode(sc, p)
    out = []
    for u in p.units:
        ent = sc.entities[u.entity]
        if mode in ("dra", "hami"):
            allocated = split.pods.get((p.idx, u.entity), 0.0) / 3600.0
        else:
            allocated = u.share * (b - a) / 3600.0
        if mode == "hami":
            avg = cache.average(u.entity, a, b)
        elif u.ghost or ent.labels_lost or (mode == "dra" and not sc.dra_attribution):
            avg = None
        else:
            avg = cache.average(u.entity, a, b)
        out.append({"entity": u.entity, "share": u.share, "allocated": allocated, "activity": avg,
                    "time_sliced": mode == "hami" or u.vgpu is not None or ent.replicas > 0, "from": a, "to": b,
                    "mode": mode})
    return out


def _add(totals: dict, row: dict) -> None:
    for k in ("allocated", "working", "idle", "unmeasured"):
        totals[k] = totals.get(k, 0.0) + row[k]


def expected_ledger(sc: Scenario, start: datetime, end: datetime, signal: str = "sm_active") -> Ledger:
    if signal not in SIGNALS:
        raise ValueError(signal)
    cache = _SignalCache(sc, signal)
    led = Ledger(signal=signal, cache=cache)
    a0, b0 = to_ts(start), to_ts(end)
    held_pods = [
        p
        for p in sc.pods
        if p.start is not None and p.node is not None and p.units and p.start < b0 and p.hold_end > a0
    ]
    for h in _hours(start, end):
        ha, hb = max(h.timestamp(), a0), min(h.timestamp() + 3600.0, b0)
        split = led.splits[h] = acc.splits(sc, ha, hb)
        for p in held_pods:
            a, b = max(ha, p.start), min(hb, p.hold_end)
            if b <= a:
                continue
            units = _units(sc, p, a, b, split, cache)
            alloc = sum(u["allocated"] for u in units)
            unm = sum(u["allocated"] for u in units if u["activity"] is None)
            work = sum(u["allocated"] * u["activity"] for u in units if u["activity"] is not None)
            led.pod_hours.append(
                {
                    "hour": h,
                    "namespace": p.namespace,
                    "pod": p.name,
                    "team": pod_team(sc, p),
                    "workload": expected_workload(p),
                    "node": p.node,
                    "allocation_mode": units[0]["mode"],
                    "allocated": alloc,
                    "working": work,
                    "idle": alloc - work - unm,
                    "unmeasured": unm,
                    "units": units,  # per unit: entity, share, allocated, activity (None: unmeasured), ...
                }
            )
        for ci, idle in sorted(split.claims.items()):
            c = sc.claims[ci]
            hours = sum(idle.values()) / 3600.0
            led.claim_hours.append({"hour": h, "namespace": c.namespace, "claim": c.name, "pod": None,
                                    "team": acc.team_of(sc, c.namespace, c.labels),
                                    "workload": f"ResourceClaim/{c.name}", "node": c.node, "allocation_mode": "dra",
                                    "allocated": hours, "working": 0.0, "idle": hours, "unmeasured": 0.0,
                                    "entities": sorted(idle)})
        for n in sc.nodes:
            if not n.gpus:
                continue
            a, b = max(ha, n.created), hb
            if b <= a:
                continue
            gpus = acc.physical_gpus(sc, n)
            cap = gpus * (b - a) / 3600.0
            unav = 0.0
            if n.zero_alloc:
                unav = cap
            elif n.unschedulable_from is not None:
                ua = max(a, n.unschedulable_from)
                if b > ua:
                    unav = gpus * (b - ua) / 3600.0
            led.node_hours[(h, n.name)] = {"capacity": cap, "allocated": 0.0, "unallocated": cap, "unavailable": unav}
    for r in led.rows:  # teams and nodes from the same rows
        _add(led.team_hours.setdefault((r["hour"], r["team"]), {}), r)
        nh = led.node_hours.get((r["hour"], r["node"]))
        if nh is not None:
            nh["allocated"] += r["allocated"]
            nh["unallocated"] = nh["capacity"] - nh["allocated"]
    return led


# ------------------------------------------------------------------------------ workloads
def expected_usage_by_workload(sc: Scenario, start: datetime, end: datetime, signal: str = "sm_active") -> dict:
    """(team, namespace, workload, hour) -> {allocated, working, idle, unmeasured} GPU-hours: the ledger's pod
    hours (``expected_ledger``, same definitions) summed per workload (``expected_workload``), and the idle hours of
    claims with no consumer under ``ResourceClaim/<name>``."""
    out: dict = {}
    for r in expected_ledger(sc, start, end, signal).rows:
        row = out.setdefault((r["team"], r["namespace"], r["workload"], r["hour"]),
                             {"allocated": 0.0, "working": 0.0, "idle": 0.0, "unmeasured": 0.0})
        for k in row:
            row[k] += r[k]
    return out

