"""The `large` scenario: 10,000 GPUs (1,250 nodes x 8) with sequential jobs per GPU block, generated; optionally a
fraction of its nodes on NVIDIA's DRA driver (the same jobs, each holding its GPUs through a template claim)."""

from __future__ import annotations

import math
import random

from ..builders import D, H, whole
from ..dra import GPU_CLASS, Request, add_template, make_dra, template_pod
from ..model import SEG, ClusterQueue, Flavor, Scenario, align5

NODES = 1250  # 8 GPUs each: 10,000 GPUs


def _on_dra(i: int, fraction: float) -> bool:
    """Node ``i`` is on DRA when the running count of ``fraction`` x nodes steps at it: spread evenly over
    the pools (a third: every third node)."""
    return math.floor((i + 1) * fraction + 1e-9) > math.floor(i * fraction + 1e-9)


def build(sc: Scenario, nodes: int = NODES, dra_fraction: float = 0.0) -> None:
    """``nodes`` x 8 GPUs (default 1,250 = 10,000 GPUs); sequential jobs per GPU block.

    A smaller ``nodes`` keeps the node-group shares (and Kueue quotas) in proportion, e.g. 125 nodes = 1,000
    GPUs: benchmarks of many clusters (bench/fanout.py) need many mid-sized ones. The default is the pinned fleet.
    ``dra_fraction`` puts that fraction of the nodes (never one the device plugin left without allocatable GPUs)
    on DRA without drawing anything else: the pods, their times and activity are those of the device-plugin
    fleet, only handed out by claims (template ``gpu-x<width>`` of the pod's namespace).
    """
    if nodes < 1:
        raise ValueError("nodes must be positive")
    T0, T1 = sc.t0, sc.t1
    rng = random.Random(sc.seed * 104729 + 17)
    # Group sizes in proportion to the 10,000-GPU fleet; the last group takes the rounding remainder.
    shares = [round(n * nodes / NODES) for n in (500, 250, 300)]
    shares.append(max(nodes - sum(shares), 0))
    teams = [f"team-{i:02d}" for i in range(24)]
    for tm in teams:
        sc.add_namespace(tm, {"team": tm})
    sc.add_namespace("shared-infra")
    sc.add_namespace("kube-system")
    pools = (
        [("h100-a", "H100", "karpenter.sh/nodepool", "p5.48xlarge")] * shares[0]
        + [("h100-b", "H100", "karpenter.sh/nodepool", "p5.48xlarge")] * shares[1]
        + [("a100", "A100", "cloud.google.com/gke-nodepool", "a2-ultragpu-8g")] * shares[2]
        + [("l40s", "L40S", None, "g6e.48xlarge")] * shares[3]
    )
    kinds = ["train", "train", "batch", "batch", "infer", "infer", "eval", "notebook", "notebook_idle"]
    templates: dict = {}
    shapes = [[8], [8], [4, 4], [4, 2, 2], [2, 2, 2, 1, 1], [1] * 8]
    for i, (pool, model, key, itype) in enumerate(pools):
        name = f"gpu-{pool}-{i:04d}"
        labels = {key: pool} if key else {}
        node = sc.add_node(
            name,
            model,
            8,
            labels,
            instance_type=itype,
            unschedulable_from=(T0 + rng.uniform(0, 6) * D if rng.random() < 0.005 else None),
            zero_alloc=rng.random() < 0.003,
        )
        if node.zero_alloc:
            continue
        on_dra = dra_fraction > 0 and _on_dra(i, dra_fraction)
        if on_dra:
            make_dra(sc, node)
            sc.dra_versions = ("v1",)
        shape = rng.choice(shapes)
        g0 = 0
        for b, width in enumerate(shape):
            gpus = list(range(g0, g0 + width))
            g0 += width
            lost = rng.random() < 0.01
            if lost:
                for g in gpus:
                    sc.gpu_entity(name, g).labels_lost = True
            t = align5(T0 - rng.uniform(0, 12) * H)
            n = 0
            while t < T1:
                if node.unschedulable_from is not None and t >= node.unschedulable_from:
                    break
                dur = align5(rng.uniform(1.5, 30) * H) or SEG
                team = rng.choice(teams)
                act = rng.choice(kinds)
                finish = t + dur
                running = finish >= T1
                phase = None if running else ("Failed" if rng.random() < 0.1 else "Succeeded")
                pname = f"{act.replace('_', '-')}-{i:04d}-{b}-{n:03d}"
                pod = {"act": act, "finish": None if running else finish, "end_phase": phase,
                       "owner": ("Job", pname), "labels": {"job-name": pname}, "active_until": t + 2 * H,
                       "xid": 31 if phase == "Failed" else 0}
                if on_dra:
                    key = (team, width)
                    if key not in templates:
                        templates[key] = add_template(sc, team, f"gpu-x{width}",
                                                      [Request("gpus", GPU_CLASS, count=width)])
                    template_pod(sc, team, pname, templates[key], [f"gpu-{g}" for g in gpus], node=name, start=t,
                                 **pod)
                else:
                    sc.add_pod(team, pname, node=name, start=t, gpus={"nvidia.com/gpu": width},
                               units=whole(sc, name, gpus), **pod)
                n += 1
                t = align5(finish + rng.uniform(0, 4) * H)
                if rng.random() < 0.15:
                    t = align5(t + rng.uniform(4, 24) * H)
    sc.flavors = [
        Flavor(p, {k: p})
        for p, k in (
            ("h100-a", "karpenter.sh/nodepool"),
            ("h100-b", "karpenter.sh/nodepool"),
            ("a100", "cloud.google.com/gke-nodepool"),
        )
    ]
    sc.cluster_queues = [
        ClusterQueue(f"{p}-cq", "fleet", [(p, {"nvidia.com/gpu": (n, None, None)})], {})
        for p, n in (("h100-a", shares[0] * 8), ("h100-b", shares[1] * 8), ("a100", shares[2] * 8))
    ]
