"""The HAMi rules (apps/inventory/gpus/hami.py): every HAMi row of ledger.md "GPUs handed out by claims
(DRA) and by fractions (HAMi)", as tables with hand-computed expectations.

Annotation values restate real ones (Project-HAMi/HAMi): the protocol doc's node register and two-container
pod (docs/develop/protocol.md), the GTX 1050 node of #1565 (both encodings in one log), the H20-3e nodes of
#1520 (JSON) and #1422 (devcore 500, MemoryScaling 1.8, MIG mode), memory-only pods (#1417, #1106), empty
container entries (#991), a MIG-mode device suffix (#1043).
"""

from __future__ import annotations

from typing import Any

import pytest

from apps.inventory import gpus
from apps.inventory.gpus import hami
from apps.inventory.gpus.hami import ShareRule, Tenancy

V100_A = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
V100_B = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
GTX_0 = "GPU-c68a7b57-2e7c-82e7-5544-ba780116e140"
GTX_1 = "GPU-331e028c-15b8-e878-7c68-0c2d231b0932"
H20_UUIDS = [
    "GPU-40c0923a-6172-5f3c-d299-4f6eaf218ad5", "GPU-22e5bae0-3938-7cc7-cab3-3f2b91e20774",
    "GPU-edb2e09b-6ea4-8d02-9bf9-ab6a1bb06943", "GPU-c53c0221-f097-5b48-427f-1a4f0f0ab91d",
    "GPU-efc45a1c-c634-04ed-396a-2984531a62fc", "GPU-9518f90b-6b41-872c-242e-5863bd6c1150",
    "GPU-c912dac5-bd93-2bd0-57ea-704bbbc13464", "GPU-c6a9ed1a-e4f8-f17b-845b-7c76ba095a82",
]
A100_MIG_MODE = "GPU-30f90f49-43ab-0a78-bf5c-93ed41ef2da2"

# docs/develop/protocol.md: two V100 32GB, comma encoding, 7 fields
REGISTER_V100 = (f"{V100_A},10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
                 f"{V100_B},10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:")
# #1565: the same node, comma encoding with index and mode (9 fields) and the JSON list the log prints
REGISTER_GTX_COMMA = (f"{GTX_0},10,4096,100,NVIDIA-NVIDIA GeForce GTX 1050,0,true,0,hami-core:"
                      f"{GTX_1},10,4096,100,NVIDIA-NVIDIA GeForce GTX 1050,0,true,1,hami-core:")
REGISTER_GTX_JSON = (
    f'[{{"id":"{GTX_0}","count":10,"devmem":4096,"devcore":100,"type":"NVIDIA-NVIDIA GeForce GTX 1050",'
    f'"mode":"hami-core","health":true}},{{"id":"{GTX_1}","index":1,"count":10,"devmem":4096,"devcore":100,'
    f'"type":"NVIDIA-NVIDIA GeForce GTX 1050","mode":"hami-core","health":true}}]'
)
# #1520: JSON, zero values omitted (the first device has no numa); the excerpt's first two devices
REGISTER_H20_JSON = (
    '[{"id":"GPU-598af47f-7434-6494-4de9-a80152db8b4c","index":2,"count":10,"devmem":143771,"devcore":100,'
    '"type":"NVIDIA-NVIDIA H20-3e","mode":"hami-core","health":true,"devicepairscore":{}},'
    '{"id":"GPU-3d8e41ef-48bf-f981-f119-e850eafb2e4a","index":3,"count":10,"devmem":143771,"devcore":100,'
    '"type":"NVIDIA-NVIDIA H20-3e","numa":1,"mode":"hami-core","health":true,"devicepairscore":{}}]'
)
# #1422: 8 x H20-3e, devcore 500 (deviceCoreScaling 5), devmem 258787 (MemoryScaling 1.8), MIG mode
REGISTER_H20_SCALED = "".join(
    f"{uuid},10,258787,500,NVIDIA-NVIDIA H20-3e,0,true,{(i + 1) % 8},mig:" for i, uuid in enumerate(H20_UUIDS)
)
# #1043's A100-PCIE-40GB (its series' modelName), registered at 40960 MiB (illustrative)
REGISTER_A100 = f"{A100_MIG_MODE},10,40960,100,NVIDIA-NVIDIA A100-PCIE-40GB,0,true:"


