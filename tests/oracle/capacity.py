"""Fragmentation and pending work at an instant (definitions in ``tests/oracle/__init__.py``)."""

from __future__ import annotations

from devtools.simulator.hami import HAMI_RESOURCES
from devtools.simulator.model import Node, Pod, Scenario, parse_quantity, to_ts

from . import accelerators as acc
from .ledger import gpu_model, node_group

SHAPES = (1, 2, 4, 8)


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
    """Per device-plugin node: the shares its running pods hold, and the whole GPUs they hold."""
    held: dict = {}
    whole_used: dict = {}
    for p in sc.pods:
        if p.node is None or not p.held(t) or acc.allocation_mode(sc, p) in ("dra", "hami"):
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


def _figures(sc: Scenario, n: Node, t: float, held: dict, whole_used: dict) -> acc.NodeFigures:
    if n.kind == "dra":
        return acc.dra_figures(sc, n, t)
    if n.kind == "hami":
        return acc.hami_figures(sc, n, t)
    allocatable = _node_alloc_eq(n)
    allocated = held.get(n.name, 0.0)
    return acc.NodeFigures(allocatable, allocated, allocatable - allocated, _whole_free(n, whole_used))


def _zero_allocatable(n: Node) -> bool:
    """Advertises no NVIDIA resource although it has GPUs; a DRA or HAMi node never is."""
    return n.kind not in ("dra", "hami") and _node_alloc_eq(n) == 0


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
            models[gpu_model(n)] = models.get(gpu_model(n), 0) + acc.physical_gpus(sc, n)
        figures = {n.name: _figures(sc, n, t, held, whole_used) for n in nodes}
        alloc_eq = sum(f.allocatable for f in figures.values())
        allocated = sum(f.allocated for f in figures.values())
        sched = [n for n in nodes if _schedulable(n, t)]
        free = sum(figures[n.name].free for n in sched)
        wf = [figures[n.name].whole_free for n in sched]
        out.append(
            {
                "node_group": g,
                "gpu_model": max(models, key=models.get),
                "nodes": len(nodes),
                "physical_gpus": sum(acc.physical_gpus(sc, n) for n in nodes),
                "allocatable_gpus": round(alloc_eq, 9),
                "allocated_gpus": round(allocated, 9),
                "free_gpus": round(free, 9),
                "largest_free_block": max(wf) if wf else 0,
                "placeable": {str(k): sum(f // k for f in wf) for k in SHAPES},
                "stranded_gpus": {str(k): sum(f % k for f in wf) for k in SHAPES},
                "zero_allocatable_nodes": sum(1 for n in nodes if _zero_allocatable(n)),
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
        elif r.startswith("nvidia.com/") and r not in HAMI_RESOURCES[1:]:  # HAMi's fractions are no GPUs
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
        wf = [_figures(sc, n, t, held, whole_used).whole_free for n in nodes]
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


