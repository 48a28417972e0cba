"""GPUs handed out by Dynamic Resource Allocation, the published side: ResourceSlices, their devices, a DRA
node's GPUs and what no claim holds (ledger.md "GPUs handed out by claims (DRA) and by fractions (HAMi)").
The claims that hold devices are `dra_claims.py`. Pure: it reads the API's JSON objects and returns plain
values; the collector lists them and the caller reads the settings.

Input is what a LIST of `resource.k8s.io` returns, read raw (camelCase keys), of ANY served version: v1 and
v1beta2 put a device's `attributes`/`capacity` on the device, v1beta1 under `basic`. Attribute keys are
bare (`uuid`) or qualified with the driver's domain (`gpu.nvidia.com/uuid`): the same attribute.

For the callers (collection, ledger, capacity, findings, views):

* `read_slices(slices, gpu_drivers)` -> `DraInventory`: per node a `DraNode` (its `gpu` is a `GpuNode` with
  sharing `DRA_CLAIMS`: physical GPUs, model, compute slices, read like any node's) and the index of every
  device the GPU drivers publish (`DeviceKey` = driver, pool, device name), to resolve claims' results.
  `gpu_drivers` is the setting (default `DEFAULT_GPU_DRIVERS`).
* `device_share(device)`: what one device is worth, a whole GPU 1, a MIG device N / compute slices.
* `free_devices(node, held)`: published minus held, for fragmentation and placeability.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from apps.inventory.gpus.device_plugin import GpuNode
from apps.inventory.gpus.vocabulary import DRA_CLAIMS, compute_slices, model_from_product_name, profile_slices

DEFAULT_GPU_DRIVERS: tuple[str, ...] = ("gpu.nvidia.com",)

# Device types of NVIDIA's GPU driver. Others under the same driver (`vfio` passthrough) and the devices of
# `compute-domain.nvidia.com` (`channel`, `daemon`) are not GPUs a pod's work runs on.
TYPE_GPU = "gpu"
TYPE_MIG = "mig"
GPU_TYPES = (TYPE_GPU, TYPE_MIG)

_VALUE_KINDS = ("string", "int", "bool", "version")

AttributeValue = str | int | bool


class DeviceKey(NamedTuple):
    """A device as a claim's allocation result names it."""

    driver: str
    pool: str
    device: str


# ---- Devices (ResourceSlice spec.devices[]) ----


@dataclass(frozen=True)
class DraDevice:
    """One device a GPU driver publishes."""

    driver: str
    pool: str
    name: str
    type: str  # TYPE_GPU | TYPE_MIG | anything else (not a GPU)
    uuid: str  # "" when not published (dynamic MIG: the device exists once a claim is prepared)
    parent_uuid: str  # MIG: the physical GPU
    profile: str  # MIG: `<N>g.<M>gb`
    product_name: str  # as NVML reports it (`NVIDIA A100 80GB PCIe`); a MIG device carries its parent's
    memory_bytes: int | None

    @property
    def key(self) -> DeviceKey:
        return DeviceKey(self.driver, self.pool, self.name)

    @property
    def is_gpu(self) -> bool:
        return self.type in GPU_TYPES

    @property
    def physical_uuid(self) -> str:
        """The physical GPU this device is or is part of."""
        return self.parent_uuid if self.type == TYPE_MIG else self.uuid

    @property
    def physical_id(self) -> str:
        """What tells physical GPUs apart: their UUID, else (a whole GPU published without one) the device."""
        return self.physical_uuid or "/".join(self.key)

    @property
    def gpu_model(self) -> str:
        return model_from_product_name(self.product_name)


def _attribute_value(raw: object) -> AttributeValue | None:
    """A typed attribute value (`{"string": …}`, `{"int": …}`, `{"bool": …}`, `{"version": …}`)."""
    if not isinstance(raw, Mapping):
        return None
    for kind in _VALUE_KINDS:
        value = raw.get(kind)
        if isinstance(value, str | int | bool):
            return value
    return None


