"""Every node shape through the three paths that turn GPUs into numbers: the ledger (usage.ledger.compute_bucket),
capacity (capacity.fragmentation's node slots and groups, capacity.pending.unit_share behind GPU-hours waited) and
findings (findings.rules: a pod's GPU-hours per device, unattributed activity's share). All must see the same
physical GPUs and give one unit of the requested resource the same share of a GPU, because all of them ask
apps.inventory.gpus. Pure: no database, no services."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.capacity.fragmentation import cluster_fragmentation, node_slots
from apps.capacity.pending import unit_share
from apps.findings import rules
from apps.inventory import gpus
from apps.inventory.observations import NodeInfo
from apps.usage.ledger import BucketInputs, NodeFact, PodFact, SeriesFact, compute_bucket
from apps.usage.sources import DeviceActivity
from tests.fixtures import gfd_labels as real

HOUR = datetime(2026, 11, 23, 10, tzinfo=UTC)
POOL = "karpenter.sh/nodepool"


def _labels(product: str, **extra: str) -> dict[str, str]:
    """GFD labels: `product` plus keyword labels, `__` read as `.` and `_` as `-` (gpu__sharing_strategy)."""
    return {gpus.LABEL_PRODUCT: product, **{"nvidia.com/" + k.replace("__", ".").replace("_", "-"): v
                                            for k, v in extra.items()}}


# (case, labels, capacity, requested resource, units asked, physical GPUs, share of a GPU per unit)
SHAPES = [
    ("whole GPUs: 8 x H100", _labels("NVIDIA-H100-80GB-HBM3", gpu__count="8"), {"nvidia.com/gpu": "8"},
     "nvidia.com/gpu", 2, 8, 1.0),
    ("time-sliced, R=4: 2 x L4 as nvidia.com/gpu",
     _labels("NVIDIA-L4", gpu__count="2", gpu__replicas="4", gpu__sharing_strategy="time-slicing"),
     {"nvidia.com/gpu": "8"}, "nvidia.com/gpu", 3, 2, 1 / 4),
    ("time-sliced, R=4: 2 x L4 as nvidia.com/gpu.shared, no count label",
     _labels("NVIDIA-L4", gpu__replicas="4"), {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "8"},
     "nvidia.com/gpu.shared", 1, 2, 1 / 4),
    ("time-sliced with renameByDefault false: -SHARED product, R=4",
     _labels("NVIDIA-L4-SHARED", gpu__count="4", gpu__replicas="4", gpu__sharing_strategy="time-slicing"),
     {"nvidia.com/gpu": "16"}, "nvidia.com/gpu", 4, 4, 1 / 4),
    ("MPS, R=2: 2 x H100", _labels("NVIDIA-H100-80GB-HBM3", gpu__count="2", gpu__replicas="2",
                                   gpu__sharing_strategy="mps"),
     {"nvidia.com/gpu": "4"}, "nvidia.com/gpu", 1, 2, 1 / 2),
    ("MIG mixed on H100 (real all-balanced layout)", real.H100_MIG_MIXED, real.H100_MIG_MIXED_CAPACITY,
     "nvidia.com/mig-3g.40gb", 1, 1, 3 / 7),
    ("MIG mixed on A100: 8 GPUs, 56 x 1g.10gb", _labels("NVIDIA-A100-SXM4-80GB", gpu__count="8", mig__strategy="mixed"),
     {"nvidia.com/mig-1g.10gb": "56"}, "nvidia.com/mig-1g.10gb", 2, 8, 1 / 7),
    ("MIG mixed on A30: 4 GPUs, 16 x 1g.6gb (4 compute slices)",
     _labels("NVIDIA-A30", gpu__count="4", mig__strategy="mixed"), {"nvidia.com/mig-1g.6gb": "16"},
     "nvidia.com/mig-1g.6gb", 1, 4, 1 / 4),
    ("MIG mixed on A30, no count label: 2g.12gb", _labels("NVIDIA-A30", mig__strategy="mixed"),
     {"nvidia.com/mig-2g.12gb": "4"}, "nvidia.com/mig-2g.12gb", 2, 2, 2 / 4),
    ("MIG single on H100, all-1g.10gb: gpu.count counts 7 devices",
     _labels("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", gpu__count="7", mig__strategy="single"), {"nvidia.com/gpu": "7"},
     "nvidia.com/gpu", 1, 1, 1 / 7),
    ("MIG single on A100-PCIE-40GB, all-1g.5gb (real)", real.A100_PCIE_MIG_SINGLE, real.A100_PCIE_MIG_SINGLE_CAPACITY,
     "nvidia.com/gpu", 3, 1, 1 / 7),
    ("mig.strategy=single with mig.config=all-disabled (real H100): a whole GPU", real.H100_MIG_DISABLED,
     {"nvidia.com/gpu": "1"}, "nvidia.com/gpu", 1, 1, 1.0),
]  # fmt: skip


def _ledger(labels, capacity, resource, units):
    """compute_bucket for one node and one pod holding `units` of `resource` the whole hour, each unit measured
    by a series of its own (a MIG instance, a GPU, or a replica with `--kubernetes-virtual-gpus`)."""
    gpu = gpus.classify_node(labels, capacity)
    node = NodeFact("n", "pool", gpu, present_seconds=3600.0, unavailable=False, price=None)
    pod = PodFact("uid", "ml", "p", "n", "team", {resource: float(units)}, held_seconds=3600.0)
    kind = gpu.unit_kind(resource)
    series = [
        SeriesFact("ml", "p", f"GPU-{i}" if kind == gpus.UNIT_GPU else "GPU-0",
                   str(i) if kind.startswith(gpus.UNIT_MIG_PREFIX) else "",
                   kind.removeprefix(gpus.UNIT_MIG_PREFIX) if kind.startswith(gpus.UNIT_MIG_PREFIX) else "",
                   {"sm_active": 0.5}, replica=str(i) if kind == gpus.UNIT_REPLICA else "")
        for i in range(units)
    ]  # fmt: skip
    return gpu, node, series, compute_bucket(BucketInputs(HOUR, 3600.0, [node], [pod], series))


@pytest.mark.parametrize(("case", "labels", "capacity", "resource", "units", "physical", "share"), SHAPES,
                         ids=[s[0] for s in SHAPES])
def test_the_ledger_capacity_and_findings_see_the_same_gpus(case, labels, capacity, resource, units, physical,
                                                            share):
    gpu, node, series, bucket = _ledger(labels, capacity, resource, units)
    info = NodeInfo("n", {**labels, POOL: "pool"}, capacity, capacity, True, False, HOUR)
    slots = node_slots([info], [], [POOL])
    (slot,) = [s for s in slots if s.resource == resource]
    (group,) = cluster_fragmentation([info], [], [POOL])

    # Physical GPUs: the ledger's capacity (one hour), fragmentation's node slot and node group.
    (node_row,) = bucket.nodes
    assert (node_row.capacity, slot.physical_gpus, group.physical_gpus) == (physical, physical, physical)

    # Share of one unit: the ledger's pod row, the node slot, GPU-hours waited, findings' GPU-hours per device.
    (pod_row,) = bucket.pods
    devices = rules.pod_devices(rules.pods_from_result(bucket, "sm_active"), series)["uid"]
    per_device = [hours for _series, hours in devices]
    assert pod_row.gpus / units == pytest.approx(share)
    assert slot.share == pytest.approx(share)
    assert unit_share(resource, slots) == pytest.approx(share)
    assert per_device == pytest.approx([share] * units)

    # Findings' unattributed activity: a MIG instance is its share of a GPU, any other device one GPU.
    mig = gpu.unit_kind(resource).startswith(gpus.UNIT_MIG_PREFIX)
    idle_devices = (
        [DeviceActivity("n", "GPU-0", "9", series[0].profile, 0.5)] if mig
        else [DeviceActivity("n", f"GPU-{i}", "", "", 0.5) for i in range(physical)]
    )  # fmt: skip
    found = rules.unattributed(idle_devices, [], [], {"n": node}, 3600.0, rules.Params())
    assert sum(float(f.gpu_hours) for f in found) == pytest.approx(share if mig else physical)
