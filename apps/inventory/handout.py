"""How one snapshot's GPUs were handed out: every node's GPUs and every pod's holds, by the GPU rules
(`gpus.holds`, `dra`, `dra_claims`, `hami`) with the settings that choose among them.

Nodes (inventory), pod observations (the ledger) and capacity read the same snapshot; `hand_out(snap)` reads it
once for all of them (the last snapshot's answer is kept). Tenant-written annotations that do not parse are
warnings, never errors, and bill nothing.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings

from apps.inventory.gpus import LABEL_MEMORY, UNKNOWN_NODE, GpuNode, to_count
from apps.inventory.gpus.dra_claims import device_plugin_request
from apps.inventory.gpus.hami import (
    ALLOCATED_ANNOTATION,
    HamiNames,
    Register,
    ShareRule,
    is_hami_pod,
    parse_allocated,
    parse_register,
)
from apps.inventory.gpus.holds import Hold, allocation_mode, claim_holds, hami_holds, node_gpus
from apps.inventory.gpus.vocabulary import AllocationMode
from apps.inventory.observations import ClusterSnapshot, PodInfo


def hami_names() -> HamiNames:
    return HamiNames(
        vgpu=settings.GPUFINOPS_HAMI_VGPU_RESOURCE, cores=settings.GPUFINOPS_HAMI_CORES_RESOURCE,
        memory=settings.GPUFINOPS_HAMI_MEMORY_RESOURCE,
        memory_percentage=settings.GPUFINOPS_HAMI_MEMORY_PERCENTAGE_RESOURCE,
    )


def share_rule() -> ShareRule:
    return ShareRule(settings.GPUFINOPS_HAMI_SHARE)


@dataclass(frozen=True)
class HandOut:
    gpus: Mapping[str, GpuNode]  # node -> its GPUs (DRA slices, HAMi register, or GFD labels and capacity)
    registers: Mapping[str, Register]  # HAMi nodes' registers
    holds: Mapping[str, tuple[Hold, ...]]  # pod uid -> what it holds outside the device plugin, as seen now
    requests: Mapping[str, dict[str, float]]  # pod uid -> its device-plugin request (claim-served, HAMi's: out)
    modes: Mapping[str, AllocationMode]  # pod uid -> allocation mode
    hami_shares: Mapping[str, dict[str, float]]  # HAMi node -> GPU UUID -> running tenants' shares added up
    warnings: tuple[str, ...] = ()


def _pod(pod: PodInfo, snap: ClusterSnapshot, register: Register | None, memory_mib: int | None, names: HamiNames,
         rule: ShareRule, warnings: list[str]) -> tuple[tuple[Hold, ...], dict[str, float]]:
    """The pod's holds seen now, and its device-plugin request."""
    requests = device_plugin_request(pod.containers, pod.claim_served)
    holds: list[Hold] = []
    if snap.dra is not None:
        for name in pod.claims:
            claim = snap.dra.claim(pod.namespace, name)
            if claim is not None and claim.allocated:
                holds.extend(claim_holds(claim.uid, claim.name, claim.devices))
    on_hami = register is not None and bool(register.gpus)
    if register is not None and is_hami_pod(pod.annotations, requests, names, on_hami_node=on_hami):
        requests = {r: v for r, v in requests.items() if r not in names.resources}
        devices = parse_allocated(pod.annotations.get(ALLOCATED_ANNOTATION, ""))
        found, why = hami_holds(devices.devices, register, rule, memory_mib)
        holds.extend(found)
        warnings.extend(f"pod {pod.namespace}/{pod.name}: {w}" for w in (*devices.warnings, *why))
    return tuple(holds), requests


def compute(snap: ClusterSnapshot) -> HandOut:
    names, rule = hami_names(), share_rule()
    warnings: list[str] = list(snap.dra.warnings) if snap.dra is not None else []
    registers: dict[str, Register] = {}
    gpus: dict[str, GpuNode] = {}
    # GFD's memory label: a GPU's memory when HAMi's register does not give it (a memory-only share).
    memory = {info.name: to_count(info.labels.get(LABEL_MEMORY)) or None for info in snap.nodes}
    for info in snap.nodes:
        register = parse_register(info.hami_register) if info.hami_register else None
        if register is not None:
            registers[info.name] = register
            warnings.extend(f"node {info.name}: {w}" for w in register.warnings)
        dra_node = snap.dra.inventory.nodes.get(info.name) if snap.dra is not None else None
        gpus[info.name] = node_gpus(info.labels, info.capacity, dra_node=dra_node, register=register)
    holds: dict[str, tuple[Hold, ...]] = {}
    requests: dict[str, dict[str, float]] = {}
    modes: dict[str, AllocationMode] = {}
    shares: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for pod in snap.pods:
        held, request = _pod(pod, snap, registers.get(pod.node), memory.get(pod.node), names, rule, warnings)
        holds[pod.uid], requests[pod.uid] = held, request
        modes[pod.uid] = allocation_mode(gpus.get(pod.node, UNKNOWN_NODE), request, held)
        if pod.phase == "Running" and pod.finished is None:
            for h in held:
                if h.mode == AllocationMode.HAMI:
                    shares[pod.node][h.gpu_uuid] += h.share
    hami = {node: dict(by_gpu) for node, by_gpu in shares.items()}
    return HandOut(gpus, registers, holds, requests, modes, hami, tuple(warnings))


_last: tuple[int, ClusterSnapshot, HandOut] | None = None
_lock = threading.Lock()


def hand_out(snap: ClusterSnapshot) -> HandOut:
    """The snapshot's hand-out (computed once per snapshot: nodes, observations and capacity all ask)."""
    global _last
    with _lock:
        if _last is not None and _last[1] is snap:
            return _last[2]
    result = compute(snap)
    with _lock:
        _last = (id(snap), snap, result)
    return result