def _fields(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """Where a device's attributes and capacity are: under `basic` in v1beta1, on the device otherwise."""
    basic = entry.get("basic")
    return basic if isinstance(basic, Mapping) else entry


def device_attributes(entry: Mapping[str, Any], driver: str) -> dict[str, AttributeValue]:
    """A device's attributes by bare name: `gpu.nvidia.com/uuid` in a slice of driver `gpu.nvidia.com` is
    `uuid`; other domains (`resource.kubernetes.io/pciBusID`) keep their qualified name."""
    raw = _fields(entry).get("attributes")
    out: dict[str, AttributeValue] = {}
    if not isinstance(raw, Mapping):
        return out
    for key, value in raw.items():
        parsed = _attribute_value(value)
        if parsed is not None:
            out.setdefault(str(key).removeprefix(f"{driver}/"), parsed)
    return out


def quantity_bytes(value: object) -> int | None:
    """A Kubernetes quantity (`80Gi`, `81920Mi`, `4864Mi`, `1e9`) as a whole number; None when it is not one."""
    # The client library's parser knows every suffix (binary, decimal, exponent); imported here so the
    # rules do not load the Kubernetes client in processes that never read a ResourceSlice.
    from kubernetes.utils.quantity import parse_quantity

    try:
        number = Decimal(parse_quantity(str(value)))  # type: ignore[no-untyped-call]  # the client is untyped
    except (ValueError, TypeError, InvalidOperation):
        return None
    return int(number) if number.is_finite() and number >= 0 else None


def _capacity(entry: Mapping[str, Any], name: str) -> int | None:
    """A device capacity: `{"value": "80Gi"}` (v1beta1 and later) or a bare quantity (v1alpha3)."""
    capacity = _fields(entry).get("capacity")
    raw = capacity.get(name) if isinstance(capacity, Mapping) else None
    if isinstance(raw, Mapping):
        raw = raw.get("value")
    return quantity_bytes(raw) if raw is not None else None


def parse_device(entry: Mapping[str, Any], driver: str, pool: str) -> DraDevice | None:
    """One `spec.devices[]` entry of a slice of `driver`, pool `pool`; None when it has no name."""
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        return None
    attributes = device_attributes(entry, driver)

    def text(key: str) -> str:
        value = attributes.get(key)
        return value if isinstance(value, str) else ""

    return DraDevice(
        driver=driver,
        pool=pool,
        name=name,
        type=text("type"),
        uuid=text("uuid"),
        parent_uuid=text("parentUUID"),
        profile=text("profile"),
        product_name=text("productName"),
        memory_bytes=_capacity(entry, "memory"),
    )


# ---- Nodes (ResourceSlices) ----


@dataclass(frozen=True)
class DraNode:
    """A node's GPUs as its GPU drivers' slices publish them."""

    name: str
    gpu: GpuNode  # physical GPUs, model, compute slices; sharing DRA_CLAIMS
    devices: tuple[DraDevice, ...]  # its GPU devices (whole GPUs and MIG devices), by name
    physical_uuids: frozenset[str]

    def whole_device(self, uuid: str) -> DraDevice | None:
        """The GPU `uuid` as a published whole device (a MIG device's parent, when published)."""
        return next((d for d in self.devices if d.type == TYPE_GPU and d.uuid == uuid), None)


@dataclass(frozen=True)
class DraInventory:
    """Every GPU driver's devices of a cluster, by node and by key."""

    nodes: Mapping[str, DraNode]
    devices: Mapping[DeviceKey, DraDevice]  # all devices of the GPU drivers, GPUs or not
    nodes_by_pool: Mapping[tuple[str, str], str]  # (driver, pool) -> node
    warnings: tuple[str, ...] = ()

    def node_of(self, key: DeviceKey) -> str:
        return self.nodes_by_pool.get((key.driver, key.pool), "")

    def parent_of(self, device: DraDevice) -> DraDevice | None:
        """A MIG device's parent GPU, when its node publishes it whole."""
        node = self.nodes.get(self.node_of(device.key))
        return node.whole_device(device.parent_uuid) if node and device.parent_uuid else None


def _latest_slices(
    slices: Iterable[Mapping[str, Any]], gpu_drivers: Collection[str]
) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(driver, pool, spec) of the GPU drivers' slices, only those of each pool's highest generation."""
    kept: list[tuple[str, str, int, Mapping[str, Any]]] = []
    for item in slices:
        spec = item.get("spec") if isinstance(item, Mapping) else None
        if not isinstance(spec, Mapping) or spec.get("driver") not in gpu_drivers:
            continue
        pool = spec.get("pool")
        pool = pool if isinstance(pool, Mapping) else {}
        try:
            generation = int(pool.get("generation") or 0)
        except (TypeError, ValueError):
            generation = 0
        kept.append((str(spec["driver"]), str(pool.get("name") or ""), generation, spec))
    latest: dict[tuple[str, str], int] = {}
    for driver, pool_name, generation, _ in kept:
        latest[(driver, pool_name)] = max(generation, latest.get((driver, pool_name), generation))
    return [(d, p, spec) for d, p, g, spec in kept if g == latest[(d, p)]]


def read_slices(slices: Iterable[Mapping[str, Any]], gpu_drivers: Collection[str]) -> DraInventory:
    """1. Keep the GPU drivers' slices of each pool's highest `pool.generation`. 2. Index their devices.
    3. Per node (`spec.nodeName`): physical GPUs = `type=gpu` devices + distinct `parentUUID`s of MIG
    devices whose parent is not itself published (a node publishing both counts each GPU once); GPU model =
    `productName` with spaces as `-`."""
    warnings: list[str] = []
    devices: dict[DeviceKey, DraDevice] = {}
    by_node: dict[str, list[DraDevice]] = {}
    nodes_by_pool: dict[tuple[str, str], str] = {}
    for driver, pool, spec in _latest_slices(slices, gpu_drivers):
        node = spec.get("nodeName")
        if not isinstance(node, str) or not node:
            warnings.append(f"ResourceSlice of {driver} pool {pool!r} is not tied to one node: not counted")
            continue
        nodes_by_pool[(driver, pool)] = node
        for entry in spec.get("devices") or []:
            device = parse_device(entry, driver, pool) if isinstance(entry, Mapping) else None
            if device is None:
                warnings.append(f"ResourceSlice of {driver} pool {pool!r}: a device without a name, ignored")
                continue
            if device.key in devices:
                warnings.append(f"{driver} pool {pool!r} publishes device {device.name!r} twice: counted once")
                continue
            devices[device.key] = device
            if not device.type:
                warnings.append(f"{driver} device {device.name!r} on {node} has no `type` attribute: not a GPU")
            if device.is_gpu:
                by_node.setdefault(node, []).append(device)
    nodes = {name: _node(name, published, warnings) for name, published in sorted(by_node.items())}
    return DraInventory(nodes, devices, nodes_by_pool, tuple(warnings))


def _node(name: str, devices: list[DraDevice], warnings: list[str]) -> DraNode:
    physical = set()
    for d in devices:
        if d.type == TYPE_MIG and not d.parent_uuid:
            warnings.append(f"MIG device {d.name!r} on {name} has no parentUUID: its GPU is not counted")
        else:
            physical.add(d.physical_id)
    products = Counter(d.product_name for d in devices if d.product_name)
    product = products.most_common(1)[0][0] if products else ""
    if len(products) > 1:
        warnings.append(f"node {name} publishes several GPU models {sorted(products)}: priced as {product!r}")
    model = model_from_product_name(product)
    gpu = GpuNode(model, len(physical), DRA_CLAIMS, compute_slices(model))
    return DraNode(name, gpu, tuple(sorted(devices, key=lambda d: d.name)), frozenset(physical))


# ---- What a device is worth ----


def device_share(device: DraDevice, parent: DraDevice | None = None, *, mig_by_memory: bool = False) -> float | None:
    """A GPU device's share of one physical GPU (the ledger's table): a whole GPU 1; a MIG device of
    profile `<N>g.<M>gb` N / compute slices of its model (7, or 4 on A30), or by memory when `mig_by_memory`
    and its `parent` GPU is published with its memory; None when a MIG profile cannot be read."""
    if device.type == TYPE_GPU:
        return 1.0
    if mig_by_memory and device.memory_bytes and parent is not None and parent.memory_bytes:
        return min(device.memory_bytes / parent.memory_bytes, 1.0)
    slices = profile_slices(device.profile)
    return slices / compute_slices(device.gpu_model) if slices else None


# ---- Free devices ----


@dataclass(frozen=True)
class DraFree:
    """What no claim holds on a DRA node."""

    whole: tuple[DraDevice, ...]  # whole GPUs with nothing of them held
    mig: tuple[DraDevice, ...]  # MIG devices not held, on GPUs not held whole
    gpus: float  # physical-GPU equivalents free

    @property
    def whole_gpus(self) -> int:
        return len(self.whole)

    def mig_by_profile(self) -> dict[str, int]:
        return dict(sorted(Counter(d.profile for d in self.mig).items()))


def free_devices(node: DraNode, held: Collection[DeviceKey]) -> DraFree:
    """Published minus held. A GPU with any MIG device held is not a free whole GPU; a MIG device of a GPU
    held whole is not free. Equivalents per GPU: 1 when nothing of it is held and it is published whole,
    else its free MIG devices' shares, never more than what its held devices leave."""
    held_devices = [d for d in node.devices if d.key in held]
    touched = {d.physical_id for d in held_devices}
    held_whole = {d.physical_id for d in held_devices if d.type == TYPE_GPU}
    whole = tuple(d for d in node.devices if d.type == TYPE_GPU and d.physical_id not in touched)
    mig = tuple(d for d in node.devices if d.type == TYPE_MIG and d.key not in held and d.parent_uuid not in held_whole)
    equivalents = float(len(whole))
    for gpu in node.physical_uuids - {d.physical_id for d in whole} - held_whole:
        used = sum(device_share(d) or 0.0 for d in held_devices if d.parent_uuid == gpu)
        free = sum(device_share(d) or 0.0 for d in mig if d.parent_uuid == gpu)
        equivalents += max(min(free, 1.0 - used), 0.0)
    return DraFree(whole, mig, round(equivalents, 9))


