"""GPUs handed out by Dynamic Resource Allocation, the claiming side: what a ResourceClaim holds, which pods
consume it, and how its devices' time is split among them (ledger.md "GPUs handed out by claims (DRA) and
by fractions (HAMi)"). The devices themselves are `dra.py`. Pure: JSON objects in (raw LIST items of any
served `resource.k8s.io` version, and pods), plain values out.

For the callers (collection, ledger, capacity, findings, views):

* `claim_devices(claim, inventory, gpu_drivers)` -> the `HeldDevice`s of a claim's allocation, each with its
  share of a physical GPU, the physical GPU's UUID (DCGM's `UUID`) and the device's own UUID (the MIG
  device's: dcgm-exporter's `dra_mig_device_uuid`), which activity matching needs both of; results that
  name no published device are warnings, not counted.
* `claim_consumers(claim)` (its `status.reservedFor`) and `pod_claim_names(pod)` (the pod's
  `spec.resourceClaims`, `status.resourceClaimStatuses`, `status.extendedResourceClaimStatus`) join claims
  and pods; `claim_workload(name)` names the workload an allocated, unconsumed claim's hours go to.
* `claim_served_resources(pod)` + `device_plugin_request(containers, served)`: a pod's effective
  device-plugin request without the extended resources a claim serves, so those devices count once, from
  the claim.
* `split_claim(consumers, allocated, bucket, share)`: a claim's devices over one bucket, split among the
  pods consuming it at once; the rest is the claim's own idle hold.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from apps.inventory.gpus.device_plugin import ContainerLike, effective_request
from apps.inventory.gpus.dra import TYPE_MIG, DeviceKey, DraInventory, device_share
from apps.inventory.gpus.intervals import Interval, covered, pieces
from apps.inventory.gpus.vocabulary import UNIT_GPU, AllocationMode, mig_unit

CLAIM_KIND = "ResourceClaim"


@dataclass(frozen=True)
class HeldDevice:
    """One GPU device a claim holds, and what it is worth."""

    key: DeviceKey
    node: str
    kind: str  # UNIT_GPU or `mig-<profile>`
    share: float  # of one physical GPU
    gpu_uuid: str  # the physical GPU (the parent for MIG): DCGM's `UUID`
    device_uuid: str  # the device itself (the MIG device's UUID for MIG); "" when not published
    gpu_model: str
    profile: str = ""

    @property
    def mode(self) -> AllocationMode:
        return AllocationMode.DRA


@dataclass(frozen=True)
class ClaimDevices:
    held: tuple[HeldDevice, ...]
    warnings: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        """Physical GPUs the claim holds."""
        return sum(d.share for d in self.held)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def claim_name(claim: Mapping[str, Any]) -> str:
    """`namespace/name` of a claim, as warnings and findings name it."""
    meta = _meta(claim)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def claim_workload(name: str) -> str:
    """The workload an allocated claim's hours go to while no pod consumes it."""
    return f"{CLAIM_KIND}/{name}"


def _results(claim: Mapping[str, Any]) -> list[Any]:
    allocation = _status(claim).get("allocation")
    devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
    results = devices.get("results") if isinstance(devices, Mapping) else None
    return results if isinstance(results, list) else []


def is_allocated(claim: Mapping[str, Any]) -> bool:
    """The claim has an allocation (it may hold devices even when no pod consumes it)."""
    return bool(_status(claim).get("allocation"))


def claim_devices(
    claim: Mapping[str, Any], inventory: DraInventory, gpu_drivers: Collection[str], *, mig_by_memory: bool = False
) -> ClaimDevices:
    """The GPU devices a claim's `status.allocation.devices.results[]` hold. A result with `adminAccess: true`
    holds nothing (monitoring access); results of other drivers and non-GPU devices are ignored; a result
    naming a device no slice publishes is reported, not counted."""
    held: list[HeldDevice] = []
    seen: set[DeviceKey] = set()
    warnings: list[str] = []
    for result in _results(claim):
        if not isinstance(result, Mapping) or result.get("driver") not in gpu_drivers:
            continue
        if result.get("adminAccess") is True:
            continue
        key = DeviceKey(str(result["driver"]), str(result.get("pool") or ""), str(result.get("device") or ""))
        device = inventory.devices.get(key)
        if device is None:
            warnings.append(f"claim {claim_name(claim)}: device {'/'.join(key)} is in no ResourceSlice: not counted")
            continue
        if not device.is_gpu:
            continue
        if key in seen:
            warnings.append(f"claim {claim_name(claim)}: device {'/'.join(key)} allocated twice: counted once")
            continue
        share = device_share(device, inventory.parent_of(device), mig_by_memory=mig_by_memory)
        if share is None:
            warnings.append(f"claim {claim_name(claim)}: MIG profile {device.profile!r} unreadable: not counted")
            continue
        seen.add(key)
        kind = mig_unit(device.profile) if device.type == TYPE_MIG else UNIT_GPU
        held.append(HeldDevice(key, inventory.node_of(key), kind, share, device.physical_uuid, device.uuid,
                               device.gpu_model, device.profile))
    return ClaimDevices(tuple(held), tuple(warnings))


