"""Pure fragmentation numbers on the worked example of docs/fragmentation.md."""

from __future__ import annotations

from apps.capacity.fragmentation import cluster_fragmentation, largest_free_block, node_slots, placeable, stranded
from apps.capacity.pending import diagnose_request
from apps.inventory.observations import ContainerRequest, NodeInfo, PodInfo

GROUP_LABELS = ["karpenter.sh/nodepool"]
FREE = [3, 5, 0, 8]  # free whole GPUs of four schedulable 8-GPU nodes


def _node(name: str, gpus: int = 8, *, ready: bool = True, cordoned: bool = False, allocatable: int | None = None):
    labels = {"karpenter.sh/nodepool": "train", "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.product": "H100"}
    alloc = gpus if allocatable is None else allocatable
    return NodeInfo(name, labels, {"nvidia.com/gpu": str(gpus)}, {"nvidia.com/gpu": str(alloc)}, ready, cordoned, None)


def _pod(name: str, node: str, gpus: int, phase: str = "Running", selector: dict | None = None) -> PodInfo:
    return PodInfo(
        uid=name, namespace="ml", name=name, node=node, phase=phase, labels={}, annotations={},
        containers=(ContainerRequest("main", "app", {"nvidia.com/gpu": float(gpus)}),),
        created=None, started=None, finished=None, deletion=None,
    )  # fmt: skip


def _world():
    nodes = [_node(f"n{i}") for i in range(4)] + [
        _node("cordoned", cordoned=True),
        _node("noplugin", allocatable=0),
    ]
    pods = [_pod("a", "n0", 5), _pod("b", "n1", 3), _pod("c", "n2", 8), _pod("done", "n3", 8, phase="Succeeded")]
    return nodes, pods


def test_it_computes_the_three_numbers_of_the_worked_example():
    assert largest_free_block(FREE) == 8
    assert placeable(FREE) == {"1": 16, "2": 7, "4": 3, "8": 1}
    assert stranded(FREE) == {"1": 0, "2": 2, "4": 4, "8": 8}


def test_it_counts_only_schedulable_nodes_and_names_zero_allocatable_ones():
    nodes, pods = _world()
    [group] = cluster_fragmentation(nodes, pods, GROUP_LABELS)
    assert group.node_group == "train"
    assert group.nodes == 6
    assert group.physical_gpus == 48
    assert group.allocatable_gpus == 40  # the node without device plugin advertises none
    assert group.allocated_gpus == 16  # the Succeeded pod holds nothing
    assert group.free_gpus == 16  # 3 + 5 + 0 + 8; the cordoned node's 8 do not count
    assert list(group.free_per_node) == [8, 5, 3, 0]
    assert group.largest_free_block == 8
    assert group.placeable == {"1": 16, "2": 7, "4": 3, "8": 1}
    assert group.stranded_gpus == {"1": 0, "2": 2, "4": 4, "8": 8}
    assert group.zero_allocatable_nodes == ("noplugin",)
    assert group.unschedulable_nodes == ("cordoned",)


def test_it_reports_mig_and_time_sliced_nodes_in_their_own_units():
    mig = NodeInfo(
        "mig", {"karpenter.sh/nodepool": "mig", "nvidia.com/gpu.count": "1", "nvidia.com/mig.strategy": "mixed"},
        {"nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "1"},
        {"nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "1"}, True, False, None,
    )  # fmt: skip
    sliced = NodeInfo(
        "ts", {"karpenter.sh/nodepool": "ts", "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "4",
               "nvidia.com/gpu.sharing-strategy": "time-slicing"},
        {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"}, True, False, None,
    )  # fmt: skip
    request = (ContainerRequest("m", "app", {"nvidia.com/mig-3g.40gb": 1}),)
    pod = PodInfo("p", "ml", "p", "mig", "Running", {}, {}, request, None, None, None, None)
    rows = {g.node_group: g for g in cluster_fragmentation([mig, sliced], [pod], GROUP_LABELS)}
    assert rows["mig"].allocatable_gpus == 1.0  # 2 x 3/7 + 1/7
    assert rows["mig"].allocated_gpus == round(3 / 7, 9)
    assert rows["mig"].largest_free_block == 0  # no whole GPU free
    units = {u.unit: u for u in rows["mig"].units}
    assert units["mig-3g.40gb"].free == 1 and units["mig-1g.10gb"].free == 1
    [replicas] = rows["ts"].units
    assert (replicas.unit, replicas.allocatable, replicas.largest_free_block) == ("replica", 8, 8)
    assert rows["ts"].allocatable_gpus == 2.0


def test_it_diagnoses_fragmentation_capacity_and_other():
    nodes, pods = _world()
    slots = node_slots(nodes, pods, GROUP_LABELS)
    assert diagnose_request({"nvidia.com/gpu": 8}, slots).reason == "other"  # n3 has 8 free
    busy = pods + [_pod("d", "n3", 4)]
    slots = node_slots(nodes, busy, GROUP_LABELS)  # free now 3, 5, 0, 4: 12 in total, largest 5
    assert diagnose_request({"nvidia.com/gpu": 8}, slots).reason == "fragmentation"
    assert diagnose_request({"nvidia.com/gpu": 16}, slots).reason == "capacity"
    assert diagnose_request({"nvidia.com/gpu": 1}, slots, {"karpenter.sh/nodepool": "other"}).reason == "other"
    assert diagnose_request({"nvidia.com/mig-1g.10gb": 1}, slots).reason == "capacity"
