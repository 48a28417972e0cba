"""Writes and rules for the inventory: node classification, node groups, teams, prices."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction

from apps.inventory.models import Cluster, GpuPrice, NamespaceTeam, Node, NodeGroup, Team

if TYPE_CHECKING:  # the collector's plain data; inventory never imports ingest at run time
    from apps.ingest.collectors.types import NodeInfo

_MIG_SUFFIX = re.compile(r"-MIG-(\d+)g\.[0-9a-z.]+$", re.IGNORECASE)


@dataclass(frozen=True)
class NodeClass:
    """What the ledger needs to know about a node's GPUs."""

    gpu_model: str
    physical_gpus: int
    sharing: str
    replicas: dict[str, float]
    compute_slices: int
    mig_single_slices: int
    mig_memory_fraction: dict[str, float]


def _int(value: object, default: int = 0) -> int:
    try:
        return int(float(str(value)))
    except (TypeError, ValueError):
        return default


def compute_slices_for(model: str) -> int:
    """MIG compute slices: 4 on A30, 7 on A100/H100/H200/B200 (telemetry reference 2.3)."""
    return 4 if "A30" in model.upper() else 7


def node_group_name(labels: dict[str, str], gpu_model: str) -> str:
    """First node-pool label present (GPUFINOPS_NODE_GROUP_LABELS), else the GPU model (ledger.md)."""
    for key in settings.GPUFINOPS_NODE_GROUP_LABELS:
        if labels.get(key):
            return labels[key]
    # The product label as GFD writes it (time-sliced L4s are "NVIDIA-L4-SHARED"): the same rule the
    # capacity snapshots use, so ledger and fragmentation name groups alike.
    return labels.get("nvidia.com/gpu.product") or gpu_model or "unknown"


def classify_node(labels: dict[str, str], capacity: dict[str, float]) -> NodeClass:
    """Physical GPUs, sharing mode and replicas from GFD labels and capacity (ledger.md "Capacity")."""
    product = labels.get("nvidia.com/gpu.product", "")
    mig_strategy = labels.get("nvidia.com/mig.strategy", "none")
    sharing_label = labels.get("nvidia.com/gpu.sharing-strategy", "none")
    single = _MIG_SUFFIX.search(product)
    model = product.removesuffix("-SHARED")
    mig_single_slices = 0
    if single and mig_strategy == "single":
        mig_single_slices = int(single.group(1))
        model = _MIG_SUFFIX.sub("", model)
    slices = compute_slices_for(model)
    count = _int(labels.get("nvidia.com/gpu.count"), -1)
    sharing = "none"
    if mig_strategy == "mixed" and any(k.startswith("nvidia.com/mig-") for k in capacity):
        sharing = "mig-mixed"
    elif mig_single_slices:
        sharing = "mig-single"
        # Under the single strategy GFD's count is MIG devices; map them back to parents.
        if count >= 0:
            count = max(1, round(count * mig_single_slices / slices)) if count else 0
    elif sharing_label in ("time-slicing", "mps") or capacity.get("nvidia.com/gpu.shared"):
        sharing = sharing_label if sharing_label in ("time-slicing", "mps") else "time-slicing"
    if count < 0:
        count = int(capacity.get("nvidia.com/gpu", 0)) if sharing == "none" else 0
        if sharing == "mig-mixed":
            count = round(sum(_int(k.split("-")[1].split("g")[0]) * v for k, v in capacity.items()
                              if k.startswith("nvidia.com/mig-")) / slices)
    replicas: dict[str, float] = {}
    if sharing in ("time-slicing", "mps"):
        label_replicas = _int(labels.get("nvidia.com/gpu.replicas"), 0)
        for res in ("nvidia.com/gpu", "nvidia.com/gpu.shared"):
            if capacity.get(res) and count:
                replicas[res] = capacity[res] / count
            elif label_replicas:
                replicas[res] = float(label_replicas)
    memory = _int(labels.get("nvidia.com/gpu.memory"), 0)
    mig_mem: dict[str, float] = {}
    if memory:
        for res in capacity:
            if res.startswith("nvidia.com/mig-"):
                mem = _int(labels.get(f"{res}.memory"), 0)
                if mem:
                    mig_mem[res] = mem / memory
    return NodeClass(model, max(count, 0), sharing, replicas, slices, mig_single_slices, mig_mem)


