"""Ground truth computed by brute force from the scenario model (independent of product code), for the tests.

Follows /work/shared/spec/ledger.md:

* held interval of a pod: [status.startTime, finish | deletion); never-bound pods hold nothing;
* effective request = max(sum of app containers + sidecars, max of init containers) — in the model
  each requested unit is a ``Unit`` with its share (whole 1, MIG N/7, time-sliced 1/R);
* a unit is *measured* when some DCGM series carries the pod identity for it (not on an entity
  whose series lost their pod labels, not a GPU only an init container used); under the
  ``gpu_util`` signal MIG instances have no series and are unmeasured;
* working = allocated x time-average of the signal over the held part of the hour
  (``gpu_util`` = DCGM_FI_DEV_GPU_UTIL / 100; time-sliced tenants get the device value);
* team = pod label ``team`` > namespace label ``team`` > ``unassigned``;
* capacity = physical GPUs x hours the node existed; unavailable = capacity hours while the node
  is cordoned / NotReady / advertises zero allocatable GPUs.

Fragmentation definitions (per node group at an instant):
  nodes, physical_gpus: GPU nodes of the group and their physical GPUs;
  allocatable_gpus: physical-GPU equivalents of allocatable NVIDIA resources (whole 1, MIG N/7,
      time-sliced replica 1/R), all nodes;
  allocated_gpus: sum of shares held by running pods;
  free_gpus: allocatable - allocated over *schedulable* nodes (not cordoned, Ready);
  largest_free_block, placeable[k], stranded_gpus[k]: over schedulable nodes, counting only free
      whole ``nvidia.com/gpu`` devices of non-shared nodes (MIG instances and time-sliced replicas
      are not whole GPUs): largest = max free per node, placeable[k] = sum floor(free/k),
      stranded[k] = sum (free mod k);
  zero_allocatable_nodes: nodes advertising zero allocatable NVIDIA resources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from devtools.simulator.model import SEG, Node, Pod, Scenario, parse_quantity, to_ts

SIGNALS = ("sm_active", "gr_engine_active", "tensor_active", "gpu_util")
POOL_LABELS = (
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
)
SHAPES = (1, 2, 4, 8)
_KEY = {"sm_active": "sm", "gr_engine_active": "gr", "tensor_active": "tensor", "gpu_util": "util"}


@dataclass
class Ledger:
    signal: str
    pod_hours: list = field(default_factory=list)
    team_hours: dict = field(default_factory=dict)
    node_hours: dict = field(default_factory=dict)

    def totals(self) -> dict:
        out = {"allocated": 0.0, "working": 0.0, "idle": 0.0, "unmeasured": 0.0}
        for r in self.pod_hours:
            for k in out:
                out[k] += r[k]
        return out


def gpu_model(n: Node) -> str:
    """The product label without the `-MIG-<profile>` (MIG single) or `-SHARED` (time-slicing) suffix."""
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
    if p.labels.get("team"):
        return p.labels["team"]
    ns = sc.namespaces.get(p.namespace, {})
    return ns.get("team") or "unassigned"


class _SignalCache:
    def __init__(self, sc: Scenario, signal: str):
        self.sc = sc
        self.key = _KEY[signal]
        self.cache: dict = {}

    def value(self, ent: int, seg: int):
        k = (ent, seg)
        if k not in self.cache:
            v = self.sc.entity_values(self.sc.entities[ent], seg * SEG)[self.key]
            if v is not None and self.key == "util":
                v = v / 100.0
            self.cache[k] = v
        return self.cache[k]

    def average(self, ent: int, a: float, b: float):
        """Exact time-average over [a, b) (signals are piecewise constant per segment)."""
        tot = 0.0
        t = a
        while t < b:
            seg = int(t // SEG)
            nxt = min(b, (seg + 1) * SEG)
            v = self.value(ent, seg)
            if v is None:
                return None
            tot += v * (nxt - t)
            t = nxt
        return tot / (b - a)


def _hours(start: datetime, end: datetime):
    h = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    while h < end:
        yield h
        h += timedelta(hours=1)


def expected_ledger(sc: Scenario, start: datetime, end: datetime, signal: str = "sm_active") -> Ledger:
    if signal not in SIGNALS:
        raise ValueError(signal)
    cache = _SignalCache(sc, signal)
    led = Ledger(signal=signal)
    a0, b0 = to_ts(start), to_ts(end)
    held_pods = [
        p
        for p in sc.pods
        if p.start is not None and p.node is not None and p.units and p.start < b0 and p.hold_end > a0
    ]
    for h in _hours(start, end):
        ha = h.timestamp()
        hb = ha + 3600.0
        for p in held_pods:
            a, b = max(ha, p.start, a0), min(hb, p.hold_end, b0)
            if b <= a:
                continue
            hrs = (b - a) / 3600.0
            alloc = work = unm = 0.0
            for u in p.units:
                al = u.share * hrs
                alloc += al
                ent = sc.entities[u.entity]
                if u.ghost or ent.labels_lost:
                    unm += al
                    continue
                avg = cache.average(u.entity, a, b)
                if avg is None:
                    unm += al
                    continue
                work += al * avg
            idle = alloc - work - unm
            team = pod_team(sc, p)
            led.pod_hours.append(
                {
                    "hour": h,
                    "namespace": p.namespace,
                    "pod": p.name,
                    "team": team,
                    "node": p.node,
                    "allocated": alloc,
                    "working": work,
                    "idle": idle,
                    "unmeasured": unm,
                }
            )
            th = led.team_hours.setdefault(
                (h, team), {"allocated": 0.0, "working": 0.0, "idle": 0.0, "unmeasured": 0.0}
            )
            th["allocated"] += alloc
            th["working"] += work
            th["idle"] += idle
            th["unmeasured"] += unm
        for n in sc.nodes:
            if not n.gpus:
                continue
            a, b = max(ha, n.created, a0), min(hb, b0)
            if b <= a:
                continue
            cap = n.gpus * (b - a) / 3600.0
            unav = 0.0
            if n.zero_alloc:
                unav = cap
            elif n.unschedulable_from is not None:
                ua = max(a, n.unschedulable_from)
                if b > ua:
                    unav = n.gpus * (b - ua) / 3600.0
            led.node_hours[(h, n.name)] = {"capacity": cap, "allocated": 0.0, "unallocated": cap, "unavailable": unav}
    # node allocation from pod hours (same hours)
    for r in led.pod_hours:
        nh = led.node_hours.get((r["hour"], r["node"]))
        if nh is not None:
            nh["allocated"] += r["allocated"]
            nh["unallocated"] = nh["capacity"] - nh["allocated"]
    return led


# ------------------------------------------------------------------------------ fragmentation
def _node_alloc_eq(n: Node) -> float:
    tot = 0.0
    for r, q in n.allocatable.items():
        if not r.startswith("nvidia.com/"):
            continue
        v = parse_quantity(q)
        if r.startswith("nvidia.com/mig-"):
            prof = r[len("nvidia.com/mig-") :]
            tot += v * int(prof.split("g", 1)[0]) / 7.0
        elif n.timesliced:
            tot += v / n.timesliced
        else:
            tot += v
    return tot


def _node_state(sc: Scenario, t: float):
    held: dict = {}
    whole_used: dict = {}
    for p in sc.pods:
        if p.node is None or not p.held(t):
            continue
        for u in p.units:
            held[p.node] = held.get(p.node, 0.0) + u.share
            if u.resource == "nvidia.com/gpu" and u.vgpu is None:
                whole_used[p.node] = whole_used.get(p.node, 0) + 1
    return held, whole_used


def _whole_free(n: Node, whole_used: dict) -> int:
    if n.timesliced or n.zero_alloc:
        return 0
    return int(parse_quantity(n.allocatable.get("nvidia.com/gpu", "0"))) - whole_used.get(n.name, 0)


def _schedulable(n: Node, t: float) -> bool:
    return not n.unschedulable(t)


def _gpu_nodes(sc: Scenario, t: float):
    return [n for n in sc.nodes if n.gpus and n.created <= t]


def expected_fragmentation(sc: Scenario, at) -> list[dict]:
    t = to_ts(at)
    held, whole_used = _node_state(sc, t)
    groups: dict = {}
    for n in _gpu_nodes(sc, t):
        groups.setdefault(node_group(n), []).append(n)
    out = []
    for g, nodes in sorted(groups.items()):
        models: dict = {}
        for n in nodes:
            models[gpu_model(n)] = models.get(gpu_model(n), 0) + n.gpus
        alloc_eq = sum(_node_alloc_eq(n) for n in nodes)
        allocated = sum(held.get(n.name, 0.0) for n in nodes)
        sched = [n for n in nodes if _schedulable(n, t)]
        free = sum(_node_alloc_eq(n) - held.get(n.name, 0.0) for n in sched)
        wf = [_whole_free(n, whole_used) for n in sched]
        out.append(
            {
                "node_group": g,
                "gpu_model": max(models, key=models.get),
                "nodes": len(nodes),
                "physical_gpus": sum(n.gpus for n in nodes),
                "allocatable_gpus": round(alloc_eq, 9),
                "allocated_gpus": round(allocated, 9),
                "free_gpus": round(free, 9),
                "largest_free_block": max(wf) if wf else 0,
                "placeable": {str(k): sum(f // k for f in wf) for k in SHAPES},
                "stranded_gpus": {str(k): sum(f % k for f in wf) for k in SHAPES},
                "zero_allocatable_nodes": sum(1 for n in nodes if _node_alloc_eq(n) == 0),
            }
        )
    return out


# ------------------------------------------------------------------------------ pending
def _groups_matching(sc: Scenario, selector: dict, t: float) -> list:
    gs = []
    for n in _gpu_nodes(sc, t):
        if all(n.labels.get(k) == v for k, v in selector.items()) and node_group(n) not in gs:
            gs.append(node_group(n))
    return gs


def _req_eq(p: Pod) -> float:
    tot = 0.0
    for r, v in p.effective_request().items():
        if r.startswith("nvidia.com/mig-"):
            tot += v * int(r[len("nvidia.com/mig-") :].split("g", 1)[0]) / 7.0
        elif r.startswith("nvidia.com/"):
            tot += v
    return tot


def expected_pending(sc: Scenario, at) -> list[dict]:
    """Pods in phase Pending that are not bound to a node, and Kueue workloads without quota.

    reason: ``quota`` (workload without QuotaReserved); for pods, on the schedulable nodes that
    match the pod's nodeSelector: no matching node -> ``other``; a single node has enough free
    whole GPUs -> ``other``; the free whole GPUs of the group add up to the request ->
    ``fragmentation``; otherwise ``capacity``."""
    t = to_ts(at)
    held, whole_used = _node_state(sc, t)
    out = []
    for p in sc.pods:
        if not p.visible(t) or p.phase(t) != "Pending":
            continue
        req = p.effective_request().get("nvidia.com/gpu", 0)
        gs = _groups_matching(sc, p.node_selector, t)
        nodes = [
            n
            for n in _gpu_nodes(sc, t)
            if all(n.labels.get(k) == v for k, v in p.node_selector.items()) and _schedulable(n, t)
        ]
        wf = [_whole_free(n, whole_used) for n in nodes]
        if not nodes or (wf and max(wf) >= req):
            reason = "other"
        elif sum(wf) >= req:
            reason = "fragmentation"
        else:
            reason = "capacity"
        out.append(
            {
                "namespace": p.namespace,
                "name": p.name,
                "kind": "pod",
                "gpus": _req_eq(p),
                "node_group": gs[0] if len(gs) == 1 else None,
                "reason": reason,
            }
        )
    flavors = {f.name: f for f in sc.flavors}
    for w in sc.workloads:
        if not w.visible(t) or w.finished_at(t) or w.admitted_at(t):
            continue
        gpus = sum(parse_quantity(q) for r, q in w.per_pod.items() if r.startswith("nvidia.com/")) * w.count
        f = flavors.get(w.flavor)
        gs = _groups_matching(sc, f.node_labels, t) if f else []
        out.append(
            {
                "namespace": w.namespace,
                "name": w.name,
                "kind": "workload",
                "gpus": gpus,
                "node_group": gs[0] if len(gs) == 1 else None,
                "reason": "quota",
            }
        )
    return out


# ------------------------------------------------------------------------------ queues
def expected_queues(sc: Scenario, at) -> list[dict]:
    """One row per ClusterQueue x flavor x resource. Quantities as numbers (cpu in cores,
    memory in bytes); borrowing_limit / lending_limit None when unset; borrowed = max(0,
    reserved - nominal)."""
    t = to_ts(at)
    reserved: dict = {}
    used: dict = {}
    counts: dict = {}
    for w in sc.workloads:
        if not w.visible(t):
            continue
        c = counts.setdefault(w.cluster_queue, [0, 0])
        if w.finished_at(t):
            continue
        if w.admitted_at(t):
            c[1] += 1
            for r, q in w.per_pod.items():
                k = (w.cluster_queue, w.flavor, r)
                reserved[k] = reserved.get(k, 0.0) + parse_quantity(q) * w.count
                used[k] = used.get(k, 0.0) + parse_quantity(q) * w.count
        else:
            c[0] += 1
    rows = []
    for cq in sc.cluster_queues:
        pend, adm = counts.get(cq.name, [0, 0])
        for fname, res in cq.flavors:
            for r, (nom, bl, ll) in res.items():
                k = (cq.name, fname, r)
                nominal = parse_quantity(nom)
                rv = reserved.get(k, 0.0)
                rows.append(
                    {
                        "cluster_queue": cq.name,
                        "cohort": cq.cohort,
                        "flavor": fname,
                        "resource": r,
                        "nominal_quota": nominal,
                        "borrowing_limit": None if bl is None else parse_quantity(bl),
                        "lending_limit": None if ll is None else parse_quantity(ll),
                        "reserved": rv,
                        "used": used.get(k, 0.0),
                        "borrowed": max(0.0, rv - nominal),
                        "pending_workloads": pend,
                        "admitted_workloads": adm,
                    }
                )
    return rows
