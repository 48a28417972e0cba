"""The finding rules about GPUs handed out by DRA claims and HAMi fractions (ledger.md "GPUs handed out by claims
(DRA) and by fractions (HAMi)"; docs/findings.md): `idle_claim`, `oversubscribed_gpu`, `missing_attribution`.

Pure, as `rules.py` (whose money and detail helpers they share): plain data in, one `HourFinding` per flagged
subject and hour out. The inputs are what the ledger already computed for the bucket (a claim's idle hold, a
HAMi GPU's oversubscribed time and its tenants, the DRA units left unmeasured): the services adapt the ledger's
rows to them, so a finding's GPU-hours are the ledger's, never a second computation.

The two kinds a DRA or HAMi node must never get (zero-allocatable, unattributed activity) are kept out where
those rules live: `rules.unattributed` skips nodes whose GPUs DRA or HAMi hand out, and capacity never names
such a node zero-allocatable (`apps/capacity/fragmentation.py`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from apps.inventory.gpus.dra_claims import CLAIM_KIND
from apps.inventory.gpus.vocabulary import AllocationMode
from apps.usage.ledger import BucketInputs, BucketResult, NodeFact, PodRow

from .constants import Kind
from .rules import ZERO, Detail, HourFinding, gh, plain, priced

# How to turn dcgm-exporter's DRA attribution on (reference: dra-and-fractional.md, "dcgm-exporter and DRA").
ATTRIBUTION_FIX = (
    "set KUBERNETES_ENABLE_DRA=true on dcgm-exporter (Helm: kubernetesDRA.enabled=true; flag "
    "--kubernetes-enable-dra) and let it list resource.k8s.io resourceslices, so its series name the pod "
    "holding each DRA device"
)
HOLDER = "holder:"


def _round(value: float) -> float:
    return round(value, 6)


# ---- Idle claims ----


@dataclass(frozen=True)
class ClaimHold:
    """One ResourceClaim allocated with no running consumer for part of one hour (the ledger's claim row)."""

    namespace: str
    claim: str
    team: str
    node: str
    node_group: str
    gpu_model: str
    devices: tuple[tuple[str, str], ...]  # (device name, device UUID) it holds, by name
    gpu_uuid: str  # the physical GPU of its first device (the parent for a MIG device)
    idle_gpu_hours: float  # its devices' shares x the time no consumer ran
    price: Decimal | None


def idle_claims(holds: Iterable[ClaimHold]) -> list[HourFinding]:
    """A claim holding devices while no pod consumes them: its hours are idle and go to the claim's namespace and
    team, workload `ResourceClaim/<name>`. GPU-hours and cost: the claim's idle GPU-hours and their charge (it is
    both what it held and what sat idle)."""
    out = []
    for h in sorted(holds, key=lambda h: (h.namespace, h.claim)):
        if h.idle_gpu_hours <= 0:
            continue
        cost, unpriced = priced(h.idle_gpu_hours, h.price)
        detail = {"claim": h.claim, "devices": [{"name": n, "uuid": u} for n, u in h.devices],
                  "idle_gpu_hours": _round(h.idle_gpu_hours), "node_group": h.node_group, "gpu_model": h.gpu_model,
                  "sums": {"idle_gpu_hours": str(gh(h.idle_gpu_hours))}}
        out.append(HourFinding(
            kind=Kind.IDLE_CLAIM, subject=f"{h.namespace}/{h.claim}", team=h.team, namespace=h.namespace,
            workload=f"ResourceClaim/{h.claim}", node=h.node, gpu_uuid=h.gpu_uuid, gpu_hours=gh(h.idle_gpu_hours),
            cost=cost, unpriced_gpu_hours=unpriced, allocated_gpu_hours=gh(h.idle_gpu_hours), allocated_cost=cost,
            detail=plain(detail),
        ))
    return out


# ---- Oversubscribed HAMi GPUs ----


@dataclass(frozen=True)
class Tenant:
    """A pod holding a fraction of an oversubscribed GPU in the hour: its (scaled) allocated GPU-hours on it."""

    team: str
    namespace: str
    workload: str
    pod: str
    gpu_hours: float
    price: Decimal | None


@dataclass(frozen=True)
class Oversubscription:
    """A HAMi GPU whose tenants' shares added past 1 for part of the hour (`gpus.hami.scale_oversubscribed`)."""

    node: str
    node_group: str
    gpu_model: str
    gpu_uuid: str
    seconds: float  # how long the shares added past 1
    peak: float  # the most they added to
    tenants: tuple[Tenant, ...]
    price: Decimal | None  # the node's, per GPU-hour


def oversubscribed(gpus: Iterable[Oversubscription]) -> list[HourFinding]:
    """A HAMi GPU oversubscribed for some of the hour: every tenant's share was scaled down so the GPU holds
    exactly one. GPU-hours and cost: the oversubscribed time, at the node's price (the GPU time tenants were
    promised more of than exists). `allocated_*`: what the tenants were charged for it. Team, pod: the tenant with
    the most GPU-hours, ties to the first by name (over a run: `detail.sums`, as for unhealthy GPUs)."""
    out = []
    for g in sorted(gpus, key=lambda g: (g.node, g.gpu_uuid)):
        if g.seconds <= 0:
            continue
        hours = g.seconds / 3600.0
        cost, unpriced = priced(hours, g.price)
        tenants = sorted(g.tenants, key=lambda t: (t.team, t.namespace, t.workload, t.pod))
        costs = [priced(t.gpu_hours, t.price)[0] for t in tenants]
        rows = [{"team": t.team, "namespace": t.namespace, "workload": t.workload, "pod": t.pod,
                 "gpu_hours": _round(t.gpu_hours), "cost": str(c)} for t, c in zip(tenants, costs, strict=True)]
        # ties (tenants scaled alike) go to the first by team, namespace, workload, pod
        top = min(tenants, key=lambda t: (-round(t.gpu_hours, 9), t.team, t.namespace, t.workload, t.pod),
                  default=None)
        held = sum((gh(t.gpu_hours) for t in tenants), ZERO)
        charged = sum(costs, ZERO)
        sums = {f"{HOLDER}{t.team}|{t.namespace}|{t.workload}|{t.pod}": str(gh(t.gpu_hours)) for t in tenants}
        detail: Detail = {"max_share_sum": _round(g.peak), "oversubscribed_seconds": _round(g.seconds),
                          "tenants": rows, "node_group": g.node_group, "gpu_model": g.gpu_model, "sums": sums}
        out.append(HourFinding(
            kind=Kind.OVERSUBSCRIBED_GPU, subject=f"{g.node}/{g.gpu_uuid}", team=top.team if top else "",
            namespace=top.namespace if top else "", workload=top.workload if top else "", pod=top.pod if top else "",
            node=g.node, gpu_uuid=g.gpu_uuid, gpu_hours=gh(hours), cost=cost, unpriced_gpu_hours=unpriced,
            allocated_gpu_hours=held, allocated_cost=charged, detail=plain(detail),
        ))
    return out


# ---- DRA nodes whose exporter lacks DRA attribution ----


@dataclass(frozen=True)
class ClaimUnit:
    """One device a pod held through a claim in the hour, with the GPU-hours of it left unmeasured."""

    node: str
    gpu_uuid: str  # the physical GPU (DCGM's `UUID`)
    device_uuid: str  # the device's own UUID (a MIG device's), "" when not published
    unmeasured: float  # GPU-hours


def missing_attribution(units: Iterable[ClaimUnit], reporting: Collection[str], nodes: Mapping[str, NodeFact],
                        driver: str) -> list[HourFinding]:
    """A DRA node where devices pods hold through claims were left unmeasured although the device reports series
    (`reporting`: the UUIDs, physical or MIG, that had series without a pod in the hour): dcgm-exporter runs
    without DRA attribution. One finding per node and hour, for the platform (no team). GPU-hours and cost: those
    units' unmeasured GPU-hours and their charge; the detail says how to turn attribution on."""
    unmeasured: dict[str, list[float]] = defaultdict(list)
    devices: dict[str, set[str]] = defaultdict(set)
    seen = set(reporting)
    for u in units:
        if u.unmeasured <= 0 or not ({u.gpu_uuid, u.device_uuid} - {""}) & seen:
            continue
        unmeasured[u.node].append(u.unmeasured)
        devices[u.node].add(u.device_uuid or u.gpu_uuid)
    out = []
    for node, parts in sorted(unmeasured.items()):
        hours = math.fsum(parts)
        fact = nodes.get(node)
        cost, unpriced = priced(hours, fact.price if fact else None)
        detail: Detail = {"unmeasured_gpu_hours": _round(hours), "driver": driver, "devices": len(devices[node]),
                          "fix": ATTRIBUTION_FIX, "sums": {"unmeasured_gpu_hours": str(gh(hours))}}
        if fact is not None:
            detail.update(node_group=fact.node_group, gpu_model=fact.gpu_model)
        out.append(HourFinding(
            kind=Kind.MISSING_ATTRIBUTION, subject=node, node=node, gpu_hours=gh(hours), cost=cost,
            unpriced_gpu_hours=unpriced, allocated_gpu_hours=gh(hours), allocated_cost=cost, detail=plain(detail),
        ))
    return out


# ---- From one bucket's ledger rows ----


def is_claim_row(row: PodRow) -> bool:
    """A ledger row of a claim allocated with no running consumer (no pod: workload `ResourceClaim/<name>`)."""
    return not row.fact.name and row.fact.workload.startswith(f"{CLAIM_KIND}/")


def claim_holds(inputs: BucketInputs, result: BucketResult) -> list[ClaimHold]:
    """The bucket's claim rows as idle holds, with the devices the claim holds (in the claim's order)."""
    claims = {c.uid: c for c in inputs.claims}
    out = []
    for row in result.pods:
        if not is_claim_row(row):
            continue
        claim = claims.get(row.fact.uid)
        devices = claim.devices if claim is not None else ()
        out.append(ClaimHold(
            namespace=row.fact.namespace, claim=row.fact.workload.removeprefix(f"{CLAIM_KIND}/"), team=row.fact.team,
            node=row.fact.node, node_group=row.node_group, gpu_model=row.gpu_model,
            devices=tuple((d.profile or d.kind, d.device_uuid) for d in devices),
            gpu_uuid=devices[0].gpu_uuid if devices else "", idle_gpu_hours=row.allocated, price=row.price,
        ))
    return out


def oversubscriptions(inputs: BucketInputs, result: BucketResult) -> list[Oversubscription]:
    """The ledger's oversubscribed HAMi GPUs with their tenants: each tenant's GPU-hours on the GPU are its row's
    allocated GPU-hours in the proportion of its fractions (one GPU per tenant: all of them)."""
    nodes = {n.name: n for n in inputs.nodes}
    out = []
    for (node, uuid), (seconds, peak) in sorted(result.oversubscribed.items()):
        tenants = []
        for row in result.pods:
            fractions = [h.share for h in row.fact.holds if h.mode == AllocationMode.HAMI]
            on_gpu = sum(h.share for h in row.fact.holds if h.mode == AllocationMode.HAMI and h.gpu_uuid == uuid)
            if on_gpu <= 0 or row.fact.node != node:
                continue
            tenants.append(Tenant(row.fact.team, row.fact.namespace, row.fact.workload, row.fact.name,
                                  row.allocated * on_gpu / sum(fractions), row.price))
        fact = nodes.get(node)
        out.append(Oversubscription(node, fact.node_group if fact else "", fact.gpu_model if fact else "", uuid,
                                    seconds, peak, tuple(tenants), fact.price if fact else None))
    return out


def claim_units(result: BucketResult, signal: str) -> list[ClaimUnit]:
    """The DRA devices pods held on nodes where no DRA series named a holder (the ledger's
    `unattributed_dra_nodes`), each with its part of its pod's unmeasured GPU-hours (by share)."""
    out = []
    for row in result.pods:
        if row.fact.node not in result.unattributed_dra_nodes or is_claim_row(row):
            continue
        holds = [h for h in row.fact.holds if h.mode == AllocationMode.DRA]
        total = sum(h.share for h in holds)
        for h in holds:
            out.append(ClaimUnit(row.fact.node, h.gpu_uuid, h.device_uuid,
                                 row.unmeasured[signal] * h.share / total if total > 0 else 0.0))
    return out
