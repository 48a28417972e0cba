"""The DRA rules (apps/inventory/gpus/dra.py, dra_claims.py): every row of ledger.md "GPUs handed out by
claims (DRA) and by fractions (HAMi)" for DRA, as tables with hand-computed expectations.

Real shapes: the AKS and GB200 ResourceSlices of tests/fixtures/dra/ (sources in their headers); the A30 MIG
node and claim below restate NVIDIA/dcgm-exporter pull/664 (a 1g.6gb device `gpu-1-mig-1g6gb-14-0` of GPU
`GPU-e04ce2a0-…`, MIG UUID `MIG-c73ab1c4-…`, claim `pod-c98945f5d-dnjs6-mig-devices-thfdj` in `gpu-test4`);
pods and claims follow the driver's quickstart demos gpu-test1/3/4 and the claim status of the Kubernetes
DRA tutorial (install-use-dra.md); the adminAccess request the DRA concept page's "Admin access".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.inventory import gpus
from apps.inventory.gpus import dra, dra_claims
from apps.inventory.gpus.dra import DeviceKey
from apps.inventory.observations import ContainerRequest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "dra"
DRIVERS = dra.DEFAULT_GPU_DRIVERS
GIB = 1024**3
MIB = 1024**2


def _fixture(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((FIXTURES / name).read_text()))


def _attrs(**values: Any) -> dict[str, dict[str, Any]]:
    """Typed attributes: str -> string, int -> int, bool -> bool."""
    kinds = {bool: "bool", int: "int", str: "string"}
    return {key.replace("__", "/"): {kinds[type(v)]: v} for key, v in values.items()}


def _gpu(name: str, uuid: str, product: str, memory: str = "") -> dict[str, Any]:
    device: dict[str, Any] = {"name": name, "attributes": _attrs(type="gpu", uuid=uuid, productName=product)}
    if memory:
        device["capacity"] = {"memory": {"value": memory}}
    return device


def _mig(name: str, uuid: str | None, parent: str, profile: str, product: str) -> dict[str, Any]:
    attributes = _attrs(type="mig", parentUUID=parent, profile=profile, productName=product)
    if uuid is not None:
        attributes["uuid"] = {"string": uuid}
    return {"name": name, "attributes": attributes}


def _slice(node: str, devices: list[dict[str, Any]], *, driver: str = "gpu.nvidia.com", pool: str = "",
           generation: int = 1, count: int = 1) -> dict[str, Any]:
    return {"spec": {"driver": driver, "nodeName": node, "devices": devices,
                     "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count}}}


def _claim(name: str, results: list[dict[str, Any]], reserved: list[dict[str, Any]] | None = None,
           namespace: str = "gpu-test") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace},
            "status": {"allocation": {"devices": {"results": results}}, "reservedFor": reserved or []}}


def _result(pool: str, device: str, driver: str = "gpu.nvidia.com", **extra: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": driver, "pool": pool, "device": device, **extra}


# The A30 node of dcgm-exporter pull/664: GPU 0 whole, GPU 1 in MIG mode (its 1g.6gb device at placement 0
# from the exporter's series; the other instances of the 4-slice A30 are illustrative).
A30_NODE = "nim-operator-72q5r53"
A30_GPU0 = "GPU-f50641a9-38d7-6df1-0bec-e661b4ca1847"
A30_GPU1 = "GPU-e04ce2a0-21a4-b68c-854a-f5c0d26bfc0b"
A30_MIG_1G = "MIG-c73ab1c4-6cb7-59b6-be7e-21c4ac35c3b6"
A30_SLICE = _slice(A30_NODE, [
    _gpu("gpu-0", A30_GPU0, "NVIDIA A30", "24Gi"),
    _mig("gpu-1-mig-1g6gb-14-0", A30_MIG_1G, A30_GPU1, "1g.6gb", "NVIDIA A30"),
    _mig("gpu-1-mig-1g6gb-14-1", "MIG-a3000000-0000-5000-8000-000000000001", A30_GPU1, "1g.6gb", "NVIDIA A30"),
    _mig("gpu-1-mig-2g12gb-5-2", "MIG-a3000000-0000-5000-8000-000000000002", A30_GPU1, "2g.12gb", "NVIDIA A30"),
])

# One H100 in MIG mode, 3g.40gb + 2g.20gb + 2 x 1g.10gb (7 slices), parent not published.
H100_NODE = "h100-mig-0"
H100_GPU = "GPU-h1000000-0000-4000-8000-000000000000"
H100_SLICE = _slice(H100_NODE, [
    _mig("gpu-0-mig-3g40gb-9-4", "MIG-h3", H100_GPU, "3g.40gb", "NVIDIA H100 80GB HBM3"),
    _mig("gpu-0-mig-2g20gb-14-2", "MIG-h2", H100_GPU, "2g.20gb", "NVIDIA H100 80GB HBM3"),
    _mig("gpu-0-mig-1g10gb-19-0", "MIG-h1a", H100_GPU, "1g.10gb", "NVIDIA H100 80GB HBM3"),
    _mig("gpu-0-mig-1g10gb-19-1", "MIG-h1b", H100_GPU, "1g.10gb", "NVIDIA H100 80GB HBM3"),
])

AKS_GPU_NODE = "aks-gpupool-15127565-vmss000002"
AKS_MIG_NODE = "aks-migpool-68842551-vmss000001"
AKS_MIG_GPU = "GPU-ddf64803-f421-0e5b-883e-cd752de16db7"


@pytest.fixture(scope="module")
def fleet() -> dra.DraInventory:
    """AKS (v1, whole + MIG node publishing both), GB200 (v1beta1), A30 and H100 MIG nodes, one cluster."""
    slices = _fixture("aks-a100-resourceslices-v1.yaml") + _fixture("gb200-resourceslice-v1beta1.yaml")
    return dra.read_slices([*slices, A30_SLICE, H100_SLICE], DRIVERS)


# ---- Devices ----

# (case, entry, driver, expected fields of the DraDevice)
DEVICES = [
    (
        "v1 bare keys, typed values, memory 80Gi (AKS #719)",
        _fixture("aks-a100-resourceslices-v1.yaml")[0]["spec"]["devices"][0], "gpu.nvidia.com",
        {"type": "gpu", "uuid": "GPU-13719f71-412c-d11e-b236-a262f530a4fc", "product_name": "NVIDIA A100 80GB PCIe",
         "memory_bytes": 80 * GIB, "gpu_model": "NVIDIA-A100-80GB-PCIe", "is_gpu": True},
    ),
    (
        "v1 memory 81920Mi is 80Gi",
        _fixture("aks-a100-resourceslices-v1.yaml")[1]["spec"]["devices"][0], "gpu.nvidia.com",
        {"memory_bytes": 80 * GIB},
    ),
    (
        "v1beta1 basic.attributes, int and version values (GB200 #744)",
        _fixture("gb200-resourceslice-v1beta1.yaml")[0]["spec"]["devices"][3], "gpu.nvidia.com",
        {"type": "gpu", "uuid": "GPU-b2000000-0000-4000-8000-000000000003", "product_name": "NVIDIA GB200",
         "memory_bytes": 189471 * MIB, "gpu_model": "NVIDIA-GB200"},
    ),
    (
        "keys qualified with the driver's domain are the bare attributes",
        _fixture("gb200-resourceslice-v1beta1.yaml")[0]["spec"]["devices"][1], "gpu.nvidia.com",
        {"type": "gpu", "uuid": "GPU-b2000000-0000-4000-8000-000000000001", "product_name": "NVIDIA GB200"},
    ),
    (
        "MIG device: parent, profile, its own MIG UUID",
        A30_SLICE["spec"]["devices"][1], "gpu.nvidia.com",
        {"type": "mig", "uuid": A30_MIG_1G, "parent_uuid": A30_GPU1, "profile": "1g.6gb",
         "physical_uuid": A30_GPU1, "gpu_model": "NVIDIA-A30", "is_gpu": True},
    ),
    (
        "dynamic MIG: abstract device without a uuid",
        _mig("gpu-0-mig-1g10gb-19-0", None, H100_GPU, "1g.10gb", "NVIDIA H100 80GB HBM3"), "gpu.nvidia.com",
        {"type": "mig", "uuid": "", "physical_uuid": H100_GPU},
    ),
    (
        "dynamic MIG: uuid published as null",
        {"name": "m", "attributes": {"type": {"string": "mig"}, "uuid": {"string": None},
                                     "parentUUID": {"string": H100_GPU}}}, "gpu.nvidia.com",
        {"uuid": "", "parent_uuid": H100_GPU},
    ),
    (
        "vfio passthrough under the GPU driver: not a GPU",
        {"name": "gpu-0-vfio", "attributes": _attrs(type="vfio", uuid="GPU-v")}, "gpu.nvidia.com",
        {"type": "vfio", "is_gpu": False},
    ),
    (
        "ComputeDomain IMEX channel: not a GPU",
        {"name": "channel-0", "attributes": _attrs(type="channel")}, "compute-domain.nvidia.com",
        {"type": "channel", "is_gpu": False},
    ),
    (
        "another domain's qualified key is not the driver's attribute",
        {"name": "x", "attributes": _attrs(resource_kubernetes_io__pciBusID="0000:65:00.0", type="gpu")},
        "gpu.nvidia.com",
        {"type": "gpu", "uuid": ""},
    ),
    (
        "a memory that is no quantity is unknown",
        {"name": "x", "attributes": _attrs(type="gpu"), "capacity": {"memory": {"value": "lots"}}}, "gpu.nvidia.com",
        {"memory_bytes": None},
    ),
]


@pytest.mark.parametrize(("case", "entry", "driver", "expected"), DEVICES, ids=[d[0] for d in DEVICES])
def test_device(case: str, entry: dict[str, Any], driver: str, expected: dict[str, Any]) -> None:
    device = dra.parse_device(entry, driver, "pool")
    assert device is not None
    assert {k: getattr(device, k) for k in expected} == expected


def test_qualified_and_bare_attribute_names_read_alike() -> None:
    qualified = {"name": "d", "attributes": _attrs(gpu_nvidia_com__type="gpu", gpu_nvidia_com__uuid="GPU-1",
                                                   gpu_nvidia_com__productName="NVIDIA L4")}
    qualified["attributes"] = {k.replace("gpu_nvidia_com/", "gpu.nvidia.com/"): v
                               for k, v in qualified["attributes"].items()}
    assert dra.device_attributes(qualified, "gpu.nvidia.com") == {"type": "gpu", "uuid": "GPU-1",
                                                                 "productName": "NVIDIA L4"}
    assert dra.parse_device(qualified, "gpu.nvidia.com", "p") == dra.parse_device(
        _gpu("d", "GPU-1", "NVIDIA L4"), "gpu.nvidia.com", "p")


# ---- Nodes ----

# (node, physical GPUs, GPU model, compute slices, GPU devices published)
NODES = [
    (AKS_GPU_NODE, 1, "NVIDIA-A100-80GB-PCIe", 7, 1),
    # #719: the whole GPU and its four MIG devices are one physical GPU
    (AKS_MIG_NODE, 1, "NVIDIA-A100-80GB-PCIe", 7, 5),
    ("gb200-tray-07", 4, "NVIDIA-GB200", 7, 4),
    # one whole A30 + the parent of three MIG devices
    (A30_NODE, 2, "NVIDIA-A30", 4, 4),
    # the parent is not published: counted from the MIG devices' parentUUID, once
    (H100_NODE, 1, "NVIDIA-H100-80GB-HBM3", 7, 4),
]


@pytest.mark.parametrize(("node", "physical", "model", "slices", "published"), NODES, ids=[n[0] for n in NODES])
def test_node(fleet: dra.DraInventory, node: str, physical: int, model: str, slices: int, published: int) -> None:
    found = fleet.nodes[node]
    assert found.gpu == gpus.GpuNode(model, physical, gpus.DRA_CLAIMS, slices)
    assert len(found.devices) == published


def test_inventory_index(fleet: dra.DraInventory) -> None:
    key = DeviceKey("gpu.nvidia.com", A30_NODE, "gpu-1-mig-1g6gb-14-0")
    assert fleet.devices[key].uuid == A30_MIG_1G
    assert fleet.node_of(key) == A30_NODE
    assert fleet.parent_of(fleet.devices[DeviceKey("gpu.nvidia.com", AKS_MIG_NODE, "gpu-0-mig-1g10gb-19-0")]) == (
        fleet.devices[DeviceKey("gpu.nvidia.com", AKS_MIG_NODE, "gpu-0")])
    assert fleet.warnings == ()


def test_only_gpu_drivers_and_the_highest_generation_count() -> None:
    # generation 1 still lists a GPU the driver has since dropped (gpu-9): not counted
    old = _slice("n1", [_gpu("gpu-0", "GPU-a", "NVIDIA L4"), _gpu("gpu-9", "GPU-gone", "NVIDIA L4")], generation=1)
    # generation 2 of the same pool spans two slices: 3 GPUs in all
    new_a = _slice("n1", [_gpu("gpu-0", "GPU-a", "NVIDIA L4"), _gpu("gpu-1", "GPU-b", "NVIDIA L4")],
                   generation=2, count=2)
    new_b = _slice("n1", [_gpu("gpu-2", "GPU-c", "NVIDIA L4")], generation=2, count=2)
    channels = _slice("n1", [{"name": "channel-0", "attributes": _attrs(type="channel")}],
                      driver="compute-domain.nvidia.com")
    other = _slice("n2", [_gpu("gpu-0", "GPU-z", "NVIDIA L4")], driver="gpu.example.com")
    inventory = dra.read_slices([old, new_b, channels, new_a, other], DRIVERS)
    assert set(inventory.nodes) == {"n1"}
    assert inventory.nodes["n1"].gpu.physical_gpus == 3
    assert inventory.nodes["n1"].gpu.gpu_model == "NVIDIA-L4"
    assert len(inventory.devices) == 3
    assert inventory.warnings == ()
    # the driver list is a parameter: a second GPU driver counts when listed
    both = dra.read_slices([new_a, new_b, other], ("gpu.nvidia.com", "gpu.example.com"))
    assert {n: v.gpu.physical_gpus for n, v in both.nodes.items()} == {"n1": 3, "n2": 1}


def test_slices_not_tied_to_a_node_and_junk_are_warnings() -> None:
    floating = _slice("", [_gpu("gpu-0", "GPU-a", "NVIDIA L4")])
    nameless = _slice("n1", [{"attributes": _attrs(type="gpu")}, "junk", _gpu("gpu-0", "GPU-a", "NVIDIA L4")])
    untyped = _slice("n2", [{"name": "gpu-0", "attributes": _attrs(uuid="GPU-q")}])
    orphan = _slice("n3", [{"name": "m", "attributes": _attrs(type="mig", profile="1g.10gb")}])
    inventory = dra.read_slices([floating, nameless, untyped, orphan, "junk", {"spec": "junk"}], DRIVERS)
    assert {n: v.gpu.physical_gpus for n, v in inventory.nodes.items()} == {"n1": 1, "n3": 0}
    assert len(inventory.warnings) == 5
    assert "not tied to one node" in inventory.warnings[0]
    assert any("no `type`" in w for w in inventory.warnings)
    assert any("no parentUUID" in w for w in inventory.warnings)


# ---- Claims: what a claim holds ----

# (case, results, [(kind, share, GPU UUID, device UUID)], warnings)
CLAIMS = [
    (
        "type=gpu: one whole GPU",
        [_result(AKS_GPU_NODE, "gpu-1")],
        [("gpu", 1.0, "GPU-13719f71-412c-d11e-b236-a262f530a4fc", "GPU-13719f71-412c-d11e-b236-a262f530a4fc")],
        0,
    ),
    (
        "A30 MIG 1g.6gb: 1/4 of the parent (pull/664: UUID = parent, dra_mig_device_uuid = MIG)",
        [_result(A30_NODE, "gpu-1-mig-1g6gb-14-0")],
        [("mig-1g.6gb", 1 / 4, A30_GPU1, A30_MIG_1G)],
        0,
    ),
    (
        "A30 MIG 2g.12gb: 2/4",
        [_result(A30_NODE, "gpu-1-mig-2g12gb-5-2")],
        [("mig-2g.12gb", 2 / 4, A30_GPU1, "MIG-a3000000-0000-5000-8000-000000000002")],
        0,
    ),
    (
        "H100 MIG 3g.40gb + 1g.10gb: 3/7 + 1/7",
        [_result(H100_NODE, "gpu-0-mig-3g40gb-9-4"), _result(H100_NODE, "gpu-0-mig-1g10gb-19-1")],
        [("mig-3g.40gb", 3 / 7, H100_GPU, "MIG-h3"), ("mig-1g.10gb", 1 / 7, H100_GPU, "MIG-h1b")],
        0,
    ),
    (
        "A100 MIG on a node that also publishes the GPU whole: 2/7",
        [_result(AKS_MIG_NODE, "gpu-0-mig-2g20gb-14-2")],
        [("mig-2g.20gb", 2 / 7, AKS_MIG_GPU, "MIG-2a000000-0000-5000-8000-000000000002")],
        0,
    ),
    (
        "adminAccess: holds nothing",
        [_result(AKS_GPU_NODE, "gpu-1", adminAccess=True)],
        [],
        0,
    ),
    (
        "adminAccess null (the tutorial's claim) is a normal result",
        [_result(AKS_GPU_NODE, "gpu-1", adminAccess=None)],
        [("gpu", 1.0, "GPU-13719f71-412c-d11e-b236-a262f530a4fc", "GPU-13719f71-412c-d11e-b236-a262f530a4fc")],
        0,
    ),
    (
        "results of other drivers ignored (IMEX channel, example driver)",
        [_result("pool", "channel-0", driver="compute-domain.nvidia.com"),
         _result("kind-worker", "gpu-4", driver="gpu.example.com")],
        [],
        0,
    ),
    (
        "a device no slice publishes: reported, not counted",
        [_result(AKS_GPU_NODE, "gpu-7"), _result(A30_NODE, "gpu-0")],
        [("gpu", 1.0, A30_GPU0, A30_GPU0)],
        1,
    ),
    (
        "the same device twice: counted once",
        [_result(A30_NODE, "gpu-0"), _result(A30_NODE, "gpu-0")],
        [("gpu", 1.0, A30_GPU0, A30_GPU0)],
        1,
    ),
]


@pytest.mark.parametrize(("case", "results", "held", "warnings"), CLAIMS, ids=[c[0] for c in CLAIMS])
def test_claim_devices(fleet: dra.DraInventory, case: str, results: list[dict[str, Any]],
                       held: list[tuple[str, float, str, str]], warnings: int) -> None:
    got = dra_claims.claim_devices(_claim("c", results), fleet, DRIVERS)
    assert [(d.kind, d.share, d.gpu_uuid, d.device_uuid) for d in got.held] == [
        (kind, pytest.approx(share, abs=1e-12), gpu, device) for kind, share, gpu, device in held
    ]
    assert len(got.warnings) == warnings


def test_gpu_test4_claim_of_four_mig_devices_holds_one_gpu(fleet: dra.DraInventory) -> None:
    """The quickstart's gpu-test4 on the AKS MIG node: 3g + 2g + 1g + 1g = 7/7 of one A100, on that node."""
    claim = _claim("pod-mig-devices-x", [_result(AKS_MIG_NODE, n) for n in (
        "gpu-0-mig-3g40gb-9-4", "gpu-0-mig-2g20gb-14-2", "gpu-0-mig-1g10gb-19-0", "gpu-0-mig-1g10gb-19-1")])
    got = dra_claims.claim_devices(claim, fleet, DRIVERS)
    assert got.share == pytest.approx(1.0, abs=1e-12)
    assert {d.node for d in got.held} == {AKS_MIG_NODE}
    assert {d.gpu_model for d in got.held} == {"NVIDIA-A100-80GB-PCIe"}
    assert {d.mode for d in got.held} == {gpus.AllocationMode.DRA}


