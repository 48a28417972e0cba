"""The pure bucket arithmetic (apps/usage/ledger.py) against hand-computed ledger.md examples."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from apps.inventory.gpus import GpuNode
from apps.usage.activity import SIGNALS
from apps.usage.ledger import BucketInputs, NodeFact, PodFact, SeriesFact, compute_bucket

H = datetime(2026, 11, 23, 10, tzinfo=UTC)


def node(name="n1", gpus=8, sharing="none", replicas=None, price=Decimal("2.00"), unavailable=False, slices=7):
    gpu = GpuNode("NVIDIA-H100-80GB-HBM3", gpus, sharing, slices, replicas=replicas or {})
    return NodeFact(name, "pool", gpu, 3600.0, unavailable, price)


def pod(name, requests, held=3600.0, node_name="n1", team="vision"):
    return PodFact(f"uid-{name}", "ns", name, node_name, team, requests, held)


def series(pod_name, uuid, value, gi="", profile=""):
    return SeriesFact("ns", pod_name, uuid, gi, profile, dict.fromkeys(SIGNALS, value))


def test_it_splits_allocated_into_working_idle_and_unmeasured():
    inputs = BucketInputs(
        H,
        3600,
        [node()],
        [pod("train", {"nvidia.com/gpu": 4})],
        [series("train", "GPU-a", 0.5), series("train", "GPU-b", 0.25), series("train", "GPU-c", 1.0)],
    )
    row = compute_bucket(inputs).pods[0]
    assert row.allocated == pytest.approx(4.0)
    assert row.working["sm_active"] == pytest.approx(1.75)
    assert row.unmeasured["sm_active"] == pytest.approx(1.0)  # the fourth GPU has no series
    assert row.idle["sm_active"] == pytest.approx(1.25)
    assert row.allocated == pytest.approx(
        row.working["sm_active"] + row.idle["sm_active"] + row.unmeasured["sm_active"]
    )


def test_it_counts_partial_hours_and_node_capacity():
    result = compute_bucket(BucketInputs(H, 3600, [node(gpus=8)], [pod("a", {"nvidia.com/gpu": 2}, held=1800)], []))
    assert result.pods[0].allocated == pytest.approx(1.0)
    n = result.nodes[0]
    assert (n.capacity, n.allocated, n.unallocated) == pytest.approx((8.0, 1.0, 7.0))


def test_it_shares_time_sliced_gpus_by_replicas():
    ts = node(gpus=2, sharing="time-slicing", replicas={"nvidia.com/gpu": 4.0})
    result = compute_bucket(
        BucketInputs(
            H,
            3600,
            [ts],
            [pod("a", {"nvidia.com/gpu": 1}), pod("b", {"nvidia.com/gpu": 1})],
            [series("a", "GPU-x", 0.8), series("b", "GPU-x", 0.8)],
        )
    )
    a, b = result.pods
    assert a.allocated == pytest.approx(0.25)
    # Every tenant's series repeats the device value; each tenant gets its share of it, never the sum.
    assert a.working["sm_active"] == pytest.approx(0.2)
    assert b.working["sm_active"] == pytest.approx(0.2)


def test_it_measures_every_replica_a_pod_holds_on_a_shared_gpu():
    """dcgm-exporter's default mode emits one series per physical GPU and pod: it measures all of the pod's
    replicas on that GPU; with --kubernetes-virtual-gpus one series per replica (label vgpu) gives the same."""
    ts = node(gpus=2, sharing="time-slicing", replicas={"nvidia.com/gpu": 4.0})
    two = pod("two", {"nvidia.com/gpu": 2})
    per_gpu = compute_bucket(BucketInputs(H, 3600, [ts], [two], [series("two", "GPU-x", 0.6)])).pods[0]
    vgpu = [
        SeriesFact("ns", "two", "GPU-x", "", "", dict.fromkeys(SIGNALS, 0.6), replica=r) for r in ("0", "1")
    ]
    per_replica = compute_bucket(BucketInputs(H, 3600, [ts], [two], vgpu)).pods[0]
    for row in (per_gpu, per_replica):
        assert row.allocated == pytest.approx(0.5)
        assert row.unmeasured["sm_active"] == 0
        assert row.working["sm_active"] == pytest.approx(0.5 * 0.6)
    # Replicas on two different GPUs: each measured by its own GPU's series.
    spread = [series("two", "GPU-x", 0.2), series("two", "GPU-y", 1.0)]
    row = compute_bucket(BucketInputs(H, 3600, [ts], [two], spread)).pods[0]
    assert row.working["sm_active"] == pytest.approx(0.25 * 0.2 + 0.25 * 1.0)


def test_it_weights_mig_slices_by_compute_slices():
    result = compute_bucket(
        BucketInputs(
            H,
            3600,
            [node()],
            [pod("m", {"nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 1})],
            [
                series("m", "GPU-p", 0.7, gi="1", profile="3g.40gb"),
                series("m", "GPU-p", 0.1, gi="9", profile="1g.10gb"),
            ],
        )
    )
    row = result.pods[0]
    assert row.allocated == pytest.approx(4 / 7)
    assert row.working["sm_active"] == pytest.approx(3 / 7 * 0.7 + 1 / 7 * 0.1)


def test_it_reports_unknown_resources_and_never_counts_them():
    result = compute_bucket(
        BucketInputs(H, 3600, [node()], [pod("x", {"nvidia.com/weird": 3, "nvidia.com/gpu": 1})], [])
    )
    assert result.pods[0].allocated == pytest.approx(1.0)
    assert any("unknown resource nvidia.com/weird" in w for w in result.warnings)


def test_it_treats_garbage_values_as_unmeasured():
    bad = [
        SeriesFact("ns", "g", "GPU-1", "", "", {s: float("nan") for s in SIGNALS}),
        SeriesFact("ns", "g", "GPU-2", "", "", dict.fromkeys(SIGNALS, 7.5)),
    ]
    row = compute_bucket(BucketInputs(H, 3600, [node()], [pod("g", {"nvidia.com/gpu": 2})], bad)).pods[0]
    assert row.working["sm_active"] == 0
    assert row.unmeasured["sm_active"] == pytest.approx(2.0)


def test_it_flags_overallocated_nodes_instead_of_clamping_silently():
    result = compute_bucket(BucketInputs(H, 3600, [node(gpus=1)], [pod("a", {"nvidia.com/gpu": 2})], []))
    assert result.inconsistent
    assert result.nodes[0].inconsistent


def test_it_counts_unavailable_nodes_in_capacity():
    result = compute_bucket(BucketInputs(H, 3600, [node(gpus=4, unavailable=True)], [], []))
    assert result.nodes[0].capacity == pytest.approx(4.0)
    assert result.nodes[0].unavailable == pytest.approx(4.0)