# ---- Capacity (fragmentation and placeability) ----


@dataclass(frozen=True)
class DraCapacity:
    """A DRA node's GPUs in physical-GPU equivalents, for fragmentation: what it offers, what claims hold, what
    is free (`free_devices`), and the whole GPUs a whole-GPU job could still get."""

    allocatable: float
    allocated: float
    free: DraFree

    @property
    def whole_free(self) -> int:
        return self.free.whole_gpus


def capacity(node: DraNode, held: Collection[DeviceKey]) -> DraCapacity:
    """Per physical GPU: allocatable = 1 when it is published whole, else its MIG devices' shares (at most 1:
    dynamic MIG lists placements that exclude each other); allocated = 1 when a claim holds it whole, else its
    held MIG devices' shares (at most 1); free = `free_devices` (a GPU with any MIG device held is not free
    whole)."""
    allocatable = allocated = 0.0
    by_gpu: dict[str, list[DraDevice]] = {}
    for d in node.devices:
        by_gpu.setdefault(d.physical_id, []).append(d)
    for devices in by_gpu.values():
        whole = [d for d in devices if d.type == TYPE_GPU]
        mig = [d for d in devices if d.type == TYPE_MIG]
        allocatable += 1.0 if whole else min(sum(device_share(d) or 0.0 for d in mig), 1.0)
        if any(d.key in held for d in whole):
            allocated += 1.0
        else:
            allocated += min(sum(device_share(d) or 0.0 for d in mig if d.key in held), 1.0)
    return DraCapacity(round(allocatable, 9), round(allocated, 9), free_devices(node, held))
