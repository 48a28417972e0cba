"""The truth for GPUs handed out by DRA claims and by HAMi fractions (ledger.md "GPUs handed out by claims (DRA) and
by fractions (HAMi)"), by brute force from the scenario model (``devtools/simulator/dra.py``), never from the
objects or the product. The ledger, capacity and findings modules of the oracle call these.

* Allocation mode of a pod (``allocation_mode``): ``dra`` when it consumes a claim (named, from a template, or the
  scheduler's extended-resource claim), ``hami`` when HAMi allocated it devices, ``mig`` for a device-plugin MIG
  instance, ``time_slice`` for a replica of a time-sliced GPU, else ``device_plugin``.
* A DRA device's share of its physical GPU: 1 for ``type=gpu``, the profile's compute slices / the model's for
  ``type=mig``; an admin-access result holds nothing. A claim holds its devices over ``[allocated, released)``;
  at each instant its running consumers (pods with start <= t < hold end) split each device's share equally
  (k consumers: share / k each); while none runs, the claim itself holds them: idle GPU-hours of the claim's
  namespace and team (claim label ``team`` > namespace label ``team`` > ``unassigned``), workload
  ``ResourceClaim/<name>``, on the claim's node.
* A HAMi tenant's share of a GPU: cores / 100 if cores > 0, else its memory / the GPU's registered memory. At
  each instant the shares of the tenants holding a GPU add up to S; while S > 1 (oversubscribed) each is scaled
  by 1 / S so the GPU's total is exactly 1.
* Physical GPUs of a DRA node: its ``type=gpu`` devices plus the distinct parents of MIG devices whose parent is
  not itself published; of a HAMi node: its registered devices. The GPU model of both is the model's product name
  (``productName`` / the register's type, spaces as ``-``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devtools.simulator import dra, hami
from devtools.simulator.model import MIG_PROFILES, MODELS, Node, Pod, Scenario

MODES = ("device_plugin", "time_slice", "mig", "dra", "hami")


def allocation_mode(sc: Scenario, p: Pod) -> str:
    if p.idx in sc.pod_claims:
        return "dra"
    if p.idx in sc.hami_allocs:
        return "hami"
    if any(u.resource.startswith("nvidia.com/mig-") for u in p.units):
        return "mig"
    if any(u.vgpu is not None or sc.entities[u.entity].replicas > 0 for u in p.units):
        return "time_slice"
    return "device_plugin"


def team_of(sc: Scenario, namespace: str, labels: dict) -> str:
    """Label ``team`` of the object (pod or claim) > namespace label ``team`` > ``unassigned``."""
    if labels.get("team"):
        return labels["team"]
    return sc.namespaces.get(namespace, {}).get("team") or "unassigned"


def device_share(sc: Scenario, d: dra.Device) -> float:
    if d.type == "gpu":
        return 1.0
    return MIG_PROFILES[d.profile][0] / MODELS[sc.entities[d.entity].model]["slices"]


def held_devices(sc: Scenario, c: dra.Claim) -> list[dra.Device]:
    """The devices a claim holds while allocated (admin-access results hold nothing)."""
    return [dra.device(sc, c.node, name) for _request, name, admin in c.results if not admin]


def hami_share(sc: Scenario, node: str, a: hami.HamiAlloc) -> float:
    devmem = next(d.devmem for d in sc.hami[node].devices if d.uuid == a.uuid)
    return a.cores / 100.0 if a.cores > 0 else a.mem / devmem


def _cuts(a: float, b: float, points) -> list[tuple[float, float]]:
    """[a, b) cut at the points inside it."""
    edges = sorted({a, b, *(x for x in points if a < x < b)})
    return list(zip(edges, edges[1:], strict=False))


@dataclass
class Splits:
    """Who holds what of DRA and HAMi GPUs within [a, b), in share-seconds."""

    pods: dict = field(default_factory=dict)  # (pod idx, entity idx) -> share-seconds
    claims: dict = field(default_factory=dict)  # claim idx -> {entity idx: share-seconds with no consumer}
    oversubscribed: dict = field(default_factory=dict)  # GPU entity idx -> seconds with S > 1
    peak: dict = field(default_factory=dict)  # GPU entity idx -> the largest S while oversubscribed


def splits(sc: Scenario, a: float, b: float) -> Splits:
    out = Splits()
    for ci, c in enumerate(sc.claims):
        lo, hi = max(a, c.allocated), min(b, c.released)
        if hi <= lo:
            continue
        consumers = [sc.pods[i] for i in c.consumers]
        devices = held_devices(sc, c)
        for s, e in _cuts(lo, hi, [x for p in consumers for x in (p.start, p.hold_end)]):
            running = [p for p in consumers if p.start <= s < p.hold_end]
            for d in devices:
                share = device_share(sc, d) * (e - s)
                if running:
                    for p in running:
                        key = (p.idx, d.entity)
                        out.pods[key] = out.pods.get(key, 0.0) + share / len(running)
                else:
                    idle = out.claims.setdefault(ci, {})
                    idle[d.entity] = idle.get(d.entity, 0.0) + share
    tenants: dict = {}  # GPU entity -> [(pod, raw share)]
    for pidx, allocs in sc.hami_allocs.items():
        p = sc.pods[pidx]
        if p.start < b and p.hold_end > a:
            for al in allocs:
                tenants.setdefault(al.entity, []).append((p, hami_share(sc, p.node, al)))
    for ent, held in tenants.items():
        for s, e in _cuts(a, b, [x for p, _r in held for x in (p.start, p.hold_end)]):
            running = [(p, r) for p, r in held if p.start <= s < p.hold_end]
            total = sum(r for _p, r in running)
            scale = 1.0 / total if total > 1.0 + 1e-12 else 1.0
            if scale < 1.0:
                out.oversubscribed[ent] = out.oversubscribed.get(ent, 0.0) + (e - s)
                out.peak[ent] = max(out.peak.get(ent, 0.0), total)
            for p, r in running:
                key = (p.idx, ent)
                out.pods[key] = out.pods.get(key, 0.0) + r * scale * (e - s)
    return out


# ------------------------------------------------------------------------------ capacity
def physical_gpus(sc: Scenario, n: Node) -> int:
    if n.kind == "dra":
        devices = sc.dra_devices[n.name]
        whole = {d.uuid for d in devices if d.type == "gpu"}
        return len(whole) + len({d.parent_uuid for d in devices if d.type == "mig"} - whole)
    if n.kind == "hami":
        return len(sc.hami[n.name].devices)
    return n.gpus


def node_model(n: Node) -> str:
    return MODELS[n.model]["product"]


def held_at(sc: Scenario, node: str, t: float) -> set[str]:
    """Names of the devices of ``node`` some allocated claim holds at t."""
    return {d.name for c in sc.claims if c.node == node and c.allocated_at(t) for d in held_devices(sc, c)}


@dataclass
class NodeFigures:
    """A node's fragmentation figures at an instant, in physical-GPU equivalents."""

    allocatable: float
    allocated: float
    free: float
    whole_free: int  # GPUs a whole-GPU job could still get


