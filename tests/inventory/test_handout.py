"""One snapshot's hand-out (apps/inventory/handout.py): which rule reads each node's GPUs, what each pod holds and
its allocation mode, with tenant-written annotations refused (warned about, never raised, never billed)."""

from __future__ import annotations

from datetime import UTC, datetime

from apps.inventory.gpus import dra as dra_rules
from apps.inventory.gpus.dra_claims import Consumer, claim_devices
from apps.inventory.handout import compute
from apps.inventory.observations import ClaimInfo, ClusterSnapshot, ContainerRequest, DraObjects, NodeInfo, PodInfo

T = datetime(2026, 11, 30, 12, tzinfo=UTC)
GPU0 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
GPU1 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
REGISTER = f"{GPU0},10,23034,100,NVIDIA-NVIDIA L4,0,true:{GPU1},10,23034,100,NVIDIA-NVIDIA L4,0,true:"
H100 = "GPU-11111111-2222-3333-4444-555555555555"
SLICE = {"spec": {"driver": "gpu.nvidia.com", "nodeName": "dra-0", "pool": {"name": "dra-0", "generation": 1},
                  "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": H100},
                                                               "productName": {"string": "NVIDIA H100 80GB HBM3"}}}]}}
CLAIM = {"metadata": {"namespace": "ns", "name": "c", "uid": "uid-c"},
         "status": {"allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "dra-0",
                                                            "device": "gpu-0", "request": "gpu"}]}},
                    "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}]}}


def node(name: str, labels: dict[str, str] | None = None, capacity: dict[str, str] | None = None,
         register: str = "") -> NodeInfo:
    return NodeInfo(name, labels or {}, capacity or {}, capacity or {}, True, False, T, hami_register=register)


def pod(name: str, node_name: str, resources: dict[str, float], annotations: dict[str, str] | None = None,
        claims: tuple[str, ...] = (), served: frozenset[tuple[str, str]] = frozenset()) -> PodInfo:
    return PodInfo(f"uid-{name}", "ns", name, node_name, "Running", {}, annotations or {},
                   (ContainerRequest("main", "app", resources),), T, T, None, None, claims=claims,
                   claim_served=served)


def snapshot(nodes, pods, dra=None) -> ClusterSnapshot:  # type: ignore[no-untyped-def]
    return ClusterSnapshot(T, tuple(nodes), tuple(pods), (), dra=dra)


def dra_objects() -> DraObjects:
    inventory = dra_rules.read_slices([SLICE], ("gpu.nvidia.com",))
    held = claim_devices(CLAIM, inventory, ("gpu.nvidia.com",)).held
    return DraObjects("v1", inventory, (ClaimInfo("uid-c", "ns", "c", {}, True, held, (Consumer("p", "uid-p"),)),))


def test_each_node_is_read_by_the_rule_that_hands_its_gpus_out():
    gfd = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}
    hand = compute(snapshot([node("dp-0", gfd, {"nvidia.com/gpu": "8"}),
                             node("dra-0", gfd),  # GFD labels kept on a DRA node: the slices win
                             node("hami-0", {}, {"nvidia.com/gpu": "20"}, REGISTER)], [], dra_objects()))
    assert (hand.gpus["dp-0"].sharing, hand.gpus["dp-0"].physical_gpus) == ("none", 8)
    assert (hand.gpus["dra-0"].sharing, hand.gpus["dra-0"].physical_gpus) == ("dra", 1)
    assert hand.gpus["dra-0"].gpu_model == "NVIDIA-H100-80GB-HBM3"
    assert (hand.gpus["hami-0"].sharing, hand.gpus["hami-0"].physical_gpus) == ("hami", 2)  # not 20 vGPUs


def test_a_claims_devices_are_held_and_its_extended_resource_not_counted_again():
    served = frozenset({("main", "nvidia.com/gpu")})
    hand = compute(snapshot([node("dra-0")], [pod("p", "dra-0", {"nvidia.com/gpu": 1}, claims=("c",),
                                                  served=served)], dra_objects()))
    (hold,) = hand.holds["uid-p"]
    assert (hold.share, hold.gpu_uuid, hold.claim_uid, hold.kind) == (1.0, H100, "uid-c", "gpu")
    assert hand.requests["uid-p"] == {}
    assert hand.modes["uid-p"] == "dra"


def test_hami_tenants_hold_shares_and_hostile_annotations_bill_nothing():
    good = {"hami.io/vgpu-devices-allocated": f"{GPU0},NVIDIA,5000,30:;"}
    junk = {"hami.io/vgpu-devices-allocated": "GPU-not-registered-anywhere,NVIDIA,9,9:;<script>;" + "x" * 5000}
    elsewhere = {"hami.io/vgpu-devices-allocated": f"{GPU0},NVIDIA,5000,100:;"}  # on a node HAMi does not run
    hami_request = {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30}
    hand = compute(snapshot(
        [node("hami-0", {}, {"nvidia.com/gpu": "20"}, REGISTER),
         node("dp-0", {"nvidia.com/gpu.count": "1"}, {"nvidia.com/gpu": "1"})],
        [pod("a", "hami-0", hami_request, good), pod("b", "hami-0", hami_request, junk),
         pod("c", "dp-0", {"nvidia.com/gpu": 1}, elsewhere)]))
    (a,) = hand.holds["uid-a"]
    assert (a.share, a.gpu_uuid, a.mode) == (0.3, GPU0, "hami")
    assert hand.requests["uid-a"] == {}  # HAMi's resources are not device-plugin units
    assert hand.holds["uid-b"] == () and hand.warnings  # refused, said
    assert hand.holds["uid-c"] == () and hand.modes["uid-c"] == "device_plugin"  # the annotation is not obeyed
    assert hand.requests["uid-c"] == {"nvidia.com/gpu": 1}
    assert hand.hami_shares == {"hami-0": {GPU0: 0.3}}
