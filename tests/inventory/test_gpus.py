"""The GPU rules (apps/inventory/gpus/), table-driven over real node label sets and the trap shapes, and
one test that asks the ledger path and the fragmentation path for the same nodes' physical GPUs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.capacity.fragmentation import cluster_fragmentation, node_slots
from apps.inventory import gpus
from apps.inventory.models import Cluster
from apps.inventory.observations import ContainerRequest, NodeInfo
from apps.inventory.services import nodes_sync
from apps.usage.inputs import node_facts
from tests.fixtures import gfd_labels as real


def _labels(product: str, **extra: str) -> dict[str, str]:
    return {"nvidia.com/gpu.product": product, **{k.replace("__", ".").replace("_", "-"): v for k, v in extra.items()}}


# (case, labels, capacity, physical GPUs, sharing, GPU model)
SHAPES = [
    (
        "A100, MIG single, gpu.count=56 (MIG devices)",
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "nvidia.com/gpu.count": "56",
         "nvidia.com/mig.strategy": "single"},
        {"nvidia.com/gpu": "56"}, 8, gpus.MIG_SINGLE, "NVIDIA-A100-SXM4-80GB",
    ),
    (
        "A100, MIG single 2g.20gb (3 per GPU), gpu.count=24",
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-2g.20gb", "nvidia.com/gpu.count": "24",
         "nvidia.com/mig.strategy": "single"},
        {"nvidia.com/gpu": "24"}, 8, gpus.MIG_SINGLE, "NVIDIA-A100-SXM4-80GB",
    ),
    (
        "H100, MIG single all-1g.10gb, gpu.count=7",
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "nvidia.com/gpu.count": "7",
         "nvidia.com/mig.strategy": "single"},
        {"nvidia.com/gpu": "7"}, 1, gpus.MIG_SINGLE, "NVIDIA-H100-80GB-HBM3",
    ),
    (
        "4 x A30 with 16 mig-1g instances, no count label",
        {"nvidia.com/gpu.product": "NVIDIA-A30", "nvidia.com/mig.strategy": "mixed"},
        {"nvidia.com/mig-1g.6gb": "16"}, 4, gpus.MIG_MIXED, "NVIDIA-A30",
    ),
    (
        "real H100, MIG mixed all-balanced, nvidia.com/gpu: 0 beside MIG resources",
        real.H100_MIG_MIXED, real.H100_MIG_MIXED_CAPACITY, 1, gpus.MIG_MIXED, "NVIDIA-H100-80GB-HBM3",
    ),
    (
        "real H100, mig.strategy=single with mig.config=all-disabled: whole GPU",
        real.H100_MIG_DISABLED, {"nvidia.com/gpu": "1"}, 1, gpus.WHOLE, "NVIDIA-H100-80GB-HBM3",
    ),
    (
        "L4 time-sliced, renameByDefault false (-SHARED product)",
        {"nvidia.com/gpu.product": "NVIDIA-L4-SHARED", "nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "4",
         "nvidia.com/gpu.sharing-strategy": "time-slicing"},
        {"nvidia.com/gpu": "16"}, 4, gpus.TIME_SLICING, "NVIDIA-L4",
    ),
    (
        "L4 time-sliced as nvidia.com/gpu.shared, no count label",
        {"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.replicas": "4"},
        {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "8"}, 2, gpus.TIME_SLICING, "NVIDIA-L4",
    ),
    (
        "no GFD labels, 8 whole GPUs in capacity",
        {}, {"nvidia.com/gpu": "8"}, 8, gpus.WHOLE, "",
    ),
    (
        "device plugin not registered: GFD count, nothing allocatable",
        {"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "2"}, {}, 2, gpus.WHOLE, "NVIDIA-L4",
    ),
    (
        "real A100-PCIE-40GB, MIG single all-1g.5gb: 7 devices of one GPU, no NVIDIA- prefix",
        real.A100_PCIE_MIG_SINGLE, real.A100_PCIE_MIG_SINGLE_CAPACITY, 1, gpus.MIG_SINGLE, "A100-PCIE-40GB",
    ),
    (
        "real H100 NVL, MIG single all-1g.12gb, no count label: 7 devices in capacity",
        real.H100_NVL_MIG_SINGLE, {"nvidia.com/gpu": "7"}, 1, gpus.MIG_SINGLE, "NVIDIA-H100-NVL",
    ),
    (
        "real H100 XE9680, 8 GPUs, gpu.replicas=1 (not shared)",
        real.H100_XE9680, {"nvidia.com/gpu": "8"}, 8, gpus.WHOLE, "NVIDIA-H100-80GB-HBM3",
    ),
    (
        "real 4 x L40 excerpt: a count and no product",
        real.L40, {"nvidia.com/gpu": "4"}, 4, gpus.WHOLE, "",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "labels", "capacity", "physical", "sharing", "model"), SHAPES, ids=[s[0] for s in SHAPES]
)
def test_it_classifies_real_and_trap_node_shapes(case, labels, capacity, physical, sharing, model):
    node = gpus.classify_node(labels, capacity)
    assert (node.physical_gpus, node.sharing, node.gpu_model) == (physical, sharing, model)


@pytest.mark.parametrize(
    ("labels", "capacity", "resource", "share", "unit"),
    [
        ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu": "8"}, "nvidia.com/gpu", 1.0, "gpu"),
        (SHAPES[4][1], SHAPES[4][2], "nvidia.com/mig-3g.40gb", 3 / 7, "mig-3g.40gb"),
        (SHAPES[3][1], SHAPES[3][2], "nvidia.com/mig-1g.6gb", 1 / 4, "mig-1g.6gb"),
        (SHAPES[1][1], SHAPES[1][2], "nvidia.com/gpu", 2 / 7, "mig-2g.20gb"),
        (SHAPES[6][1], SHAPES[6][2], "nvidia.com/gpu", 1 / 4, "replica"),
        (SHAPES[7][1], SHAPES[7][2], "nvidia.com/gpu.shared", 1 / 4, "replica"),
        (real.A100_PCIE_MIG_SINGLE, real.A100_PCIE_MIG_SINGLE_CAPACITY, "nvidia.com/gpu", 1 / 7, "mig-1g.5gb"),
        (real.H100_XE9680, {"nvidia.com/gpu": "8"}, "nvidia.com/gpu", 1.0, "gpu"),
    ],
)
def test_it_gives_each_unit_its_share_and_kind(labels, capacity, resource, share, unit):
    node = gpus.classify_node(labels, capacity)
    assert node.unit_share(resource) == pytest.approx(share)
    assert node.unit_kind(resource) == unit


def test_it_knows_no_share_for_resources_that_are_not_gpus():
    node = gpus.classify_node({}, {"nvidia.com/gpu": "8"})
    assert node.unit_share("nvidia.com/weird") is None
    assert gpus.UNKNOWN_NODE.unit_share("nvidia.com/mig-1g.10gb") == pytest.approx(1 / 7)


def test_it_weights_mig_by_memory_only_when_asked():
    node = gpus.classify_node(SHAPES[4][1], SHAPES[4][2])
    assert node.unit_share("nvidia.com/mig-1g.10gb") == pytest.approx(1 / 7)
    assert node.unit_share("nvidia.com/mig-1g.10gb", by_memory=True) == pytest.approx(9984 / 81559)


def test_it_strips_product_suffixes_for_the_gpu_model():
    assert gpus.gpu_model("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb") == "NVIDIA-H100-80GB-HBM3"
    assert gpus.gpu_model("NVIDIA-L4-SHARED") == "NVIDIA-L4"
    assert gpus.gpu_model("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED") == "NVIDIA-A100-SXM4-80GB"
    assert gpus.gpu_model("Tesla-T4") == "Tesla-T4"


def test_it_names_node_groups_by_pool_label_else_gpu_model():
    pools = ["karpenter.sh/nodepool", "cloud.google.com/gke-nodepool"]
    assert gpus.node_group({"cloud.google.com/gke-nodepool": "a100-pool"}, "NVIDIA-A100", pools) == "a100-pool"
    assert gpus.node_group({"karpenter.sh/nodepool": "p", "cloud.google.com/gke-nodepool": "q"}, "m", pools) == "p"
    assert gpus.node_group({}, "NVIDIA-L4", pools) == "NVIDIA-L4"


def test_it_tells_zero_allocatable_from_a_mig_node_with_gpu_zero():
    assert gpus.is_zero_allocatable({"nvidia.com/gpu": "0"})
    assert gpus.is_zero_allocatable({})
    assert not gpus.is_zero_allocatable({"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "2"})


def test_it_applies_the_schedulers_effective_request_rule():
    def c(kind, n):
        return ContainerRequest("c", kind, {"nvidia.com/gpu": n})

    assert gpus.effective_request([c("app", 1), c("app", 1), c("init", 4)]) == {"nvidia.com/gpu": 4}
    assert gpus.effective_request([c("app", 2), c("sidecar", 1), c("init", 2)]) == {"nvidia.com/gpu": 3}
    assert gpus.device_request([c("app", 1), ContainerRequest("x", "app", {"nvidia.com/weird": 2})]) == {
        "nvidia.com/gpu": 1
    }


@pytest.mark.django_db
def test_the_ledger_and_fragmentation_count_the_same_physical_gpus_for_every_shape():
    """One node per shape through both paths: the ledger's node facts and fragmentation's node slots."""
    cluster = Cluster.objects.create(name="shapes")
    now = datetime(2026, 11, 23, 12, tzinfo=UTC)
    nodes = [
        NodeInfo(f"node-{i}", {**labels, "karpenter.sh/nodepool": f"pool-{i}"}, capacity, capacity, True, False,
                 now - timedelta(days=1))
        for i, (_, labels, capacity, *_rest) in enumerate(SHAPES)
    ]  # fmt: skip
    nodes_sync(cluster, nodes, now)
    ledger = {f.name: f.physical_gpus for f in node_facts(cluster, now - timedelta(hours=1), now, [])}
    slots = {s.node: s.physical_gpus for s in node_slots(nodes, [], ["karpenter.sh/nodepool"])}
    groups = {g.node_group: g.physical_gpus for g in cluster_fragmentation(nodes, [], ["karpenter.sh/nodepool"])}
    expected = {f"node-{i}": shape[3] for i, shape in enumerate(SHAPES)}
    assert ledger == expected
    assert slots == expected
    assert groups == {f"pool-{i}": shape[3] for i, shape in enumerate(SHAPES)}
