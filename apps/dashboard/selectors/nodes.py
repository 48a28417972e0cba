"""The capacity page's nodes: every GPU node as last observed, how it hands its GPUs out (device plugin, time-slice,
MIG, DRA claims, HAMi fractions) and what that means for it now (DRA devices published and held; each HAMi GPU's
free fraction, and whether its tenants oversubscribe it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from apps.dashboard.scope import Scope
from apps.dashboard.selectors.shared import MODE_LABELS, teams_in_scope
from apps.dashboard.tables import Block, Column
from apps.inventory.gpus.holds import node_mode
from apps.inventory.models import Node
from apps.inventory.selectors import gpu_nodes

NODE_COLUMNS = [
    Column("node", "Node"), Column("node_group", "Cluster / node group", "text", "node-group", secondary=True),
    Column("gpu_model", "GPU model", secondary=True), Column("physical_gpus", "GPUs", "int", "capacity"),
    Column("mode", "Handed out by", "text", "allocation-mode"), Column("state", "State"),
    Column("now", "Now"),
]
SHARING_NOTES = {"time-slicing": "time-sliced", "mps": "MPS", "mig-mixed": "MIG, mixed strategy",
                 "mig-single": "MIG, single strategy"}


def _dra_now(devices: list[Mapping[str, Any]], held: list[str]) -> str:
    kinds = Counter(str(d.get("type") or "") for d in devices)
    held_names = set(held)
    parts = [f"{kinds.get('gpu', 0)} whole GPU(s)" if kinds.get("gpu") else "",
             f"{kinds.get('mig', 0)} MIG device(s)" if kinds.get("mig") else ""]
    published = " and ".join(p for p in parts if p) or "no GPU device"
    taken = sum(1 for d in devices if d.get("name") in held_names)
    return f"{published} published by the DRA driver; {taken} held by claims"


def _hami_now(gpus: list[Mapping[str, Any]], shares: Mapping[str, float]) -> str:
    """Each registered GPU's free fraction (what its running tenants leave), oversubscribed ones said so."""
    parts = []
    for i, g in enumerate(gpus):
        uuid = str(g.get("uuid") or "")
        used = float(shares.get(uuid, 0.0))
        label = f"GPU {i}"
        if used > 1.0 + 1e-9:
            parts.append(f"{label} oversubscribed ({used:.0%} asked)")
        elif used > 0:
            parts.append(f"{label} {1.0 - used:.0%} free")
        else:
            parts.append(f"{label} free whole")
    return "; ".join(parts) or "no GPU registered"


def node_row(n: Node) -> dict[str, Any]:
    mode = str(node_mode(n.sharing))
    if mode == "dra":
        now = _dra_now(list(n.dra_devices or []), list(n.dra_held or []))
    elif mode == "hami":
        now = _hami_now(list(n.hami_gpus or []), dict(n.hami_shares or {}))
    else:
        now = SHARING_NOTES.get(n.sharing, "")
    state = "NotReady" if not n.ready else "cordoned" if n.unschedulable else "Ready"
    return {"node": n.name, "node_group": f"{n.cluster.name} / {n.node_group.name}", "gpu_model": n.gpu_model,
            "physical_gpus": n.physical_gpus, "mode": MODE_LABELS.get(mode, mode), "state": state, "now": now}


def nodes_block(scope: Scope) -> Block:
    """Every GPU node in scope (the clusters the caller sees, narrowed by `?cluster=`), as last observed."""
    clusters = set(scope.filters.get("cluster", ())) or None
    rows = [node_row(n) for n in gpu_nodes(visible_teams=teams_in_scope(scope), clusters=clusters)]
    modes = Counter(r["mode"] for r in rows)
    title = (f"{len(rows):,} GPU nodes: " + ", ".join(f"{count:,} {mode}" for mode, count in sorted(modes.items()))
             if rows else "GPU nodes")
    return Block("nodes", title, NODE_COLUMNS, rows, open=True, term="allocation-mode",
                 empty="No GPU node collected yet.",
                 note="As last observed. DRA: the devices NVIDIA's DRA driver publishes and the ones claims hold "
                      "(a GPU with a MIG device held is not free whole). HAMi: what each GPU's tenants leave free "
                      "(a GPU with any tenant is not free for a whole-GPU job).")


def group_modes(block: Block) -> dict[str, str]:
    """`cluster / node group` -> how its nodes hand their GPUs out ("DRA claim", "Device plugin, MIG")."""
    modes: dict[str, set[str]] = {}
    for r in block.rows:
        modes.setdefault(r["node_group"], set()).add(r["mode"])
    order = list(MODE_LABELS.values())
    return {g: ", ".join(sorted(m, key=lambda x: order.index(x) if x in order else len(order))) for g, m in
            modes.items()}
