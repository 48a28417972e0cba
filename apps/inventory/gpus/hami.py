"""GPUs handed out as fractions by HAMi (ledger.md "GPUs handed out by claims (DRA) and by fractions
(HAMi)"). Pure: annotation strings in, plain values out; the caller reads the settings (the share rule,
the resource names) and passes them.

On a HAMi node the device plugin advertises `nvidia.com/gpu` = GPUs x `deviceSplitCount`: vGPUs, not GPUs.
The node's GPUs are the devices HAMi registers in the node annotation `hami.io/node-nvidia-register`; what a
pod holds is in its annotation `hami.io/vgpu-devices-allocated`, per device `UUID,vendor,MiB,cores`.

For the callers (collection, ledger, capacity, findings, views):

* `is_hami_node(node annotations)`, `is_hami_pod(pod annotations, requests, names, on_hami_node=…)`: whose
  GPUs HAMi hands out (then `GpuNode.unit_share` gives no device-plugin unit there, and the node is never
  zero-allocatable).
* `parse_register(annotation)` -> `Register`: the node's physical GPUs (`Register.gpu_node()` is its
  `GpuNode`, sharing `HAMI_FRACTIONS`), their model and memory, from both encodings (comma list up to
  v2.7.x, JSON from v2.8.0).
* `parse_allocated(annotation)` -> the devices a pod's containers got; junk is warned about, never raised,
  never counted twice.
* `pod_shares(devices, register, rule)` -> the pod's share of each physical GPU (cores, memory or the larger:
  `ShareRule`, a setting).
* `scale_oversubscribed(tenancies, bucket)`: when shares on one GPU add past 1, every tenant's share scaled
  so the GPU's total is exactly 1, per stretch of time; which GPUs were oversubscribed and for how long.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

from apps.inventory.gpus.device_plugin import GpuNode
from apps.inventory.gpus.intervals import Interval, pieces
from apps.inventory.gpus.vocabulary import HAMI_FRACTIONS, compute_slices, model_from_product_name

REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
ALLOCATED_ANNOTATION = "hami.io/vgpu-devices-allocated"

# HAMi prefixes the NVML name with `NVIDIA-` when it lacks "NVIDIA" (always, in older versions:
# `NVIDIA-NVIDIA GeForce GTX 1050`); without it the name is NVML's, as GPU Feature Discovery reads it.
_TYPE_PREFIX = "NVIDIA-"
# A GPU UUID, in MIG mode followed by the MIG instance HAMi placed the container on (`GPU-…[1-0]`).
_DEVICE_UUID = re.compile(r"^(GPU-[0-9A-Fa-f-]{1,64})(?:\[([0-9A-Za-z.,-]{0,32})\])?$")
_FULL_CORES = 100
_EPS = 1e-9


@dataclass(frozen=True)
class HamiNames:
    """HAMi's resource names (renameable in its chart, so a setting)."""

    vgpu: str = "nvidia.com/gpu"
    cores: str = "nvidia.com/gpucores"
    memory: str = "nvidia.com/gpumem"
    memory_percentage: str = "nvidia.com/gpumem-percentage"
    priority: str = "nvidia.com/priority"

    @property
    def resources(self) -> tuple[str, ...]:
        """Every resource a HAMi pod asks for: none of them is a device-plugin unit."""
        return (self.vgpu, self.cores, self.memory, self.memory_percentage, self.priority)


class ShareRule(StrEnum):
    """What a fraction is worth: its cores (memory when it asks no cores), its memory, or the larger."""

    CORES = "cores"
    MEMORY = "memory"
    MAX = "max"


# ---- Which nodes and pods ----


def is_hami_node(annotations: Mapping[str, str]) -> bool:
    """A node HAMi registered GPUs on (nodes are not tenants' to annotate)."""
    return bool(str(annotations.get(REGISTER_ANNOTATION) or "").strip())


def is_hami_pod(
    annotations: Mapping[str, str], requests: Mapping[str, float], names: HamiNames, *, on_hami_node: bool
) -> bool:
    """A pod whose GPUs HAMi hands out: on a HAMi node, asking for any of HAMi's resources or carrying its
    allocation. The annotation on a pod elsewhere is a tenant's writing, not HAMi's: never obeyed."""
    if not on_hami_node:
        return False
    return ALLOCATED_ANNOTATION in annotations or any(requests.get(r) for r in names.resources)


# ---- The node's GPUs (hami.io/node-nvidia-register) ----