# ---- The node's GPUs ----

# (case, annotation, [(uuid, count, memory MiB, cores, healthy, index, mode)], physical GPUs, model, warnings)
REGISTERS = [
    ("comma, 7 fields (protocol doc)", REGISTER_V100,
     [(V100_A, 10, 32768, 100, True, None, ""), (V100_B, 10, 32768, 100, True, None, "")],
     2, "Tesla-V100-PCIE-32GB", 0),
    ("comma, 9 fields with index and mode (#1565)", REGISTER_GTX_COMMA,
     [(GTX_0, 10, 4096, 100, True, 0, "hami-core"), (GTX_1, 10, 4096, 100, True, 1, "hami-core")],
     2, "NVIDIA-GeForce-GTX-1050", 0),
    ("JSON, index 0 omitted (#1565)", REGISTER_GTX_JSON,
     [(GTX_0, 10, 4096, 100, True, 0, "hami-core"), (GTX_1, 10, 4096, 100, True, 1, "hami-core")],
     2, "NVIDIA-GeForce-GTX-1050", 0),
    ("JSON, numa omitted, extra keys (#1520)", REGISTER_H20_JSON,
     [("GPU-598af47f-7434-6494-4de9-a80152db8b4c", 10, 143771, 100, True, 2, "hami-core"),
      ("GPU-3d8e41ef-48bf-f981-f119-e850eafb2e4a", 10, 143771, 100, True, 3, "hami-core")],
     2, "NVIDIA-H20-3e", 0),
    ("comma, scaled devcore 500 and devmem, 8 GPUs (#1422): 8 physical, not capacity's 80 vGPUs",
     REGISTER_H20_SCALED,
     [(u, 10, 258787, 500, True, (i + 1) % 8, "mig") for i, u in enumerate(H20_UUIDS)],
     8, "NVIDIA-H20-3e", 0),
    ("JSON with zero devmem omitted, unhealthy", f'[{{"id":"{V100_A}","count":10,"type":"Tesla T4","health":false}}]',
     [(V100_A, 10, 0, 0, False, 0, "")], 1, "Tesla-T4", 0),
    ("a GPU registered twice counts once", REGISTER_V100 + f"{V100_A},10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:",
     [(V100_A, 10, 32768, 100, True, None, ""), (V100_B, 10, 32768, 100, True, None, "")],
     2, "Tesla-V100-PCIE-32GB", 1),
    ("junk entries skipped, the good one kept",
     "not-a-uuid,10,1,1,x,0,true:GPU-1,ten,1,1,x,0,true:short,1:"
     f"{V100_B},10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:",
     [(V100_B, 10, 32768, 100, True, None, "")], 1, "Tesla-V100-PCIE-32GB", 3),
    ("not JSON", "[{", [], 0, "", 1),
    ("JSON, not a list", '{"id": "GPU-1"}', [], 0, "", 1),
    ("JSON list of junk", '["GPU-1", 7, {"id": "GPU-2a", "devmem": -1}]', [], 0, "", 2),
    ("empty", "", [], 0, "", 0),
]


@pytest.mark.parametrize(("case", "value", "registered", "physical", "model", "warnings"), REGISTERS,
                         ids=[r[0] for r in REGISTERS])
def test_register(case: str, value: str, registered: list[tuple[Any, ...]], physical: int, model: str,
                  warnings: int) -> None:
    register = hami.parse_register(value)
    assert [(g.uuid, g.count, g.memory_mib, g.cores, g.healthy, g.index, g.mode) for g in register.gpus] == registered
    node = register.gpu_node()
    assert (node.physical_gpus, node.gpu_model, node.sharing) == (physical, model, gpus.HAMI_FRACTIONS)
    assert len(register.warnings) == warnings


