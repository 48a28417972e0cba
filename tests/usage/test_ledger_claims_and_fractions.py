"""The bucket arithmetic for GPUs held through DRA claims and HAMi fractions (apps/usage/ledger.py with
holding.py), against the hand-computed examples of docs/numbers.md "GPUs handed out by claims (DRA) and by
fractions (HAMi)"."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from apps.inventory.gpus import DRA_CLAIMS, HAMI_FRACTIONS, GpuNode
from apps.inventory.gpus.holds import Hold
from apps.inventory.gpus.vocabulary import AllocationMode
from apps.usage.activity import SIGNALS
from apps.usage.ledger import BucketInputs, ClaimFact, NodeFact, PodFact, SeriesFact, compute_bucket

H = datetime(2026, 11, 23, 10, tzinfo=UTC)
GPU = "GPU-11111111-2222-3333-4444-555555555555"
MIG = "MIG-aaaaaaaa-2222-3333-4444-555555555555"


def node(name: str, sharing: str, gpus: int = 8) -> NodeFact:
    return NodeFact(name, "pool", GpuNode("NVIDIA-H100-80GB-HBM3", gpus, sharing, 7), 3600.0, False, Decimal("2"))


def dra_hold(claim: str = "c1", device: str = GPU, share: float = 1.0, profile: str = "") -> Hold:
    kind = f"mig-{profile}" if profile else "gpu"
    return Hold(AllocationMode.DRA, kind, share, GPU, device, "NVIDIA-H100-80GB-HBM3", profile, f"uid-{claim}", claim)


def hami_hold(share: float) -> Hold:
    return Hold(AllocationMode.HAMI, "fraction", share, GPU, GPU, "NVIDIA-H100-80GB-HBM3")


def pod(name: str, holds: tuple[Hold, ...], span: tuple[float, float], team: str, node_name: str = "dra-0",
        mode: str = "dra") -> PodFact:
    return PodFact(f"uid-{name}", "ns", name, node_name, team, {}, span[1] - span[0], holds=holds, span=span,
                   allocation_mode=mode)


def test_a_claim_shared_by_two_teams_pods_is_split_while_they_overlap():
    # numbers.md: A runs :00-:30, B :20-:60 on one shared whole GPU: A 25 min, B 35 min, together 1 GPU-hour.
    a = pod("a", (dra_hold(),), (0.0, 1800.0), "team-a")
    b = pod("b", (dra_hold(),), (1200.0, 3600.0), "team-b")
    series = [SeriesFact("ns", "a", GPU, "", "", dict.fromkeys(SIGNALS, 0.5))]
    result = compute_bucket(BucketInputs(H, 3600, [node("dra-0", DRA_CLAIMS)], [a, b], series))
    rows = {r.fact.name: r for r in result.pods}
    assert rows["a"].allocated == pytest.approx(25 / 60)
    assert rows["b"].allocated == pytest.approx(35 / 60)
    assert rows["a"].working["sm_active"] == pytest.approx(25 / 60 * 0.5)
    assert rows["b"].unmeasured["sm_active"] == pytest.approx(35 / 60)  # no series names b
    assert result.nodes[0].allocated == pytest.approx(1.0)
    assert result.unattributed_dra_nodes == set()
    assert {r.allocation_mode for r in result.pods} == {"dra"}


def test_a_claim_allocated_with_no_consumer_holds_its_devices_as_the_claims_idle_hours():
    # Two GPUs; the consumer runs the first 40 minutes; the claim stays allocated to :50.
    holds = (dra_hold("pair", "GPU-0"), dra_hold("pair", "GPU-1"))
    holds = tuple(Hold(h.mode, h.kind, h.share, h.device_uuid, h.device_uuid, h.gpu_model, "", h.claim_uid,
                       h.claim_name) for h in holds)
    consumer = pod("test", holds, (0.0, 2400.0), "platform")
    claim = ClaimFact("uid-pair", "ns", "pair", "dra-0", "platform", holds, ((0.0, 3000.0),))
    result = compute_bucket(BucketInputs(H, 3600, [node("dra-0", DRA_CLAIMS)], [consumer], [], claims=[claim]))
    rows = {r.fact.workload or r.fact.name: r for r in result.pods}
    idle = rows["ResourceClaim/pair"]
    assert idle.fact.name == "" and idle.fact.team == "platform" and idle.allocation_mode == "dra"
    assert idle.allocated == pytest.approx(2 * 10 / 60)
    assert idle.idle == pytest.approx(dict.fromkeys(SIGNALS, 2 * 10 / 60))
    assert idle.gpus == pytest.approx(2.0) and idle.fact.held_seconds == pytest.approx(600.0)
    assert result.nodes[0].allocated == pytest.approx(2 * 40 / 60 + 2 * 10 / 60)
    # No DRA series names the consumer: the node is reported as without DRA attribution.
    assert result.unattributed_dra_nodes == {"dra-0"}


def test_a_mig_device_of_a_claim_is_matched_by_its_own_uuid():
    hold = dra_hold("mig", MIG, 3 / 7, "3g.40gb")
    p = pod("infer", (hold,), (0.0, 3600.0), "serving")
    series = [SeriesFact("ns", "infer", GPU, "2", "3g.40gb", dict.fromkeys(SIGNALS, 0.9), device_uuid="MIG-other"),
              SeriesFact("ns", "infer", GPU, "1", "3g.40gb", dict.fromkeys(SIGNALS, 0.3), device_uuid=MIG)]
    row = compute_bucket(BucketInputs(H, 3600, [node("dra-0", DRA_CLAIMS)], [p], series)).pods[0]
    assert row.allocated == pytest.approx(3 / 7)
    assert row.working["sm_active"] == pytest.approx(3 / 7 * 0.3)


def test_three_tenants_at_half_a_gpu_are_scaled_while_all_three_run():
    # numbers.md: a and b all hour, c the second half: a, b 0.25 + 0.167 each, c 0.167; the GPU exactly 1.
    a = pod("a", (hami_hold(0.5),), (0.0, 3600.0), "t", "hami-0", "hami")
    b = pod("b", (hami_hold(0.5),), (0.0, 3600.0), "t", "hami-0", "hami")
    c = pod("c", (hami_hold(0.5),), (1800.0, 3600.0), "t", "hami-0", "hami")
    values = {(p.uid, GPU): dict.fromkeys(SIGNALS, 0.6) for p in (a, b)}
    result = compute_bucket(BucketInputs(H, 3600, [node("hami-0", HAMI_FRACTIONS, 2)], [a, b, c], [],
                                         gpu_values=values))
    rows = {r.fact.name: r for r in result.pods}
    assert rows["a"].allocated == pytest.approx(0.25 + 1 / 6)
    assert rows["c"].allocated == pytest.approx(1 / 6)
    assert sum(r.allocated for r in result.pods) == pytest.approx(1.0)
    assert rows["a"].working["sm_active"] == pytest.approx((0.25 + 1 / 6) * 0.6)  # share x the GPU's value
    assert rows["c"].unmeasured["sm_active"] == pytest.approx(1 / 6)  # no value for its GPU: unmeasured
    assert result.oversubscribed == {("hami-0", GPU): (pytest.approx(1800.0), pytest.approx(1.5))}
    assert result.warnings == []


def test_device_plugin_requests_on_a_dra_node_are_not_counted_beside_the_claim():
    p = PodFact("uid-x", "ns", "x", "dra-0", "t", {"nvidia.com/gpu": 1}, 3600.0, holds=(dra_hold(),),
                span=(0.0, 3600.0), allocation_mode="dra")
    result = compute_bucket(BucketInputs(H, 3600, [node("dra-0", DRA_CLAIMS)], [p], []))
    assert result.pods[0].allocated == pytest.approx(1.0)
    assert result.warnings == []
