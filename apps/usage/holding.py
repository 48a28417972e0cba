"""GPU time held through DRA claims and HAMi fractions within one bucket (ledger.md "GPUs handed out by claims
(DRA) and by fractions (HAMi)"). Pure: the ledger (`ledger.py`) calls it with the bucket's pods and claims.

* A claim's devices are split among the pods consuming it at once (k consumers: share/k each); while it stays
  allocated and none runs, the claim holds them itself: idle hours of its namespace and team
  (`gpus.dra_claims.split_claim`, per device).
* HAMi tenants' shares on one GPU are scaled down together while they add past 1 (`gpus.hami.scale_oversubscribed`).

Times are seconds from the bucket's start; results are share-seconds (share of a GPU x seconds).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from apps.inventory.gpus.dra_claims import split_claim
from apps.inventory.gpus.hami import Tenancy, scale_oversubscribed
from apps.inventory.gpus.holds import Hold
from apps.inventory.gpus.intervals import Interval
from apps.inventory.gpus.vocabulary import AllocationMode


@dataclass(frozen=True)
class HolderSpan:
    """A pod's holds and when within the bucket it held them."""

    uid: str
    span: Interval
    holds: tuple[Hold, ...]


@dataclass(frozen=True)
class ClaimSpan:
    """A claim allocated over `allocated` (as the collector saw it) holding `devices`."""

    uid: str
    devices: tuple[Hold, ...]
    allocated: tuple[Interval, ...]


@dataclass
class Held:
    """Share-seconds per (pod uid, hold index); per claim the idle share-seconds and how long it was idle."""

    pods: dict[tuple[str, int], float] = field(default_factory=dict)
    claim_idle: dict[str, float] = field(default_factory=dict)
    claim_idle_seconds: dict[str, float] = field(default_factory=dict)
    oversubscribed: dict[str, float] = field(default_factory=dict)  # HAMi GPU UUID -> seconds its shares passed 1
    peak: dict[str, float] = field(default_factory=dict)  # HAMi GPU UUID -> most its shares added to


def held_time(pods: Iterable[HolderSpan], claims: Iterable[ClaimSpan], seconds: float) -> Held:
    """Share-seconds of every DRA and HAMi hold of `pods` over the bucket `[0, seconds)`, and claims' idle."""
    bucket = (0.0, seconds)
    out = Held()
    consumers: dict[str, list[tuple[HolderSpan, int, Hold]]] = defaultdict(list)
    tenancies: list[Tenancy[tuple[str, int]]] = []
    for pod in pods:
        for i, hold in enumerate(pod.holds):
            if hold.mode == AllocationMode.DRA:
                consumers[hold.claim_uid or f"{pod.uid}/{i}"].append((pod, i, hold))
            elif hold.mode == AllocationMode.HAMI:
                tenancies.append(Tenancy((pod.uid, i), hold.gpu_uuid, hold.share, pod.span))
    claim_by_uid = {c.uid: c for c in claims}
    for uid in sorted({*consumers, *claim_by_uid}):
        _split(uid, consumers.get(uid, []), claim_by_uid.get(uid), bucket, out)
    time = scale_oversubscribed(tenancies, bucket)
    for (key, _gpu), share_seconds in time.share_seconds.items():
        out.pods[key] = share_seconds
    out.oversubscribed = dict(time.oversubscribed)
    out.peak = {gpu: time.peak[gpu] for gpu in time.oversubscribed}
    return out


def _split(uid: str, holders: list[tuple[HolderSpan, int, Hold]], claim: ClaimSpan | None, bucket: Interval,
           out: Held) -> None:
    """One claim's devices: each split among the pods holding it at once, the rest the claim's own idle."""
    devices: dict[str, float] = {d.device_uuid: d.share for d in claim.devices} if claim else {}
    for _pod, _i, hold in holders:
        devices.setdefault(hold.device_uuid, hold.share)
    spans = claim.allocated if claim else ()
    idle_seconds = 0.0
    for device, share in sorted(devices.items()):
        mine = {(pod.uid, i): pod.span for pod, i, hold in holders if hold.device_uuid == device}
        split = split_claim(mine, spans, bucket, share)
        for key, share_seconds in split.consumers.items():
            out.pods[key] = share_seconds
        if claim is not None and split.unconsumed > 0:
            out.claim_idle[uid] = out.claim_idle.get(uid, 0.0) + split.unconsumed
            idle_seconds = max(idle_seconds, split.unconsumed_seconds)
    if idle_seconds > 0:
        out.claim_idle_seconds[uid] = idle_seconds


def hold_seconds(held: Held, pod_uid: str, holds: Iterable[Hold]) -> list[tuple[Hold, float]]:
    """The pod's holds with their share-seconds in the bucket."""
    return [(hold, held.pods.get((pod_uid, i), 0.0)) for i, hold in enumerate(holds)]


def by_gpu(values: Mapping[tuple[str, str], Mapping[str, float]], pod_uid: str, gpu: str) -> Mapping[str, float]:
    """A HAMi tenant's GPU's signal values over its held part of the bucket ({} when unknown)."""
    return values.get((pod_uid, gpu), {})