def test_both_encodings_of_one_node_read_alike() -> None:
    assert hami.parse_register(REGISTER_GTX_COMMA) == hami.parse_register(REGISTER_GTX_JSON)


# The GPU model must be GPU Feature Discovery's product form, the price key of device-plugin nodes.
MODELS = [
    ("NVIDIA-NVIDIA A100-PCIE-40GB", "NVIDIA-A100-PCIE-40GB"),  # older HAMi: always prefixed
    ("NVIDIA-NVIDIA GeForce GTX 1050", "NVIDIA-GeForce-GTX-1050"),
    ("NVIDIA-NVIDIA H20-3e", "NVIDIA-H20-3e"),
    ("NVIDIA-Tesla V100-PCIE-32GB", "Tesla-V100-PCIE-32GB"),  # NVML's name lacks NVIDIA: HAMi prefixed it
    ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),  # newer HAMi: NVML's name as is
]


@pytest.mark.parametrize(("device_type", "model"), MODELS)
def test_model(device_type: str, model: str) -> None:
    assert hami.hami_model(device_type) == model


# ---- What a pod holds ----

# (case, annotation, [(container, uuid, mig, MiB, cores)], warnings)
ALLOCATED = [
    ("two containers on one GPU, 3000 and 5000 MiB (protocol doc)",
     f"{V100_B},NVIDIA,3000,0:;{V100_B},NVIDIA,5000,0:;",
     [(0, V100_B, "", 3000, 0), (1, V100_B, "", 5000, 0)], 0),
    ("memory-only (#1417)", "GPU-c15bf6bc-3faf-3140-4788-0e1dcb7af8c2,NVIDIA,5000,0:;",
     [(0, "GPU-c15bf6bc-3faf-3140-4788-0e1dcb7af8c2", "", 5000, 0)], 0),
    ("empty container entries after (#991)",
     "GPU-0aa6b97c-d386-26ba-a94a-b9d27c2e3a71,NVIDIA,1000,0:;;,,0,0:;,,0,0:;,,0,0:;",
     [(0, "GPU-0aa6b97c-d386-26ba-a94a-b9d27c2e3a71", "", 1000, 0)], 0),
    ("empty container entries before (#991)", ";GPU-0aa6b97c-d386-26ba-a94a-b9d27c2e3a71,NVIDIA,1000,0:;;;;",
     [(1, "GPU-0aa6b97c-d386-26ba-a94a-b9d27c2e3a71", "", 1000, 0)], 0),
    ("MIG mode: the UUID's [1-0] suffix (#1043)", f"{A100_MIG_MODE}[1-0],NVIDIA,10240,45:;",
     [(0, A100_MIG_MODE, "1-0", 10240, 45)], 0),
    ("two GPUs in one container", f"{V100_A},NVIDIA,16384,50:{V100_B},NVIDIA,16384,50:;",
     [(0, V100_A, "", 16384, 50), (0, V100_B, "", 16384, 50)], 0),
    ("emptied to-allocate form", ";", [], 0),
    ("no trailing separators", f"{V100_A},NVIDIA,1000,10", [(0, V100_A, "", 1000, 10)], 0),
    # hostile tenant annotations: warned about, never raised, never counted twice
    ("a device twice in one container counts once", f"{V100_A},NVIDIA,1000,10:{V100_A},NVIDIA,1000,10:;",
     [(0, V100_A, "", 1000, 10)], 1),
    ("cores past 100 count as 100", f"{V100_A},NVIDIA,1000,250:;", [(0, V100_A, "", 1000, 100)], 1),
    ("negative and non-numeric amounts", f"{V100_A},NVIDIA,-5,0:{V100_B},NVIDIA,lots,0:;", [], 2),
    # `;` ends a container: four junk entries, four warnings
    ("not a GPU UUID", "'; DROP TABLE x; --,NVIDIA,1,1:<script>,NVIDIA,1,1:;", [], 4),
    ("wrong field count", f"{V100_A},NVIDIA,1000:{V100_B}:;garbage;", [], 3),
    ("a UUID with a broken suffix", f"{V100_A}[[1],NVIDIA,1000,0:;", [], 1),
]