def _float_map(raw: dict[str, str]) -> dict[str, float]:
    out = {}
    for k, v in raw.items():
        try:
            out[k] = float(v)
        except ValueError:
            continue
    return out


NODE_FIELDS = ["node_group", "gpu_model", "physical_gpus", "sharing", "labels", "capacity", "allocatable", "ready",
               "unschedulable", "created", "last_seen", "gone"]


@transaction.atomic
def nodes_sync(cluster: Cluster, nodes: Iterable[NodeInfo], seen_at: datetime) -> list[Node]:
    """Upsert the nodes of one observation; nodes not in it are marked gone (kept for history)."""
    existing = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    groups = {g.name: g for g in NodeGroup.objects.filter(cluster=cluster)}
    seen: list[Node] = []
    to_create: list[Node] = []
    to_update: list[Node] = []
    for info in nodes:
        cls = classify_node(info.labels, _float_map(info.capacity))
        gname = node_group_name(info.labels, cls.gpu_model)
        if gname not in groups:
            groups[gname] = NodeGroup.objects.create(cluster=cluster, name=gname)
        node = existing.get(info.name)
        if node is None:
            node = Node(cluster=cluster, name=info.name, first_seen=seen_at)
            to_create.append(node)
        else:
            to_update.append(node)
        node.node_group = groups[gname]
        node.gpu_model = cls.gpu_model
        node.physical_gpus = cls.physical_gpus
        node.sharing = cls.sharing
        node.labels = info.labels
        node.capacity = info.capacity
        node.allocatable = info.allocatable
        node.ready = info.ready
        node.unschedulable = info.unschedulable
        node.created = info.created
        node.last_seen = seen_at
        node.gone = False
        seen.append(node)
    # Bulk writes: one UPDATE per node was most of an observation's time on a 1,250-node cluster.
    Node.objects.bulk_create(to_create, batch_size=1000)
    Node.objects.bulk_update(to_update, NODE_FIELDS, batch_size=1000)
    names = {n.name for n in seen}
    Node.objects.filter(cluster=cluster, gone=False).exclude(name__in=names).update(gone=True)
    return seen


def team_for(
    pod_labels: dict[str, str],
    namespace_labels: dict[str, str],
    namespace: str,
    mapping: dict[str, str],
) -> str:
    """Pod label, namespace label, explicit mapping, else `unassigned` (ledger.md "Teams")."""
    key = settings.GPUFINOPS_TEAM_LABEL
    return pod_labels.get(key) or namespace_labels.get(key) or mapping.get(namespace) or (
        settings.GPUFINOPS_UNASSIGNED_TEAM
    )


def namespace_mapping(cluster: Cluster) -> dict[str, str]:
    """Namespace -> team from the database; a cluster-specific row wins over a global one."""
    out: dict[str, str] = {}
    for row in NamespaceTeam.objects.filter(cluster__isnull=True).select_related("team"):
        out[row.namespace] = row.team.name
    for row in NamespaceTeam.objects.filter(cluster=cluster).select_related("team"):
        out[row.namespace] = row.team.name
    return out


def ensure_teams(names: Iterable[str]) -> None:
    existing = set(Team.objects.values_list("name", flat=True))
    Team.objects.bulk_create([Team(name=n) for n in sorted(set(names) - existing)], ignore_conflicts=True)


def price_for(cluster: Cluster, gpu_model: str, on: date) -> float | None:
    """USD per physical GPU-hour in force on `on`; a cluster-specific price wins over a global one."""
    qs = GpuPrice.objects.filter(gpu_model=gpu_model, effective_from__lte=on).order_by("-effective_from")
    row = qs.filter(cluster=cluster).first() or qs.filter(cluster__isnull=True).first()
    return float(row.usd_per_gpu_hour) if row else None


def set_price(gpu_model: str, usd: Decimal, effective_from: date, cluster: Cluster | None = None) -> GpuPrice:
    price, _ = GpuPrice.objects.update_or_create(
        gpu_model=gpu_model, cluster=cluster, effective_from=effective_from,
        defaults={"usd_per_gpu_hour": usd},
    )
    return price