def test_mig_by_memory_uses_the_published_parent(fleet: dra.DraInventory) -> None:
    """3g.40gb on the AKS GPU published whole at 81920Mi: 40192 / 81920 by memory; 3/7 by slices; a parent
    that is not published (H100) falls back to slices."""
    on_aks = _claim("c", [_result(AKS_MIG_NODE, "gpu-0-mig-3g40gb-9-4")])
    assert dra_claims.claim_devices(on_aks, fleet, DRIVERS, mig_by_memory=True).share == pytest.approx(
        40192 / 81920, abs=1e-12)
    assert dra_claims.claim_devices(on_aks, fleet, DRIVERS).share == pytest.approx(3 / 7, abs=1e-12)
    on_h100 = _claim("c", [_result(H100_NODE, "gpu-0-mig-3g40gb-9-4")])
    assert dra_claims.claim_devices(on_h100, fleet, DRIVERS, mig_by_memory=True).share == pytest.approx(
        3 / 7, abs=1e-12)


def test_claim_status_shapes() -> None:
    assert dra_claims.is_allocated(_claim("c", []))
    assert not dra_claims.is_allocated({"metadata": {"name": "c"}, "status": {}})
    empty = dra.read_slices([], DRIVERS)
    assert dra_claims.claim_devices({"status": {"allocation": "junk"}}, empty, DRIVERS).held == ()
    assert dra_claims.claim_workload("single-gpu") == "ResourceClaim/single-gpu"
    assert dra_claims.claim_name(_claim("some-gpu", [], namespace="dra-tutorial")) == "dra-tutorial/some-gpu"