def hami_model(device_type: str) -> str:
    """The GPU model (price key) of a registered device's `type`, in GPU Feature Discovery's form:
    `NVIDIA-NVIDIA A100-PCIE-40GB` -> `NVIDIA-A100-PCIE-40GB`, `NVIDIA-Tesla V100-PCIE-32GB` ->
    `Tesla-V100-PCIE-32GB`, `NVIDIA H20-3e` -> `NVIDIA-H20-3e`."""
    return model_from_product_name(device_type.removeprefix(_TYPE_PREFIX))


@dataclass(frozen=True)
class RegisteredGpu:
    """One physical GPU HAMi registered on a node."""

    uuid: str
    count: int  # vGPUs it is split into
    memory_mib: int  # devmem: total MiB x deviceMemoryScaling (0: not given)
    cores: int  # devcore: 100 x deviceCoreScaling
    type: str
    healthy: bool
    index: int | None = None
    mode: str = ""

    @property
    def gpu_model(self) -> str:
        return hami_model(self.type)


@dataclass(frozen=True)
class Register:
    """A HAMi node's registered GPUs."""

    gpus: tuple[RegisteredGpu, ...]
    warnings: tuple[str, ...] = ()

    def by_uuid(self) -> dict[str, RegisteredGpu]:
        return {g.uuid: g for g in self.gpus}

    def gpu_node(self) -> GpuNode:
        """Physical GPUs = the registered devices (NOT capacity `nvidia.com/gpu`, which counts vGPUs)."""
        models = Counter(g.gpu_model for g in self.gpus)
        model = models.most_common(1)[0][0] if models else ""
        return GpuNode(model, len(self.gpus), HAMI_FRACTIONS, compute_slices(model))


def _integer(value: object) -> int | None:
    """A non-negative whole number, or None."""
    if isinstance(value, bool):
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        return None
    return number if number >= 0 else None


def _registered(fields: Mapping[str, Any], warnings: list[str]) -> RegisteredGpu | None:
    uuid = str(fields.get("id") or "").strip()
    if not _DEVICE_UUID.match(uuid):
        warnings.append(f"register: device id {uuid[:80]!r} is not a GPU UUID: ignored")
        return None
    numbers = {k: _integer(fields.get(k) or 0) for k in ("count", "devmem", "devcore")}
    if any(v is None for v in numbers.values()):
        warnings.append(f"register: device {uuid}: count/devmem/devcore not whole numbers: ignored")
        return None
    health = fields.get("health")
    index = _integer(fields["index"]) if fields.get("index") not in (None, "") else None
    return RegisteredGpu(
        uuid=uuid,
        count=numbers["count"] or 0,
        memory_mib=numbers["devmem"] or 0,
        cores=numbers["devcore"] or 0,
        type=str(fields.get("type") or ""),
        healthy=health is True or str(health).lower() == "true",
        index=index,
        mode=str(fields.get("mode") or ""),
    )


# The JSON encoding omits zero values; the comma one lists index and mode only from later versions.
_JSON_ZEROS = {"count": 0, "devmem": 0, "devcore": 0, "index": 0}
_COMMA_FIELDS = ("id", "count", "devmem", "devcore", "type", "numa", "health", "index", "mode")


def _register_entries(value: str, warnings: list[str]) -> list[Mapping[str, Any]]:
    """The devices of either encoding as field maps: a JSON list (v2.8.0+, zero values omitted) or
    `UUID,count,devmem,devcore,type,numa,health[,index,mode]` entries each ended by `:` (up to v2.7.x)."""
    if value.startswith(("[", "{")):
        try:
            parsed = json.loads(value)
        except ValueError:
            warnings.append("register: not valid JSON: no GPU read")
            return []
        if not isinstance(parsed, list):
            warnings.append("register: JSON is not a list: no GPU read")
            return []
        entries: list[Mapping[str, Any]] = [{**_JSON_ZEROS, **e} for e in parsed if isinstance(e, Mapping)]
        if len(entries) < len(parsed):
            warnings.append("register: JSON entries that are not objects ignored")
        return entries
    out: list[Mapping[str, Any]] = []
    for entry in value.split(":"):
        if not entry.strip():
            continue
        fields = entry.split(",")
        if len(fields) < 7:
            warnings.append(f"register: entry {entry[:80]!r} has {len(fields)} fields, not 7 or 9: ignored")
            continue
        out.append(dict(zip(_COMMA_FIELDS, (f.strip() for f in fields), strict=False)))
    return out


