"""Kueue quota per ClusterQueue, flavor and resource at an instant."""

from __future__ import annotations

from devtools.simulator.model import Scenario, parse_quantity, to_ts


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