# ---- Consumers ----


def test_claim_consumers_are_reserved_pods() -> None:
    claim = _claim("single-gpu", [], reserved=[
        {"resource": "pods", "name": "pod1", "uid": "u1"},
        {"resource": "pods", "name": "pod2", "uid": "u2", "apiGroup": ""},
        {"resource": "podgroups", "apiGroup": "scheduling.k8s.io", "name": "g", "uid": "u3"},
        "junk",
    ])
    assert dra_claims.claim_consumers(claim) == (dra_claims.Consumer("pod1", "u1"), dra_claims.Consumer("pod2", "u2"))


# (case, pod, claim names)
PODS = [
    (
        "gpu-test3: a shared claim by name",
        {"spec": {"resourceClaims": [{"name": "shared-gpu", "resourceClaimName": "single-gpu"}]}},
        ("single-gpu",),
    ),
    (
        "gpu-test1: a claim from a template, its generated name in the pod's status (#99)",
        {"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]},
         "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "pod1-gpu-h7hr9"}]}},
        ("pod1-gpu-h7hr9",),
    ),
    (
        "a template whose claim is not made yet: none",
        {"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]}, "status": {}},
        (),
    ),
    (
        "the claim the scheduler made for an extended resource",
        {"spec": {"containers": [{"name": "ctr"}]},
         "status": {"extendedResourceClaimStatus": {"resourceClaimName": "pod-extended-resources-x",
                                                    "requestMappings": []}}},
        ("pod-extended-resources-x",),
    ),
    (
        "both kinds, junk entries skipped",
        {"spec": {"resourceClaims": [{"name": "a", "resourceClaimName": "shared"}, "junk",
                                     {"name": "b", "resourceClaimTemplateName": "t"}]},
         "status": {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "pod-b-xyz12"}]}},
        ("shared", "pod-b-xyz12"),
    ),
]