def parse_register(value: str) -> Register:
    """A node's `hami.io/node-nvidia-register` in either encoding; junk is warned about and skipped, a GPU
    registered twice counted once."""
    warnings: list[str] = []
    gpus: dict[str, RegisteredGpu] = {}
    for fields in _register_entries((value or "").strip(), warnings):
        gpu = _registered(fields, warnings)
        if gpu is None:
            continue
        if gpu.uuid in gpus:
            warnings.append(f"register: GPU {gpu.uuid} registered twice: counted once")
            continue
        gpus[gpu.uuid] = gpu
    return Register(tuple(gpus.values()), tuple(warnings))


# ---- What a pod holds (hami.io/vgpu-devices-allocated) ----


@dataclass(frozen=True)
class VgpuDevice:
    """One device of one container of a HAMi pod."""

    container: int  # position of the container's entry in the annotation
    uuid: str  # the physical GPU
    mig: str  # MIG mode: the instance in the UUID's `[...]` suffix; "" otherwise
    memory_mib: int
    cores: int  # percent of the GPU's compute, at most 100


@dataclass(frozen=True)
class PodDevices:
    devices: tuple[VgpuDevice, ...]
    warnings: tuple[str, ...] = ()


def _vgpu_device(container: int, text: str, warnings: list[str]) -> VgpuDevice | None:
    """`UUID,vendor,MiB,cores`; a container without a GPU gives an empty entry (`,,0,0`)."""
    fields = [f.strip() for f in text.split(",")]
    if len(fields) != 4:
        warnings.append(f"vgpu-devices-allocated: device {text[:80]!r} is not UUID,vendor,MiB,cores: ignored")
        return None
    uuid, _vendor, memory, cores = fields
    if not uuid and _integer(memory) == 0 and _integer(cores) == 0:
        return None
    match = _DEVICE_UUID.match(uuid)
    memory_mib, percent = _integer(memory), _integer(cores)
    if match is None or memory_mib is None or percent is None:
        warnings.append(f"vgpu-devices-allocated: device {text[:80]!r} unreadable: ignored")
        return None
    if percent > _FULL_CORES:
        warnings.append(f"vgpu-devices-allocated: {match.group(1)} asks {percent}% cores: counted as 100%")
        percent = _FULL_CORES
    return VgpuDevice(container, match.group(1), match.group(2) or "", memory_mib, percent)


def parse_allocated(value: str) -> PodDevices:
    """A pod's `hami.io/vgpu-devices-allocated`: per container an entry ended by `;`, devices in it ended by
    `:`. Only this annotation counts (`…-to-allocate` is emptied once bound). A device listed twice in one
    container counts once; junk is warned about, never raised."""
    warnings: list[str] = []
    devices: list[VgpuDevice] = []
    seen: set[tuple[int, str, str]] = set()
    for container, entry in enumerate((value or "").split(";")):
        for text in entry.split(":"):
            if not text.strip():
                continue
            device = _vgpu_device(container, text, warnings)
            if device is None:
                continue
            if (container, device.uuid, device.mig) in seen:
                warnings.append(f"vgpu-devices-allocated: {device.uuid} twice in container {container}: counted once")
                continue
            seen.add((container, device.uuid, device.mig))
            devices.append(device)
    return PodDevices(tuple(devices), tuple(warnings))


# ---- Shares ----


def device_share(device: VgpuDevice, gpu_memory_mib: int | None, rule: ShareRule) -> float | None:
    """One device's share of its GPU: cores/100 when it asks cores, else its memory / the GPU's memory (so a
    memory-only request is not a whole GPU); `rule` MEMORY prefers the memory, MAX takes the larger. None
    when the rule needs a memory nobody knows."""
    cores = device.cores / _FULL_CORES if device.cores > 0 else None
    memory = min(device.memory_mib / gpu_memory_mib, 1.0) if gpu_memory_mib else None
    if device.cores == 0 and device.memory_mib == 0:
        return 0.0
    if rule == ShareRule.MEMORY and device.memory_mib > 0:
        return memory if memory is not None else cores
    if rule == ShareRule.MAX:
        known = [s for s in (cores, memory) if s is not None]
        return max(known) if known else None
    return cores if cores is not None else memory


@dataclass(frozen=True)
class PodShares:
    shares: Mapping[str, float]  # physical GPU UUID -> the pod's share of it (summed over its containers)
    warnings: tuple[str, ...] = ()