@pytest.mark.parametrize(("case", "value", "devices", "warnings"), ALLOCATED, ids=[a[0] for a in ALLOCATED])
def test_allocated(case: str, value: str, devices: list[tuple[Any, ...]], warnings: int) -> None:
    parsed = hami.parse_allocated(value)
    assert [(d.container, d.uuid, d.mig, d.memory_mib, d.cores) for d in parsed.devices] == devices
    assert len(parsed.warnings) == warnings


# ---- Shares ----

# (case, register, annotation, rule, model memory MiB, {GPU: share}, warnings)
SHARES = [
    ("memory-only: 1024 of 4096 MiB is a quarter, not a whole GPU", REGISTER_GTX_COMMA,
     f"{GTX_0},NVIDIA,1024,0:;", ShareRule.CORES, None, {GTX_0: 0.25}, 0),
    ("memory-only under the max rule: still a quarter", REGISTER_GTX_COMMA,
     f"{GTX_0},NVIDIA,1024,0:;", ShareRule.MAX, None, {GTX_0: 0.25}, 0),
    ("two containers on one V100: (3000 + 5000) / 32768", REGISTER_V100,
     f"{V100_B},NVIDIA,3000,0:;{V100_B},NVIDIA,5000,0:;", ShareRule.CORES, None, {V100_B: 8000 / 32768}, 0),
    ("45 % cores, 10240 of 40960 MiB: cores rule 0.45", REGISTER_A100,
     f"{A100_MIG_MODE}[1-0],NVIDIA,10240,45:;", ShareRule.CORES, None, {A100_MIG_MODE: 0.45}, 0),
    ("memory rule 10240 / 40960", REGISTER_A100,
     f"{A100_MIG_MODE}[1-0],NVIDIA,10240,45:;", ShareRule.MEMORY, None, {A100_MIG_MODE: 0.25}, 0),
    ("max rule: the larger, 0.45", REGISTER_A100,
     f"{A100_MIG_MODE}[1-0],NVIDIA,10240,45:;", ShareRule.MAX, None, {A100_MIG_MODE: 0.45}, 0),
    ("30 % cores with 26214 MiB (80 % of 32768), max rule: the memory", REGISTER_V100,
     f"{V100_A},NVIDIA,26214,30:;", ShareRule.MAX, None, {V100_A: 26214 / 32768}, 0),
    ("scaled memory (#1422): 25878 of devmem 258787 under the memory rule", REGISTER_H20_SCALED,
     f"{H20_UUIDS[5]},NVIDIA,25878,0:;", ShareRule.MEMORY, None, {H20_UUIDS[5]: 25878 / 258787}, 0),
    ("register without devmem: the model's memory (GFD label) stands in",
     f'[{{"id":"{V100_A}","count":10,"type":"Tesla T4"}}]', f"{V100_A},NVIDIA,4096,0:;", ShareRule.CORES, 16384,
     {V100_A: 0.25}, 0),
    ("register without devmem and no model memory: memory share unknown, not counted",
     f'[{{"id":"{V100_A}","count":10,"type":"Tesla T4"}}]', f"{V100_A},NVIDIA,4096,0:;", ShareRule.CORES, None,
     {}, 1),
    ("memory rule with memory unknown falls back to cores",
     f'[{{"id":"{V100_A}","count":10,"type":"Tesla T4"}}]', f"{V100_A},NVIDIA,4096,20:;", ShareRule.MEMORY, None,
     {V100_A: 0.2}, 0),
    ("a GPU the node did not register: not counted", REGISTER_V100,
     f"{GTX_0},NVIDIA,1024,0:;{V100_A},NVIDIA,8192,0:;", ShareRule.CORES, None, {V100_A: 0.25}, 1),
    ("a device asking nothing holds nothing", REGISTER_V100, f"{V100_A},NVIDIA,0,0:;", ShareRule.CORES, None,
     {V100_A: 0.0}, 0),
]