@pytest.mark.parametrize(("case", "pod", "names"), PODS, ids=[p[0] for p in PODS])
def test_pod_claim_names(case: str, pod: dict[str, Any], names: tuple[str, ...]) -> None:
    assert dra_claims.pod_claim_names(pod) == names


def test_extended_resource_served_by_a_claim_is_not_a_device_plugin_request() -> None:
    """A pod asking `nvidia.com/gpu: 2` in ctr and 1 in sidecar-less ctr2; the scheduler's claim serves ctr's."""
    pod = {"status": {"extendedResourceClaimStatus": {
        "resourceClaimName": "pod-extended-resources-x",
        "requestMappings": [{"containerName": "ctr", "resourceName": "nvidia.com/gpu",
                             "requestName": "container-0-request-0"}]}}}
    containers = [ContainerRequest("ctr", "app", {"nvidia.com/gpu": 2.0}),
                  ContainerRequest("ctr2", "app", {"nvidia.com/gpu": 1.0}),
                  ContainerRequest("init", "init", {"nvidia.com/gpu": 1.0})]
    served = dra_claims.claim_served_resources(pod)
    assert served == {("ctr", "nvidia.com/gpu")}
    assert dra_claims.device_plugin_request(containers, served) == {"nvidia.com/gpu": 1.0}
    assert dra_claims.device_plugin_request(containers, frozenset()) == {"nvidia.com/gpu": 3.0}
    assert dra_claims.claim_served_resources({"status": {}}) == frozenset()