def pod_shares(
    devices: Iterable[VgpuDevice], register: Register, rule: ShareRule, model_memory_mib: int | None = None
) -> PodShares:
    """A pod's share of each physical GPU of its node. The GPU's memory is the register's (else
    `model_memory_mib`, e.g. GFD's `nvidia.com/gpu.memory`); a device on a GPU its node did not register is
    reported, not counted (a pod's annotation cannot bill a GPU its node does not have)."""
    registered = register.by_uuid()
    shares: dict[str, float] = defaultdict(float)
    warnings: list[str] = []
    for device in devices:
        gpu = registered.get(device.uuid)
        if gpu is None:
            warnings.append(f"HAMi device {device.uuid} is not registered on the pod's node: not counted")
            continue
        share = device_share(device, gpu.memory_mib or model_memory_mib, rule)
        if share is None:
            warnings.append(f"HAMi device {device.uuid}: memory of the GPU unknown, {rule} share unknown: not counted")
            continue
        shares[device.uuid] += share
    return PodShares(dict(shares), tuple(warnings))


# ---- Oversubscription ----

T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True)
class Tenancy(Generic[T]):
    """A tenant's share of one physical GPU, held over `held` (seconds, the bucket's origin)."""

    tenant: T
    gpu: str
    share: float
    held: Interval


@dataclass(frozen=True)
class GpuTime(Generic[T]):
    """HAMi GPUs over one bucket, after scaling."""

    share_seconds: Mapping[tuple[T, str], float]  # (tenant, GPU) -> scaled share x seconds
    oversubscribed: Mapping[str, float]  # GPU -> seconds its tenants' shares added past 1
    peak: Mapping[str, float]  # GPU -> the most its shares added to (before scaling)


def scale_oversubscribed(tenancies: Iterable[Tenancy[T]], bucket: Interval) -> GpuTime[T]:
    """Per GPU and per stretch of time in which the same tenants hold: when their shares add past 1, each is
    scaled by 1/total so the GPU holds exactly 1, and those seconds are oversubscribed. Exact: no GPU is
    billed past its capacity, and a tenant overlapping only part of the bucket is scaled only then."""
    by_gpu: dict[str, list[Tenancy[T]]] = defaultdict(list)
    for tenancy in tenancies:
        by_gpu[tenancy.gpu].append(tenancy)
    share_seconds: dict[tuple[T, str], float] = defaultdict(float)
    oversubscribed: dict[str, float] = {}
    peak: dict[str, float] = {}
    for gpu, tenants in sorted(by_gpu.items()):
        over = top = 0.0
        for piece in pieces({i: [t.held] for i, t in enumerate(tenants)}, bucket):
            total = sum(tenants[i].share for i in piece.active)
            top = max(top, total)
            scale = 1.0 / total if total > 1.0 + _EPS else 1.0
            if scale < 1.0:
                over += piece.seconds
            for i in piece.active:
                share_seconds[(tenants[i].tenant, gpu)] += tenants[i].share * scale * piece.seconds
        oversubscribed[gpu] = over
        peak[gpu] = top
    return GpuTime(dict(share_seconds), {g: s for g, s in oversubscribed.items() if s > 0}, peak)


# ---- Capacity (fragmentation and placeability) ----


@dataclass(frozen=True)
class HamiCapacity:
    """A HAMi node's GPUs in physical-GPU equivalents at one instant."""

    allocatable: float  # its registered GPUs
    allocated: float  # per GPU, its tenants' shares added up, at most 1 (oversubscription is scaled away)
    whole_free: int  # GPUs with no tenant: the only ones a whole-GPU job could get
    fractions_free: Mapping[str, float]  # GPU -> the fraction its tenants leave (0 when oversubscribed)

    @property
    def free(self) -> float:
        return round(self.allocatable - self.allocated, 9)


def capacity(register: Register, shares: Mapping[str, float]) -> HamiCapacity:
    """`shares`: GPU UUID -> its running tenants' shares added up (`pod_shares` of each tenant). A GPU with any
    tenant is not free for a whole-GPU job, however small the fraction."""
    used = {g.uuid: min(max(shares.get(g.uuid, 0.0), 0.0), 1.0) for g in register.gpus}
    return HamiCapacity(
        allocatable=float(len(register.gpus)),
        allocated=round(sum(used.values()), 9),
        whole_free=sum(1 for g in register.gpus if shares.get(g.uuid, 0.0) <= _EPS),
        fractions_free={uuid: round(1.0 - u, 9) for uuid, u in sorted(used.items())},
    )
