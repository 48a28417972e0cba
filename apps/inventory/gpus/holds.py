"""However a GPU was handed out: what a node's GPUs are and what a pod holds, the one dispatch between the device
plugin (`device_plugin.py`), DRA claims (`dra.py`, `dra_claims.py`) and HAMi fractions (`hami.py`). Pure.

* `node_gpus(labels, capacity, dra_node=…, register=…)`: a node's `GpuNode`: a DRA node's from its
  ResourceSlices, a HAMi node's from its register, any other's from GPU Feature Discovery and capacity.
* `Hold`: one share of one physical GPU a pod holds outside the device plugin: a DRA device through a claim, or
  a HAMi fraction. The ledger splits a shared claim's holds among the claim's consumers over time and scales
  an oversubscribed HAMi GPU's holds; a `Hold` carries the raw share, before either.
* `claim_holds(…)` and `hami_holds(…)` make them; `allocation_mode(gpu, requests, holds)` names a pod's mode.
* `Hold.as_json()` / `Hold.from_json()`: the stored form (`PodObservation.holds`, `ClaimObservation.devices`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apps.inventory.gpus.device_plugin import GpuNode, classify_node
from apps.inventory.gpus.dra import DraNode
from apps.inventory.gpus.dra_claims import HeldDevice
from apps.inventory.gpus.hami import Register, ShareRule, VgpuDevice, pod_shares
from apps.inventory.gpus.vocabulary import (
    DRA_CLAIMS,
    HAMI_FRACTIONS,
    MIG_MIXED,
    MIG_SINGLE,
    MPS,
    TIME_SLICING,
    UNIT_FRACTION,
    AllocationMode,
    pod_mode,
    unit_mode,
)


def node_gpus(
    labels: Mapping[str, str], capacity: Mapping[str, object], *, dra_node: DraNode | None = None,
    register: Register | None = None,
) -> GpuNode:
    """A node's GPUs: published by a DRA driver (its ResourceSlices win: a DRA node may keep GFD labels that
    count GPUs the device plugin does not hand out), registered by HAMi (its register, not `nvidia.com/gpu`
    capacity, which counts vGPUs), else read from GFD labels and capacity."""
    if dra_node is not None and dra_node.gpu.physical_gpus:
        return dra_node.gpu
    if register is not None and register.gpus:
        return register.gpu_node()
    return classify_node(labels, capacity)


def node_mode(sharing: str) -> AllocationMode:
    """How a node hands its GPUs out, from its `GpuNode.sharing` (what views show for nodes)."""
    if sharing == DRA_CLAIMS:
        return AllocationMode.DRA
    if sharing == HAMI_FRACTIONS:
        return AllocationMode.HAMI
    if sharing in (MIG_MIXED, MIG_SINGLE):
        return AllocationMode.MIG
    if sharing in (TIME_SLICING, MPS):
        return AllocationMode.TIME_SLICE
    return AllocationMode.DEVICE_PLUGIN


@dataclass(frozen=True)
class Hold:
    """One share of one physical GPU a pod holds outside the device plugin."""

    mode: AllocationMode  # DRA or HAMI
    kind: str  # UNIT_GPU | `mig-<profile>` (DRA) | UNIT_FRACTION (HAMi)
    share: float  # of one physical GPU, before a shared claim's split and HAMi's oversubscription scaling
    gpu_uuid: str  # the physical GPU: DCGM's `UUID`
    device_uuid: str  # the device: a MIG device's own UUID (`dra_mig_device_uuid`), else the GPU's
    gpu_model: str
    profile: str = ""  # MIG profile of a DRA MIG device
    claim_uid: str = ""  # DRA: the claim that holds it (a shared claim is split among its consumers)
    claim_name: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"mode": str(self.mode), "kind": self.kind, "share": self.share, "gpu_uuid": self.gpu_uuid,
                "device_uuid": self.device_uuid, "gpu_model": self.gpu_model, "profile": self.profile,
                "claim_uid": self.claim_uid, "claim_name": self.claim_name}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Hold:
        return cls(AllocationMode(str(data["mode"])), str(data["kind"]), float(data["share"]),
                   str(data.get("gpu_uuid") or ""), str(data.get("device_uuid") or ""),
                   str(data.get("gpu_model") or ""), str(data.get("profile") or ""),
                   str(data.get("claim_uid") or ""), str(data.get("claim_name") or ""))


def claim_holds(claim_uid: str, claim_name: str, devices: Iterable[HeldDevice]) -> tuple[Hold, ...]:
    """The holds of a claim's GPU devices (adminAccess results are not among `devices`: they hold nothing)."""
    return tuple(
        Hold(AllocationMode.DRA, d.kind, d.share, d.gpu_uuid, d.device_uuid or d.gpu_uuid, d.gpu_model, d.profile,
             claim_uid, claim_name)
        for d in devices
    )


def hami_holds(
    devices: Iterable[VgpuDevice], register: Register, rule: ShareRule, model_memory_mib: int | None = None
) -> tuple[tuple[Hold, ...], tuple[str, ...]]:
    """A HAMi pod's holds, one per physical GPU (its containers' shares of one GPU summed), and the warnings."""
    shares = pod_shares(devices, register, rule, model_memory_mib)
    models = {g.uuid: g.gpu_model for g in register.gpus}
    holds = tuple(
        Hold(AllocationMode.HAMI, UNIT_FRACTION, share, uuid, uuid, models.get(uuid, ""))
        for uuid, share in sorted(shares.shares.items())
        if share > 0
    )
    return holds, shares.warnings


def allocation_mode(gpu: GpuNode, requests: Mapping[str, float], holds: Iterable[Hold]) -> AllocationMode:
    """A pod's allocation mode: the mode holding the most of a GPU among its device-plugin units (on its node)
    and its holds (vocabulary.pod_mode)."""
    units: list[tuple[AllocationMode, float]] = [(h.mode, h.share) for h in holds]
    for resource, count in requests.items():
        share = gpu.unit_share(resource)
        if share is not None and count > 0:
            units.append((unit_mode(gpu.unit_kind(resource)), share * count))
    return pod_mode(units)