# ---- Sharing in time ----

HOUR = (0.0, 3600.0)

# (case, consumers {pod: [from, to)}, claim allocated, share, {pod: share-seconds}, unconsumed share-seconds,
#  unconsumed seconds, held seconds)
SPLITS = [
    (
        "one consumer all hour",
        {"p": (0, 3600)}, [(0, 3600)], 1.0, {"p": 3600}, 0, 0, 3600,
    ),
    (
        # team-a/pod1 [0, 30 min), team-b/pod2 [20 min, 60 min): alone 1200 s, together 600 s at 1/2
        "a claim shared by two pods of two teams, partial overlap",
        {"team-a/pod1": (0, 1800), "team-b/pod2": (1200, 3600)}, [(0, 3600)], 1.0,
        {"team-a/pod1": 1200 + 300, "team-b/pod2": 300 + 1800}, 0, 0, 3600,
    ),
    (
        # a 3g.40gb device (3/7): the pod holds 15 min..45 min, the claim alone the other 30 min
        "allocated with no consumer for part of the hour",
        {"p": (900, 2700)}, [(0, 3600)], 3 / 7, {"p": 3 / 7 * 1800}, 3 / 7 * 1800, 1800, 3600,
    ),
    (
        # three pods: [0,1200) a; [1200,2400) a,b,c at 1/3; [2400,3000) b,c at 1/2; [3000,3600) nobody
        "three consumers, then none",
        {"a": (0, 2400), "b": (1200, 3000), "c": (1200, 3000)}, [(0, 3600)], 1.0,
        {"a": 1200 + 400, "b": 400 + 300, "c": 400 + 300}, 600, 600, 3600,
    ),
    (
        # the claim was first seen allocated at 10 min; its pod ran from 0: the pod held it from 0
        "a consumer before the claim was seen allocated still holds it",
        {"p": (0, 1800)}, [(600, 3600)], 1.0, {"p": 1800}, 1800, 1800, 3600,
    ),
    (
        "allocated twice within the hour, no consumer",
        {}, [(0, 600), (1800, 2400), (2100, 3000)], 1 / 4, {}, 1 / 4 * 1800, 1800, 1800,
    ),
    (
        "intervals outside the bucket count nothing",
        {"early": (-600, 0), "late": (3600, 4000)}, [(-100, 0)], 1.0, {"early": 0, "late": 0}, 0, 0, 0,
    ),
]