# ---- Consumers: claims <-> pods ----


@dataclass(frozen=True)
class Consumer:
    """A pod a claim is reserved for."""

    name: str
    uid: str


def claim_consumers(claim: Mapping[str, Any]) -> tuple[Consumer, ...]:
    """The pods in `status.reservedFor[]` (`resource: pods` of the core group); other consumers (PodGroups)
    hold through their pods, which name the claim themselves."""
    out: list[Consumer] = []
    for ref in _status(claim).get("reservedFor") or []:
        if isinstance(ref, Mapping) and ref.get("resource") == "pods" and not ref.get("apiGroup"):
            out.append(Consumer(str(ref.get("name") or ""), str(ref.get("uid") or "")))
    return tuple(out)


def pod_claim_names(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The claims (in the pod's namespace) a pod consumes: `spec.resourceClaims[].resourceClaimName`; for
    `resourceClaimTemplateName` entries the generated claim in `status.resourceClaimStatuses[]` (absent
    until the claim is made); the claim the scheduler made for extended resources
    (`status.extendedResourceClaimStatus.resourceClaimName`)."""
    spec = pod.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    status = _status(pod)
    generated = {
        s.get("name"): s.get("resourceClaimName")
        for s in status.get("resourceClaimStatuses") or []
        if isinstance(s, Mapping)
    }
    names: list[str] = []
    for entry in spec.get("resourceClaims") or []:
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("resourceClaimName") or (
            generated.get(entry.get("name")) if entry.get("resourceClaimTemplateName") else None
        )
        if isinstance(name, str) and name:
            names.append(name)
    extended = status.get("extendedResourceClaimStatus")
    if isinstance(extended, Mapping) and isinstance(extended.get("resourceClaimName"), str):
        names.append(extended["resourceClaimName"])
    return tuple(dict.fromkeys(names))


def claim_served_resources(pod: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """(container, resource) pairs of a pod that a claim serves: when a DeviceClass names an
    `extendedResourceName`, the scheduler serves a pod's `nvidia.com/gpu` through a claim it makes and
    records the mapping in `status.extendedResourceClaimStatus.requestMappings[]`."""
    extended = _status(pod).get("extendedResourceClaimStatus")
    if not isinstance(extended, Mapping):
        return frozenset()
    return frozenset(
        (str(m.get("containerName") or ""), str(m.get("resourceName") or ""))
        for m in extended.get("requestMappings") or []
        if isinstance(m, Mapping)
    )


class NamedContainer(ContainerLike, Protocol):
    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class _Requests:
    kind: str
    resources: Mapping[str, float]


def device_plugin_request(
    containers: Iterable[NamedContainer], served: Collection[tuple[str, str]]
) -> dict[str, float]:
    """The pod's effective request (the scheduler's rule) without what a claim serves: those devices are
    counted once, from the claim, never also as device-plugin units."""
    return effective_request(
        _Requests(c.kind, {r: v for r, v in c.resources.items() if (c.name, r) not in served}) for c in containers
    )


# ---- Sharing in time ----

C = TypeVar("C", bound=Hashable)


@dataclass(frozen=True)
class ClaimSplit(Generic[C]):
    """A claim's devices over one bucket, in share-seconds (share of a GPU x seconds)."""

    consumers: Mapping[C, float]  # what each consumer holds
    unconsumed: float  # what the claim holds with no consumer running: idle, `ResourceClaim/<name>`
    unconsumed_seconds: float  # how long that was
    held_seconds: float  # how long the devices were held: allocated or consumed

    @property
    def total(self) -> float:
        return sum(self.consumers.values()) + self.unconsumed


def split_claim(
    consumers: Mapping[C, Interval], allocated: Iterable[Interval], bucket: Interval, share: float = 1.0
) -> ClaimSplit[C]:
    """Share-seconds of a claim's devices (worth `share` of a GPU) within `bucket`, per consumer and idle.

    While k consumers run at once each holds share/k; while the claim is allocated and none runs, the claim
    holds it all itself. A consumer running while the claim was not seen allocated still holds it (the API
    keeps no history: a device a claim was seen to hold stays held by its pods while they run). Exact: the
    consumers' sum + unconsumed = share x held seconds, no second counted twice.
    """
    spans = list(allocated)
    held: dict[C, float] = dict.fromkeys(consumers, 0.0)
    unconsumed = held_seconds = 0.0
    for piece in pieces({c: [i] for c, i in consumers.items()}, bucket):
        if piece.active:
            for consumer in piece.active:
                held[consumer] += share * piece.seconds / len(piece.active)
            held_seconds += piece.seconds
        else:
            idle = covered(spans, piece)
            unconsumed += idle
            held_seconds += idle
    return ClaimSplit(held, share * unconsumed, unconsumed, held_seconds)