@pytest.mark.parametrize(("case", "register", "value", "rule", "model_memory", "shares", "warnings"), SHARES,
                         ids=[s[0] for s in SHARES])
def test_pod_shares(case: str, register: str, value: str, rule: ShareRule, model_memory: int | None,
                    shares: dict[str, float], warnings: int) -> None:
    got = hami.pod_shares(hami.parse_allocated(value).devices, hami.parse_register(register), rule, model_memory)
    assert got.shares == {k: pytest.approx(v, abs=1e-12) for k, v in shares.items()}
    assert len(got.warnings) == warnings


# ---- Oversubscription ----

HOUR = (0.0, 3600.0)


def _tenants_at(register: str, annotations: dict[str, str], held: dict[str, tuple[float, float]]) -> list[Tenancy[str]]:
    """Tenancies from pods' annotations, through the rules (parse, share, one per pod and GPU)."""
    node = hami.parse_register(register)
    out = []
    for pod, value in annotations.items():
        for gpu, share in hami.pod_shares(hami.parse_allocated(value).devices, node, ShareRule.CORES).shares.items():
            out.append(Tenancy(pod, gpu, share, held[pod]))
    return out


def test_three_tenants_at_half_the_cores_are_scaled_to_a_third() -> None:
    annotations = dict.fromkeys(("team-a/p1", "team-b/p2", "team-c/p3"), f"{V100_A},NVIDIA,8000,50:;")
    tenancies = _tenants_at(REGISTER_V100, annotations, dict.fromkeys(annotations, HOUR))
    assert sorted(t.share for t in tenancies) == [0.5, 0.5, 0.5]
    scaled = hami.scale_oversubscribed(tenancies, HOUR)
    # 1.5 GPUs on one: each holds 0.5 / 1.5 = 1/3 of the hour's 3600 s
    assert scaled.share_seconds == {(p, V100_A): pytest.approx(1200.0, abs=1e-9) for p in annotations}
    assert scaled.oversubscribed == {V100_A: 3600.0}
    assert scaled.peak == {V100_A: 1.5}


# (case, tenancies (tenant, gpu, share, held), {(tenant, gpu): share-seconds}, oversubscribed seconds)
SCALING = [
    (
        # [0, 1800): a + b = 1.0, not over; [1800, 3600): a + b + c = 1.5, each scaled to 1/3
        "a third tenant overlaps only the second half",
        [("a", "G", 0.5, (0, 3600)), ("b", "G", 0.5, (0, 3600)), ("c", "G", 0.5, (1800, 3600))],
        {("a", "G"): 900 + 600, ("b", "G"): 900 + 600, ("c", "G"): 600}, {"G": 1800},
    ),
    (
        "shares within 1 are unchanged",
        [("a", "G", 0.3, (0, 3600)), ("b", "G", 0.3, (600, 1200))],
        {("a", "G"): 0.3 * 3600, ("b", "G"): 0.3 * 600}, {},
    ),
    (
        # devcore 500 lets five tenants take 100 % each: 5 GPUs' worth on one, each scaled to 1/5
        "five tenants at 100 % on a devcore-500 GPU (#1422)",
        [(f"t{i}", "H", 1.0, (0, 3600)) for i in range(5)],
        {(f"t{i}", "H"): 720 for i in range(5)}, {"H": 3600},
    ),
    (
        "two GPUs scaled apart; a tenant on both",
        [("a", "G", 0.75, (0, 3600)), ("b", "G", 0.75, (0, 1200)), ("a", "H", 0.5, (0, 3600)),
         ("c", "H", 0.25, (0, 3600))],
        # G: [0,1200) 1.5 -> 0.5 each; [1200,3600) a alone 0.75
        {("a", "G"): 600 + 0.75 * 2400, ("b", "G"): 600, ("a", "H"): 1800, ("c", "H"): 900}, {"G": 1200},
    ),
    (
        "held outside the bucket: nothing",
        [("a", "G", 0.9, (-600, 0)), ("b", "G", 0.9, (3600, 4200))],
        {}, {},
    ),
]


