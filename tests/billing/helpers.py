"""Nodes and ledger hours for the billing tests, written through the product's own write paths."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from apps.inventory import services as inventory
from apps.inventory.gpus import GpuNode
from apps.inventory.models import Cluster
from apps.inventory.observations import NodeInfo
from apps.usage import services as ledger
from apps.usage.ledger import BucketInputs, NodeFact, PodFact, compute_bucket

H100 = "NVIDIA-H100-80GB-HBM3"


@dataclass(frozen=True)
class N:
    """A GPU node of a test: name, providerID, GPUs, node-pool labels."""

    name: str
    provider_id: str
    gpus: int = 8
    labels: tuple[tuple[str, str], ...] = ()
    group: str = "gpu"


def sync_nodes(cluster: Cluster, nodes: Sequence[N], seen_at: datetime) -> None:
    infos = [
        NodeInfo(n.name, {"nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": str(n.gpus), **dict(n.labels)},
                 {"nvidia.com/gpu": str(n.gpus)}, {"nvidia.com/gpu": str(n.gpus)}, True, False, None,
                 provider_id=n.provider_id)
        for n in nodes
    ]
    inventory.nodes_sync(cluster, infos, seen_at)


def write_hour(cluster: Cluster, hour: datetime, nodes: Sequence[N], *, price: str = "2.50",
               pods: Sequence[tuple[str, str, str, int]] = ()) -> None:
    """One final ledger hour: `nodes` there the whole hour at `price`, `pods` (uid, team, node, GPUs) held all of it."""
    facts = [NodeFact(n.name, n.group, GpuNode(H100, n.gpus, "none", 7), 3600.0, False, Decimal(price)) for n in nodes]
    pod_facts = [PodFact(uid, "ns-" + team, uid, node, team, {"nvidia.com/gpu": gpus}, 3600.0)
                 for uid, team, node, gpus in pods]
    result = compute_bucket(BucketInputs(hour, 3600, facts, pod_facts, []))
    assert ledger.claim_bucket(cluster, hour, "test")
    ledger.write_bucket(cluster, hour, result, owner="test", covered_until=hour + timedelta(hours=1))
