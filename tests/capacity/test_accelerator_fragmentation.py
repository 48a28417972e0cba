"""Fragmentation of nodes whose GPUs DRA claims and HAMi fractions hand out (docs/fragmentation.md): published
minus held devices, a GPU with a MIG device held is not free whole, a HAMi GPU with a tenant shows its free fraction
and is not free for a whole-GPU job; block numbers right on a group that mixes them with device-plugin nodes."""

from __future__ import annotations

from typing import Any

import pytest

from apps.capacity.fragmentation import Accelerators, cluster_fragmentation, node_slots
from apps.inventory.gpus import dra, hami
from apps.inventory.gpus.dra_claims import claim_devices
from apps.inventory.observations import ClaimInfo, ContainerRequest, DraObjects, NodeInfo, PodInfo

POOL = {"karpenter.sh/nodepool": "h100"}
H100 = "NVIDIA H100 80GB HBM3"
DRIVERS = dra.DEFAULT_GPU_DRIVERS


def _attrs(**values: Any) -> dict[str, dict[str, Any]]:
    kinds = {int: "int", str: "string"}
    return {k: {kinds[type(v)]: v} for k, v in values.items()}


def _gpu(i: int, node: str) -> dict[str, Any]:
    return {"name": f"gpu-{i}", "attributes": _attrs(type="gpu", uuid=f"GPU-{node}-{i}", productName=H100)}


def _mig(gpu: int, node: str, profile: str, place: int, *, published_whole: bool = False) -> dict[str, Any]:
    name = f"gpu-{gpu}-mig-{profile.replace('.', '')}-{place}"
    return {"name": name, "attributes": _attrs(type="mig", uuid=f"MIG-{node}-{gpu}-{place}",
                                               parentUUID=f"GPU-{node}-{gpu}", profile=profile, productName=H100)}


def _slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"spec": {"driver": "gpu.nvidia.com", "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}


def _node(name: str, labels: dict[str, str] | None = None, *, ready: bool = True, register: str = "",
          capacity: dict[str, str] | None = None) -> NodeInfo:
    return NodeInfo(name, {**POOL, **(labels or {})}, capacity or {}, capacity or {}, ready, False, None,
                    hami_register=register)


def _dra(slices: list[dict[str, Any]], held: dict[str, list[str]]) -> DraObjects:
    """The DRA objects of a cluster whose claims hold `held` (node -> device names), one claim per node."""
    inventory = dra.read_slices(slices, DRIVERS)
    claims = []
    for node, names in held.items():
        raw = {"metadata": {"name": f"c-{node}", "namespace": "ml"}, "status": {"allocation": {"devices": {
            "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": n} for n in names]}}}}
        devices = claim_devices(raw, inventory, DRIVERS).held
        claims.append(ClaimInfo(f"uid-{node}", "ml", f"c-{node}", {}, True, devices, ()))
    return DraObjects("v1", inventory, tuple(claims))


def _pod(name: str, node: str, gpus: int) -> PodInfo:
    return PodInfo(uid=name, namespace="ml", name=name, node=node, phase="Running", labels={}, annotations={},
                   containers=(ContainerRequest("main", "app", {"nvidia.com/gpu": float(gpus)}),), created=None,
                   started=None, finished=None, deletion=None)


# dra-0: 4 whole H100s, gpu-0 and gpu-1 held. dra-1: GPU 0 published whole and as 3g+2g+1g+1g MIG devices (#719),
# its 3g held; GPU 1 only as MIG devices 3g + 3g (6/7), one 3g held.
SLICES = [
    _slice("dra-0", [_gpu(i, "dra-0") for i in range(4)]),
    _slice("dra-1", [_gpu(0, "dra-1"), _mig(0, "dra-1", "3g.40gb", 0), _mig(0, "dra-1", "2g.20gb", 4),
                     _mig(0, "dra-1", "1g.10gb", 6), _mig(0, "dra-1", "1g.10gb", 5),
                     _mig(1, "dra-1", "3g.40gb", 0), _mig(1, "dra-1", "3g.40gb", 4)]),
]
HELD = {"dra-0": ["gpu-0", "gpu-1"], "dra-1": ["gpu-0-mig-3g40gb-0", "gpu-1-mig-3g40gb-0"]}


def test_a_dra_node_offers_its_published_devices_minus_the_held_ones() -> None:
    acc = Accelerators(dra=_dra(SLICES, HELD))
    [group] = cluster_fragmentation([_node("dra-0"), _node("dra-1")], [], ["karpenter.sh/nodepool"], acc)
    assert (group.nodes, group.physical_gpus, group.gpu_model) == (2, 6, "NVIDIA-H100-80GB-HBM3")
    # dra-0: 4 of which 2 held; dra-1: GPU 0 whole (1) with 3/7 held, GPU 1 6/7 with 3/7 held
    assert group.allocatable_gpus == pytest.approx(4 + 1 + 6 / 7)
    assert group.allocated_gpus == pytest.approx(2 + 3 / 7 + 3 / 7)
    assert group.free_gpus == pytest.approx(2 + 4 / 7 + 3 / 7)
    # whole GPUs: dra-0's gpu-2 and gpu-3; dra-1's GPU 0 is published whole but a MIG device of it is held
    assert group.free_per_node == (2, 0)
    assert (group.largest_free_block, group.placeable, group.zero_allocatable_nodes) == (
        2, {"1": 2, "2": 1, "4": 0, "8": 0}, ())
    units = {(u.resource, u.unit): (u.allocatable, u.allocated, u.free) for u in group.units}
    assert units == {
        ("gpu.nvidia.com", "gpu"): (5, 3, 2),
        ("mig.nvidia.com/1g.10gb", "mig-1g.10gb"): (2, 0, 2),
        ("mig.nvidia.com/2g.20gb", "mig-2g.20gb"): (1, 0, 1),
        ("mig.nvidia.com/3g.40gb", "mig-3g.40gb"): (3, 2, 1),
    }