def dra_figures(sc: Scenario, n: Node, t: float) -> NodeFigures:
    """Per physical GPU: allocatable = 1 if its whole device is published, else the shares of its MIG devices
    (both published: the larger); allocated = 1 if the whole device is held, else the held MIG devices' shares;
    free = 0 if the whole device is held, the unheld MIG devices' shares if any MIG device is held, else the
    allocatable; a free whole GPU has its whole device published and neither it nor any MIG device held."""
    held = held_at(sc, n.name, t)
    per_gpu: dict = {}
    for d in sc.dra_devices[n.name]:
        per_gpu.setdefault(d.uuid if d.type == "gpu" else d.parent_uuid, []).append(d)
    figures = NodeFigures(0.0, 0.0, 0.0, 0)
    for devices in per_gpu.values():
        whole = next((d for d in devices if d.type == "gpu"), None)
        migs = [d for d in devices if d.type == "mig"]
        allocatable = max(1.0 if whole else 0.0, sum(device_share(sc, d) for d in migs))
        if whole is not None and whole.name in held:
            allocated, free = 1.0, 0.0
        elif any(d.name in held for d in migs):
            allocated = sum(device_share(sc, d) for d in migs if d.name in held)
            free = sum(device_share(sc, d) for d in migs if d.name not in held)
        else:
            allocated, free = 0.0, allocatable
            figures.whole_free += 1 if whole is not None else 0
        figures.allocatable += allocatable
        figures.allocated += allocated
        figures.free += free
    return figures


def hami_figures(sc: Scenario, n: Node, t: float) -> NodeFigures:
    """Per registered GPU: allocatable 1; allocated = min(1, S) of the tenants holding it at t; free = the rest;
    a GPU with any tenant is not free for a whole-GPU job."""
    share: dict = {}
    for pidx, allocs in sc.hami_allocs.items():
        p = sc.pods[pidx]
        if p.node == n.name and p.held(t):
            for al in allocs:
                share[al.entity] = share.get(al.entity, 0.0) + hami_share(sc, n.name, al)
    devices = sc.hami[n.name].devices
    allocated = sum(min(1.0, share.get(d.entity, 0.0)) for d in devices)
    return NodeFigures(float(len(devices)), allocated, len(devices) - allocated,
                       sum(1 for d in devices if d.entity not in share))
