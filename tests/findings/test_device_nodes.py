"""GPU findings name the Kubernetes node, never dcgm-exporter's `Hostname` (apps/findings/rules.py, `DeviceNodes`):
an exporter without NODE_NAME names its own pod there. Pure rules, no database."""

from __future__ import annotations

from decimal import Decimal

from apps.findings.rules import DeviceNodes, Params, PodFigures, unattributed, unhealthy
from apps.inventory.gpus import classify_node
from apps.usage.ledger import NodeFact, SeriesFact
from apps.usage.sources import DeviceActivity, DeviceHealth

PRICE = Decimal("4.00")
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}
NODES = {name: NodeFact(name, "h100", classify_node(H100, {"nvidia.com/gpu": 8}), 3600.0, False, PRICE)
         for name in ("node-a", "node-b")}
POD = PodFigures(uid="u1", namespace="ml", pod="train-0", workload="Job/train", team="research", node="node-a",
                 node_group="h100", gpu_model="NVIDIA-H100-80GB-HBM3", gpus=1.0, held_seconds=3600.0,
                 allocated=1.0, working=0.8, idle=0.2, unmeasured=0.0, price=PRICE)
SERIES = [SeriesFact("ml", "train-0", "GPU-held", "", "", {"sm_active": 0.8})]
XID = Params(xid_codes=frozenset({79}))


def test_a_throttled_held_gpu_is_its_holders_on_the_holders_node_whatever_the_hostname_says():
    health = [DeviceHealth(node="nvidia-dcgm-exporter-abcde", uuid="GPU-held", xid_codes=(79,))]
    [f] = unhealthy(health, [], [], [POD], SERIES, NODES, 3600.0, XID)
    assert (f.node, f.team, f.pod, f.workload) == ("node-a", "research", "train-0", "Job/train")
    assert f.subject == "node-a/GPU-held/xid"
    assert f.cost == PRICE and f.allocated_cost == PRICE  # the node's price; the holder's charge for it


def test_an_unheld_gpu_is_placed_through_its_exporters_other_gpus_or_the_exporter_pods_node():
    # Same exporter pod as the held GPU: one exporter serves one node.
    health = [DeviceHealth(node="nvidia-dcgm-exporter-abcde", uuid="GPU-held", xid_codes=(79,)),
              DeviceHealth(node="nvidia-dcgm-exporter-abcde", uuid="GPU-free", xid_codes=(79,))]
    found = {f.gpu_uuid: f for f in unhealthy(health, [], [], [POD], SERIES, NODES, 3600.0, XID)}
    assert found["GPU-free"].node == "node-a" and found["GPU-free"].team == ""
    assert found["GPU-free"].cost == PRICE  # priced: the node is known
    # Another exporter none of whose GPUs is held: kube_pod_info says where its pod runs.
    other = [DeviceHealth(node="nvidia-dcgm-exporter-fghij", uuid="GPU-b", xid_codes=(79,))]
    [f] = unhealthy(other, [], [], [POD], SERIES, NODES, 3600.0, XID, {"nvidia-dcgm-exporter-fghij": "node-b"})
    assert (f.node, f.cost) == ("node-b", PRICE)
    # Nothing says where: the Hostname as given, unpriced (the preflight fails the exporter for it).
    [f] = unhealthy(other, [], [], [POD], SERIES, NODES, 3600.0, XID)
    assert (f.node, f.cost, f.unpriced_gpu_hours) == ("nvidia-dcgm-exporter-fghij", Decimal(0), Decimal(1))


def test_activity_nobody_holds_is_placed_on_the_exporter_pods_node():
    busy = [DeviceActivity("nvidia-dcgm-exporter-fghij", "GPU-b", "", "", 0.5)]
    [f] = unattributed(busy, [POD], SERIES, NODES, 3600.0, Params(), {"nvidia-dcgm-exporter-fghij": "node-b"})
    assert (f.node, f.subject, f.cost) == ("node-b", "node-b/GPU-b", PRICE)


def test_a_hostname_that_is_a_node_is_taken_as_it_is():
    where = DeviceNodes([POD], SERIES, NODES, [("node-b", "GPU-b")])
    assert where.node("node-b", "GPU-b") == "node-b"
    assert where.node("anything", "GPU-held") == "node-a"  # a held GPU: its holder's node first