@pytest.mark.parametrize(("case", "rows", "expected", "over"), SCALING, ids=[s[0] for s in SCALING])
def test_scale_oversubscribed(case: str, rows: list[tuple[str, str, float, tuple[float, float]]],
                              expected: dict[tuple[str, str], float], over: dict[str, float]) -> None:
    scaled = hami.scale_oversubscribed([Tenancy(*row) for row in rows], HOUR)
    assert {k: v for k, v in scaled.share_seconds.items() if v} == {
        k: pytest.approx(v, abs=1e-9) for k, v in expected.items()}
    assert scaled.oversubscribed == {k: pytest.approx(v, abs=1e-9) for k, v in over.items()}
    # no GPU is billed past its capacity
    per_gpu: dict[str, float] = {}
    for (_, gpu), seconds in scaled.share_seconds.items():
        per_gpu[gpu] = per_gpu.get(gpu, 0.0) + seconds
    assert all(total <= 3600 + 1e-9 for total in per_gpu.values())


# ---- Which nodes and pods are HAMi's ----

RENAMED = hami.HamiNames(vgpu="example.com/vgpu", cores="example.com/vcores", memory="example.com/vmem")

# (case, pod annotations, requests, names, on a HAMi node, HAMi pod)
PODS = [
    ("annotation on a HAMi node", {hami.ALLOCATED_ANNOTATION: f"{V100_A},NVIDIA,1000,0:;"}, {}, hami.HamiNames(),
     True, True),
    ("asks gpucores on a HAMi node, not bound yet", {}, {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30},
     hami.HamiNames(), True, True),
    ("a whole vGPU (nvidia.com/gpu only) on a HAMi node", {}, {"nvidia.com/gpu": 1}, hami.HamiNames(), True, True),
    ("a tenant's forged annotation on a device-plugin node: not obeyed",
     {hami.ALLOCATED_ANNOTATION: f"{V100_A},NVIDIA,1,0:;"}, {"nvidia.com/gpu": 1}, hami.HamiNames(), False, False),
    ("renamed resources: the names are a parameter", {}, {"example.com/vcores": 50}, RENAMED, True, True),
    ("renamed resources: the default name is no longer HAMi's", {}, {"nvidia.com/gpucores": 50}, RENAMED, True,
     False),
]


@pytest.mark.parametrize(("case", "annotations", "requests", "names", "on_node", "expected"), PODS,
                         ids=[p[0] for p in PODS])
def test_is_hami_pod(case: str, annotations: dict[str, str], requests: dict[str, float], names: hami.HamiNames,
                     on_node: bool, expected: bool) -> None:
    assert hami.is_hami_pod(annotations, requests, names, on_hami_node=on_node) is expected


def test_a_hami_node() -> None:
    assert hami.is_hami_node({hami.REGISTER_ANNOTATION: REGISTER_V100})
    assert not hami.is_hami_node({hami.REGISTER_ANNOTATION: " "})
    assert not hami.is_hami_node({"hami.io/node-handshake": "Requesting_2024.05.20 11:44:46"})
    node = hami.parse_register(REGISTER_H20_SCALED).gpu_node()
    # capacity says 80 vGPUs; the node has 8 GPUs, is never zero-allocatable, and its vGPUs are fractions
    assert node.physical_gpus == 8
    assert gpus.is_zero_allocatable({"nvidia.com/gpu": "0"}, node.sharing) is False
    assert node.unit_share(gpus.NVIDIA_GPU) is None
    assert node.unit_kind(gpus.NVIDIA_GPU) == gpus.UNIT_FRACTION
    assert gpus.unit_mode(node.unit_kind(gpus.NVIDIA_GPU)) == gpus.AllocationMode.HAMI