def test_nothing_held_everything_free_and_a_gpu_held_whole_frees_none_of_its_mig_devices() -> None:
    free = cluster_fragmentation([_node("dra-1")], [], ["karpenter.sh/nodepool"], Accelerators(dra=_dra(SLICES, {})))
    assert (free[0].free_gpus, free[0].largest_free_block) == (pytest.approx(1 + 6 / 7), 1)
    held = Accelerators(dra=_dra(SLICES, {"dra-1": ["gpu-0"]}))
    [group] = cluster_fragmentation([_node("dra-1")], [], ["karpenter.sh/nodepool"], held)
    assert group.allocated_gpus == 1.0 and group.free_gpus == pytest.approx(6 / 7)
    assert {u.resource: u.free for u in group.units}["mig.nvidia.com/1g.10gb"] == 0


def test_a_dra_node_with_gfd_labels_and_no_device_plugin_is_not_zero_allocatable() -> None:
    """The GPU Operator may still label the node; no `nvidia.com/gpu` is allocatable there by design."""
    gfd = {"nvidia.com/gpu.count": "4", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    node = _node("dra-0", gfd, capacity={"nvidia.com/gpu": "0"})
    [group] = cluster_fragmentation([node], [], ["karpenter.sh/nodepool"], Accelerators(dra=_dra(SLICES, HELD)))
    assert group.zero_allocatable_nodes == () and group.allocatable_gpus == 4
    # without the DRA objects the same node would be named zero-allocatable: the test can fail
    [blind] = cluster_fragmentation([node], [], ["karpenter.sh/nodepool"])
    assert blind.zero_allocatable_nodes == ("dra-0",)


def test_a_cordoned_dra_node_offers_nothing_but_still_counts() -> None:
    [group] = cluster_fragmentation([_node("dra-0", ready=False)], [], ["karpenter.sh/nodepool"],
                                    Accelerators(dra=_dra(SLICES, HELD)))
    assert (group.allocatable_gpus, group.allocated_gpus, group.free_gpus, group.largest_free_block) == (4, 2, 0, 0)
    assert group.unschedulable_nodes == ("dra-0",)


# ---- HAMi ----

L4 = [f"GPU-14000000-0000-4000-8000-00000000000{i}" for i in range(3)]
REGISTER = ":".join(f"{u},10,23034,100,NVIDIA-NVIDIA L4,0,true" for u in L4) + ":"


def test_a_hami_gpu_with_tenants_shows_its_free_fraction_and_is_not_free_whole() -> None:
    register = hami.parse_register(REGISTER)
    # GPU 0: 30 % + 40 %; GPU 1: oversubscribed 1.5 (counts 1); GPU 2: no tenant
    acc = Accelerators(registers={"hami-0": register}, hami_shares={"hami-0": {L4[0]: 0.7, L4[1]: 1.5}})
    node = _node("hami-0", {"gpu": "on"}, register=REGISTER, capacity={"nvidia.com/gpu": "30"})
    [group] = cluster_fragmentation([node], [_pod("tenant", "hami-0", 1)], ["karpenter.sh/nodepool"], acc)
    assert (group.physical_gpus, group.gpu_model) == (3, "NVIDIA-L4")  # not the 30 vGPUs
    assert (group.allocatable_gpus, group.allocated_gpus) == (3.0, pytest.approx(1.7))
    assert group.free_gpus == pytest.approx(1.3)
    assert (group.largest_free_block, group.free_per_node, group.zero_allocatable_nodes) == (1, (1,), ())
    assert hami.capacity(register, {L4[0]: 0.7, L4[1]: 1.5}).fractions_free == {
        L4[0]: pytest.approx(0.3), L4[1]: 0.0, L4[2]: 1.0}


def test_placeability_counts_right_on_a_group_mixing_device_plugin_dra_and_hami_nodes() -> None:
    """One node group, three ways: 8-GPU device-plugin node with 3 held, a DRA node with 2 of 4 free, a HAMi node
    with 1 of 3 untouched GPUs: the whole-GPU blocks are 5, 2 and 1."""
    plugin = NodeInfo("dp-0", {**POOL, "nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                      {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"}, True, False, None)
    register = hami.parse_register(REGISTER)
    acc = Accelerators(dra=_dra(SLICES, HELD), registers={"hami-0": register},
                       hami_shares={"hami-0": {L4[0]: 0.5, L4[1]: 0.25}})
    nodes = [plugin, _node("dra-0"), _node("hami-0", register=REGISTER, capacity={"nvidia.com/gpu": "30"})]
    pods = [_pod("train", "dp-0", 3), _pod("tenant", "hami-0", 1)]  # the HAMi vGPU is not a device-plugin GPU
    slots = node_slots(nodes, pods, ["karpenter.sh/nodepool"], acc)
    assert {s.node: s.mode for s in slots} == {"dp-0": "device_plugin", "dra-0": "dra", "hami-0": "hami"}
    [group] = cluster_fragmentation(nodes, pods, ["karpenter.sh/nodepool"], acc)
    assert group.free_per_node == (5, 2, 1)
    assert group.placeable == {"1": 8, "2": 3, "4": 1, "8": 0}
    assert group.stranded_gpus == {"1": 0, "2": 2, "4": 4, "8": 8}
    assert group.allocatable_gpus == pytest.approx(8 + 4 + 3)
    assert group.allocated_gpus == pytest.approx(3 + 2 + 0.75)