@pytest.mark.parametrize(
    ("case", "consumers", "allocated", "share", "expected", "unconsumed", "idle_seconds", "held_seconds"),
    SPLITS, ids=[s[0] for s in SPLITS],
)
def test_split_claim(case: str, consumers: dict[str, tuple[float, float]], allocated: list[tuple[float, float]],
                     share: float, expected: dict[str, float], unconsumed: float, idle_seconds: float,
                     held_seconds: float) -> None:
    split = dra_claims.split_claim(consumers, allocated, HOUR, share)
    assert split.consumers == {k: pytest.approx(v, abs=1e-9) for k, v in expected.items()}
    assert split.unconsumed == pytest.approx(unconsumed, abs=1e-9)
    assert split.unconsumed_seconds == pytest.approx(idle_seconds, abs=1e-9)
    assert split.held_seconds == pytest.approx(held_seconds, abs=1e-9)
    # no double counting: the consumers + the claim = the device's share x the seconds it was held
    assert split.total == pytest.approx(share * held_seconds, abs=1e-9)


# ---- Free devices ----

# (case, node, held device names, free whole GPUs, free MIG by profile, free equivalents)
FREE = [
    ("nothing held on the GB200 tray", "gb200-tray-07", [], 4, {}, 4.0),
    ("two of four whole GPUs held", "gb200-tray-07", ["gpu-0", "gpu-3"], 2, {}, 2.0),
    # #719 node: free, the GPU counts once (whole), its MIG devices are free too
    ("MIG node publishing the GPU whole, nothing held", AKS_MIG_NODE, [], 1,
     {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, 1.0),
    # one 1g held: the GPU is no longer free whole; 3g + 2g + 1g = 6/7 free
    ("a MIG device held: the GPU is not free whole", AKS_MIG_NODE, ["gpu-0-mig-1g10gb-19-0"], 0,
     {"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1}, 6 / 7),
    ("the GPU held whole: none of its MIG devices is free", AKS_MIG_NODE, ["gpu-0"], 0, {}, 0.0),
    # A30: GPU 0 whole free (1) + GPU 1: 1g + 2g free of 4 slices, one 1g held -> 3/4
    ("A30: one whole GPU free, MIG GPU partly held", A30_NODE, ["gpu-1-mig-1g6gb-14-0"], 1,
     {"1g.6gb": 1, "2g.12gb": 1}, 1 + 3 / 4),
    ("H100 MIG only, 3g.40gb held", H100_NODE, ["gpu-0-mig-3g40gb-9-4"], 0, {"1g.10gb": 2, "2g.20gb": 1}, 4 / 7),
]


@pytest.mark.parametrize(("case", "node", "held", "whole", "mig", "equivalents"), FREE, ids=[f[0] for f in FREE])
def test_free_devices(fleet: dra.DraInventory, case: str, node: str, held: list[str], whole: int,
                      mig: dict[str, int], equivalents: float) -> None:
    pool = node
    free = dra.free_devices(fleet.nodes[node], {DeviceKey("gpu.nvidia.com", pool, name) for name in held})
    assert free.whole_gpus == whole
    assert free.mig_by_profile() == mig
    assert free.gpus == pytest.approx(equivalents, abs=1e-9)


def test_dynamic_mig_placements_never_free_more_than_the_gpu() -> None:
    """Dynamic MIG publishes every possible placement (no uuid); they exclude each other, so a GPU with a
    3g held offers at most 4/7 however many 1g and 2g placements are listed."""
    parent, h100 = "GPU-d0000000-0000-4000-8000-000000000000", "NVIDIA H100 80GB HBM3"
    placements = [_mig(f"gpu-0-mig-1g10gb-19-{i}", None, parent, "1g.10gb", h100) for i in range(7)]
    placements += [_mig(f"gpu-0-mig-2g20gb-14-{i}", None, parent, "2g.20gb", h100) for i in (0, 2, 4)]
    placements += [_mig("gpu-0-mig-3g40gb-9-4", None, parent, "3g.40gb", h100), _gpu("gpu-0", parent, h100)]
    node = dra.read_slices([_slice("dyn", placements)], DRIVERS).nodes["dyn"]
    assert node.gpu.physical_gpus == 1
    free = dra.free_devices(node, {DeviceKey("gpu.nvidia.com", "dyn", "gpu-0-mig-3g40gb-9-4")})
    assert free.whole_gpus == 0
    assert free.gpus == pytest.approx(4 / 7, abs=1e-9)


# ---- A DRA node in the node rules ----


def test_a_dra_node_is_never_zero_allocatable_and_has_no_device_plugin_units(fleet: dra.DraInventory) -> None:
    node = fleet.nodes[A30_NODE].gpu
    assert gpus.is_zero_allocatable({}, node.sharing) is False
    assert gpus.is_zero_allocatable({}) is True  # the same allocatable on a device-plugin node
    assert node.unit_share(gpus.NVIDIA_GPU) is None
    assert node.unit_share("nvidia.com/mig-1g.6gb") is None
