"""The finding rules, one function per kind, pure: plain data in, one `HourFinding` per flagged subject and hour
out (docs/findings.md states each rule; thresholds come in as `Params`, read from settings by the caller).

They read what one bucket already has: the pod rows the ledger computed (`PodFigures`), the DCGM series the
bucket fetched (`apps.usage.ledger.SeriesFact`, per pod and device), the nodes, and the few aggregated
health, memory and holder-less answers of `apps.usage.sources.MetricsSource`. Nothing here reads raw samples.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, TypedDict

from apps.inventory.gpus import MIG_MIXED, MIG_SINGLE, NOT_DEVICE_PLUGIN, REPLICATED
from apps.usage import money
from apps.usage.activity import metrics_fix
from apps.usage.ledger import BucketResult, NodeFact, SeriesFact
from apps.usage.sources import DeviceActivity, DeviceHealth, VanishedDevice

from .constants import Kind

NANO = Decimal("0.000000001")
ZERO = Decimal(0)
EPS = 1e-9

# Clock-event reason bits (dcgm-exporter clock_events_collector.go; DCGM_CLOCKS_EVENT_REASON_*).
CLOCK_EVENT_BITS: dict[int, str] = {
    0x1: "gpu_idle", 0x2: "clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
    0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks",
}


def gh(value: float | Decimal) -> Decimal:
    """GPU-hours as the findings keep them: an exact decimal to 1e-9 (the float's shortest repr, rounded)."""
    if isinstance(value, Decimal):
        return value.quantize(NANO, rounding=ROUND_HALF_EVEN)
    return Decimal(repr(float(value))).quantize(NANO, rounding=ROUND_HALF_EVEN)


def priced(gpu_hours: float, price: Decimal | None) -> tuple[Decimal, Decimal]:
    """(cost, unpriced GPU-hours): the ledger's money rule; hours on a model without a price cost nothing known."""
    cost = money.cost(gpu_hours, price)
    return (ZERO, gh(gpu_hours)) if cost is None else (cost, ZERO)


# A finding's detail: the JSON object FindingHour.detail stores (docs/findings.md lists each kind's keys).
Detail = dict[str, Any]


def plain(detail: Mapping[str, Any]) -> Detail:
    """A detail as JSON stores and returns it (tuples become lists), so stored and new details compare equal."""
    stored: Detail = json.loads(json.dumps(detail, sort_keys=True, default=str))
    return stored


@dataclass(frozen=True)
class HourFinding:
    """One subject flagged in one hour, with its figures (docs/findings.md says what each kind's are)."""

    kind: str
    subject: str
    team: str = ""
    namespace: str = ""
    workload: str = ""
    pod: str = ""
    node: str = ""
    gpu_uuid: str = ""
    gpu_hours: Decimal = ZERO
    cost: Decimal = ZERO
    unpriced_gpu_hours: Decimal = ZERO
    allocated_gpu_hours: Decimal = ZERO
    allocated_cost: Decimal = ZERO
    detail: Detail = field(default_factory=dict)  # `tags` (a list of reasons) are counted per run


@dataclass(frozen=True)
class Params:
    """The thresholds (settings; docs/findings.md)."""

    signal: str = "sm_active"
    idle_threshold: float = 0.01
    fb_used_min_mib: float = 1024.0
    straggler_fraction: float = 0.6
    unattributed_threshold: float = 0.05
    xid_codes: frozenset[int] = frozenset()
    throttle_mask: int = 0xE8
    throttle_min_share: float = 0.0


@dataclass(frozen=True)
class PodFigures:
    """One pod's ledger row in one hour, under the default signal, with its money as the ledger writes it."""

    uid: str
    namespace: str
    pod: str
    workload: str
    team: str
    node: str
    node_group: str
    gpu_model: str
    gpus: float
    held_seconds: float
    allocated: float
    working: float
    idle: float
    unmeasured: float
    price: Decimal | None

    @property
    def activity(self) -> float | None:
        """working / (working + idle); None when nothing of the pod was measured (never idle, never busy)."""
        measured = self.working + self.idle
        return self.working / measured if measured > 0 else None


def pods_from_result(result: BucketResult, signal: str) -> list[PodFigures]:
    return [
        PodFigures(
            uid=r.fact.uid, namespace=r.fact.namespace, pod=r.fact.name, workload=r.fact.workload, team=r.fact.team,
            node=r.fact.node, node_group=r.node_group, gpu_model=r.gpu_model, gpus=r.gpus,
            held_seconds=r.fact.held_seconds, allocated=r.allocated, working=r.working[signal], idle=r.idle[signal],
            unmeasured=r.unmeasured[signal], price=r.price,
        )
        for r in result.pods
    ]


def _dec(value: float) -> float:
    return round(value, 6)


# ---- Idle allocations and idle-held ----


def idle(pods: Iterable[PodFigures], memory: Mapping[tuple[str, str], float], p: Params,
         devices: Mapping[tuple[str, str], str] | None = None) -> list[HourFinding]:
    """A pod-hour is idle when its measured activity (working / (allocated - unmeasured)) is below the idle
    threshold. It is `idle_held` when one of its devices held more than `fb_used_min_mib` of framebuffer on
    average over the hour (`memory`: the largest average per (namespace, pod)), else `idle_allocation`.
    GPU-hours and cost: the pod's allocated GPU-hours and its charge (the whole allocation is what sits idle);
    the idle part (allocated x inactivity) is in the detail."""
    out = []
    for pod in pods:
        activity = pod.activity
        if activity is None or activity >= p.idle_threshold:
            continue
        fb = memory.get((pod.namespace, pod.pod))
        held = fb is not None and fb > p.fb_used_min_mib
        charge, unpriced = priced(pod.allocated, pod.price)
        idle_cost = priced(pod.idle, pod.price)[0]
        detail = {"activity": _dec(activity), "gpus": _dec(pod.gpus), "node_group": pod.node_group,
                  "gpu_model": pod.gpu_model, "working_gpu_hours": pod.working, "idle_gpu_hours": pod.idle,
                  "unmeasured_gpu_hours": pod.unmeasured, "idle_cost": str(idle_cost),
                  "sums": {"idle_gpu_hours": str(gh(pod.idle)), "idle_cost": str(idle_cost)}}
        if fb is not None:
            detail["fb_used_mib"] = _dec(fb)
        out.append(HourFinding(
            kind=Kind.IDLE_HELD if held else Kind.IDLE_ALLOCATION, subject=pod.uid, team=pod.team,
            namespace=pod.namespace, workload=pod.workload, pod=pod.pod, node=pod.node,
            gpu_uuid=(devices or {}).get((pod.namespace, pod.pod), ""), gpu_hours=gh(pod.allocated), cost=charge,
            unpriced_gpu_hours=unpriced, allocated_gpu_hours=gh(pod.allocated), allocated_cost=charge,
            detail=plain(detail),
        ))
    return out


def first_devices(series: Iterable[SeriesFact]) -> dict[tuple[str, str], str]:
    """(namespace, pod) -> the UUID of its first device series (sorted), to name a pod's GPU."""
    out: dict[tuple[str, str], str] = {}
    for s in sorted(series, key=lambda s: (s.namespace, s.pod, s.uuid, s.gpu_instance_id)):
        out.setdefault((s.namespace, s.pod), s.uuid)
    return out


# ---- Per-GPU shares of a pod (stragglers, infra loss) ----


def _series_key(s: SeriesFact) -> tuple[str, str, str]:
    return s.uuid, s.gpu_instance_id, s.replica


def pod_devices(pods: Iterable[PodFigures], series: Iterable[SeriesFact], signal: str | None = None
                ) -> dict[str, list[tuple[SeriesFact, float]]]:
    """Pod uid -> its device series with the GPU-hours each stands for: the pod's allocated GPU-hours split evenly
    over its distinct device series (one whole GPU, MIG instance or replica each; exact for the usual pod whose
    units are alike). With `signal`, only series with a valid value of it."""
    by_name = {(p.namespace, p.pod): p for p in pods}
    grouped: dict[str, dict[tuple[str, str, str], SeriesFact]] = defaultdict(dict)
    for s in series:
        pod = by_name.get((s.namespace, s.pod))
        if pod is None:
            continue
        if signal is not None:
            v = s.values.get(signal)
            if v is None or math.isnan(v) or not -EPS <= v <= 1.0 + 1e-6:
                continue
        grouped[pod.uid].setdefault(_series_key(s), s)
    by_uid = {p.uid: p for p in pods}
    out: dict[str, list[tuple[SeriesFact, float]]] = {}
    for uid, devices in grouped.items():
        each = by_uid[uid].allocated / len(devices)
        out[uid] = [(devices[k], each) for k in sorted(devices)]
    return out


# ---- Stragglers ----


def stragglers(pods: Sequence[PodFigures], series: Sequence[SeriesFact], nodes: Mapping[str, NodeFact],
               p: Params) -> list[HourFinding]:
    """Per workload with two or more GPUs measured in the hour (whole GPUs or MIG instances; shared replicas are
    left out: their value is the device's), each GPU's activity under the default signal (its series' average
    over the hour). Flagged when the median is at least the idle threshold and the slowest GPU is below
    `straggler_fraction` x the median.

    Waste (the finding's GPU-hours) = sum over the workload's other GPUs u of max(0, 1 - slowest / activity_u)
    x u's GPU-hours in the hour: the share of each one's time spent waiting for the slowest, if the workload
    moves at its pace. Cost: that waste at each GPU's price.
    """
    by_uid = {pod.uid: pod for pod in pods}
    devices = pod_devices(pods, series, p.signal)
    groups: dict[tuple[str, str], list[tuple[float, str, str, str, str, float]]] = defaultdict(list)
    for uid, entries in devices.items():
        pod = by_uid[uid]
        node = nodes.get(pod.node)
        if node is not None and node.gpu.sharing in REPLICATED:
            continue
        for s, hours in entries:
            if s.replica:
                continue
            value = min(max(s.values[p.signal], 0.0), 1.0)
            groups[(pod.namespace, pod.workload)].append((value, pod.pod, s.uuid, s.gpu_instance_id, uid, hours))
    out = []
    for (namespace, workload), gpus in sorted(groups.items()):
        if len(gpus) < 2:
            continue
        values = [g[0] for g in gpus]
        median = statistics.median(values)
        slowest = min(gpus, key=lambda g: (g[0], g[1], g[2], g[3]))
        if median < p.idle_threshold or slowest[0] >= p.straggler_fraction * median:
            continue
        waiting: dict[str, float] = defaultdict(float)  # per pod: GPU-hours of its other GPUs spent waiting
        allocated: dict[str, float] = defaultdict(float)
        for g in gpus:
            allocated[g[4]] += g[5]
            if g is not slowest and g[0] > 0:
                waiting[g[4]] += max(0.0, 1.0 - slowest[0] / g[0]) * g[5]
        cost = unpriced = charge = ZERO
        for uid, hours in sorted(waiting.items()):
            c, u = priced(hours, by_uid[uid].price)
            cost, unpriced = cost + c, unpriced + u
        for uid, hours in sorted(allocated.items()):
            charge += priced(hours, by_uid[uid].price)[0]
        slow_pod = by_uid[slowest[4]]
        detail = {
            "units": len(gpus), "slowest": _dec(slowest[0]), "median": _dec(median), "fastest": _dec(max(values)),
            "ratio": _dec(slowest[0] / median), "slowest_gpu": slowest[2], "gpu_instance_id": slowest[3],
            "pods": len(allocated), "signal": p.signal,
        }
        out.append(HourFinding(
            kind=Kind.STRAGGLER, subject=f"{namespace}/{workload}", team=slow_pod.team, namespace=namespace,
            workload=workload, pod=slow_pod.pod, node=slow_pod.node, gpu_uuid=slowest[2],
            gpu_hours=sum((gh(h) for h in waiting.values()), ZERO), cost=cost, unpriced_gpu_hours=unpriced,
            allocated_gpu_hours=sum((gh(h) for h in allocated.values()), ZERO), allocated_cost=charge,
            detail=plain(detail),
        ))
    return out


# ---- Unhealthy GPUs (infra loss) ----


class DeviceNodes:
    """The Kubernetes node of each GPU a bucket's health and activity answers name: GPUs are matched by UUID,
    never by the exporter's `Hostname` label, which is the exporter's own pod name when it runs without
    `NODE_NAME` (charts before early 2023, GPU Operator before v23.9, hand-written DaemonSets).

    In order: the node of a pod holding the GPU in the hour (Kubernetes' `spec.nodeName`); the node another
    GPU of the same exporter was found on that way (one exporter serves one node); the `Hostname` itself when
    it is a node Kubernetes knows; the node kube-state-metrics' `kube_pod_info` puts the exporter pod of that
    name on (`exporters`); else the `Hostname` as given (the preflight's `Hostname` check names the fix)."""

    def __init__(self, pods: Iterable[PodFigures], series: Iterable[SeriesFact], nodes: Mapping[str, NodeFact],
                 seen: Iterable[tuple[str, str]], exporters: Mapping[str, str] | None = None):
        pod_node = {(p.namespace, p.pod): p.node for p in pods}
        self.by_uuid: dict[str, str] = {}
        for s in sorted(series, key=lambda s: (s.uuid, s.namespace, s.pod)):
            node = pod_node.get((s.namespace, s.pod))
            if node:
                self.by_uuid.setdefault(s.uuid, node)
        self.nodes = nodes
        self.by_host: dict[str, str] = {}
        for host, uuid in sorted(set(seen)):
            if uuid in self.by_uuid and host not in nodes:
                self.by_host.setdefault(host, self.by_uuid[uuid])
        for host, node in (exporters or {}).items():
            self.by_host.setdefault(host, node)

    def node(self, hostname: str, uuid: str) -> str:
        if uuid in self.by_uuid:
            return self.by_uuid[uuid]
        if hostname in self.nodes:
            return hostname
        return self.by_host.get(hostname, hostname)


def throttle_share(clock: tuple[int, int, float] | None, mask: int) -> tuple[float, list[str]]:
    """Share of the bucket with a counted clock-event reason, from the bitmask's min, max and mean over the
    bucket: exact when the bucket had at most two distinct values (a GPU throttled or not), an estimate
    otherwise. Also the names of the counted reasons seen."""
    if clock is None:
        return 0.0, []
    low, high, mean = clock
    counted = [(v, bool(v & mask)) for v in (low, high)]
    reasons = sorted({name for v, bad in counted if bad for bit, name in CLOCK_EVENT_BITS.items() if v & bit & mask})
    if high == low:
        return (1.0 if counted[1][1] else 0.0), reasons
    at_high = min(max((mean - low) / (high - low), 0.0), 1.0)
    return at_high * counted[1][1] + (1.0 - at_high) * counted[0][1], reasons


REASONS = ("xid", "throttle", "remap", "ecc", "vanished")


@dataclass(frozen=True)
class StillGone:
    """A GPU found vanished in the hour before, with who held it then (a vanished GPU stays so while it has no
    sample at all)."""

    node: str
    uuid: str
    holder: tuple[str, str]  # (namespace, pod) of its last holder, ("", "") when none


class Holder(TypedDict):
    """A pod holding a flagged GPU in the hour, as an unhealthy_gpu finding's detail lists it."""

    team: str
    namespace: str
    workload: str
    pod: str
    gpu_hours: float
    cost: str  # exact decimal, as text (JSON)


def unhealthy(
    health: Sequence[DeviceHealth],
    vanished: Sequence[VanishedDevice],
    still_gone: Sequence[StillGone],
    pods: Sequence[PodFigures],
    series: Sequence[SeriesFact],
    nodes: Mapping[str, NodeFact],
    bucket_seconds: float,
    p: Params,
    exporters: Mapping[str, str] | None = None,
) -> list[HourFinding]:
    """One finding per physical GPU and reason, for each hour with:

    * xid: an XID code of `xid_codes` seen (the value is the last code, not a count);
    * throttle: a counted clock-event reason (`throttle_mask`) set in the hour (estimated share of the hour at
      least `throttle_min_share`; 0: any sample);
    * remap: a row-remap failure, or uncorrectable remapped rows added;
    * ecc: double-bit ECC errors added;
    * vanished: no sample of the GPU in the hour (it reported the hour before, or was found vanished then),
      its node present the whole hour, Ready, schedulable and advertising GPUs.

    GPU-hours and cost: the GPU's hours in the bucket at its node's price. Infra loss (`allocated_*`): what the
    pods holding it were charged for it in the hour (each pod's allocation split over its device series;
    a vanished GPU's holder is the pod its last series named). Team, pod: the holder with the most GPU-hours.
    """
    hours_bucket = bucket_seconds / 3600.0
    where = DeviceNodes(pods, series, nodes, [(h.node, h.uuid) for h in health] + [(v.node, v.uuid) for v in vanished],
                        exporters)
    by_name = {(pod.namespace, pod.pod): pod for pod in pods}
    flagged: dict[str, dict[str, Detail]] = defaultdict(dict)  # uuid -> reason -> detail
    node_of: dict[str, str] = {}  # uuid -> its Kubernetes node (DeviceNodes)
    for h in health:
        node_of[h.uuid] = where.node(h.node, h.uuid)
        codes = sorted(c for c in h.xid_codes if c in p.xid_codes)
        if codes:
            flagged[h.uuid]["xid"] = {"xid_codes": codes}
        share, names = throttle_share(h.clock_events, p.throttle_mask)
        if names and share >= p.throttle_min_share:
            flagged[h.uuid]["throttle"] = {
                "reasons": names, "throttled_seconds": _dec(share * bucket_seconds),
                "power_violation_seconds": _dec(h.power_violation_seconds),
                "thermal_violation_seconds": _dec(h.thermal_violation_seconds)}
        if h.row_remap_failure or h.uncorrectable_remapped_rows > 0:
            flagged[h.uuid]["remap"] = {"row_remap_failure": h.row_remap_failure,
                                        "uncorrectable_remapped_rows": h.uncorrectable_remapped_rows}
        if h.ecc_dbe > 0:
            flagged[h.uuid]["ecc"] = {"ecc_dbe": h.ecc_dbe}
    last_holder: dict[str, tuple[str, str]] = {}
    for v in vanished:
        # A vanished GPU has no series in the hour: its last holder's node, else as DeviceNodes finds it.
        holder = by_name.get((v.namespace, v.pod))
        node = holder.node if holder is not None else where.node(v.node, v.uuid)
        if _node_whole(node, nodes, bucket_seconds):
            node_of[v.uuid] = node
            flagged[v.uuid]["vanished"] = {"last_seen": v.last_seen.isoformat()}
            last_holder[v.uuid] = (v.namespace, v.pod)
    for g in still_gone:
        if g.uuid not in last_holder and _node_whole(g.node, nodes, bucket_seconds):
            node_of[g.uuid] = g.node  # as found (resolved) the hour before
            flagged[g.uuid]["vanished"] = {}
            last_holder[g.uuid] = g.holder
    if not flagged:
        return []
    on_gpu: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))  # uuid -> pod uid -> hours
    for uid, entries in pod_devices(pods, series).items():
        for s, hours in entries:
            on_gpu[s.uuid][uid] += hours
    by_uid = {pod.uid: pod for pod in pods}
    out = []
    for uuid, reasons in sorted(flagged.items(), key=lambda item: (node_of[item[0]], item[0])):
        node = node_of[uuid]
        held = dict(on_gpu.get(uuid, {}))  # a UUID names one GPU in the fleet: its holders wherever listed
        gone = last_holder.get(uuid)
        if not held and gone and gone in by_name:
            pod = by_name[gone]  # its series vanished with the GPU: the GPU's share of the pod
            held = {pod.uid: pod.allocated / max(round(pod.gpus), 1) if pod.gpus >= 1 else pod.allocated}
        holders: list[Holder] = []
        for uid, hours in sorted(held.items()):
            pod = by_uid[uid]
            holders.append({"team": pod.team, "namespace": pod.namespace, "workload": pod.workload,
                            "pod": pod.pod, "gpu_hours": _dec(hours), "cost": str(priced(hours, pod.price)[0])})
        top = max(holders, key=lambda h: (h["gpu_hours"], h["team"], h["namespace"], h["pod"]), default=None)
        fact = nodes.get(node)
        cost, unpriced = priced(hours_bucket, fact.price if fact else None)
        held_hours = sum((gh(h["gpu_hours"]) for h in holders), ZERO)
        held_cost = sum((Decimal(h["cost"]) for h in holders), ZERO)
        sums = {f"holder:{h['team']}|{h['namespace']}|{h['workload']}|{h['pod']}": str(gh(h["gpu_hours"]))
                for h in holders}
        for reason, info in reasons.items():
            tags = [reason, *(f"xid:{c}" for c in info.get("xid_codes", [])),
                    *(f"clock:{n}" for n in info.get("reasons", []))]
            out.append(HourFinding(
                kind=Kind.UNHEALTHY_GPU, subject=f"{node}/{uuid}/{reason}",
                team=top["team"] if top else "", namespace=top["namespace"] if top else "",
                workload=top["workload"] if top else "", pod=top["pod"] if top else "", node=node, gpu_uuid=uuid,
                gpu_hours=gh(hours_bucket), cost=cost, unpriced_gpu_hours=unpriced, allocated_gpu_hours=held_hours,
                allocated_cost=held_cost,
                detail=plain({"reason": reason, **info, "holders": holders, "tags": tags, "sums": sums}),
            ))
    return out


def _node_whole(node: str, nodes: Mapping[str, NodeFact], bucket_seconds: float) -> bool:
    """The node was there the whole bucket, available (Ready, schedulable, advertising GPUs)."""
    fact = nodes.get(node)
    return fact is not None and not fact.unavailable and fact.present_seconds >= bucket_seconds - 1.0


# ---- Activity on GPUs nobody holds ----


def unattributed(unheld: Sequence[DeviceActivity], pods: Sequence[PodFigures], series: Sequence[SeriesFact],
                 nodes: Mapping[str, NodeFact], bucket_seconds: float, p: Params,
                 exporters: Mapping[str, str] | None = None) -> list[HourFinding]:
    """A device (whole GPU or MIG instance) whose series without a pod identity averaged above
    `unattributed_threshold` over the hour, that no pod's series named in the hour, on a node with no held GPU
    left unmeasured (else the activity may be an unlabelled holder's: an attribution gap, shown as coverage).
    Never on a node whose GPUs DRA claims or HAMi fractions hand out: their series carry no device-plugin pod
    (HAMi tenants are measured by the GPU's series; an unattributed DRA device is `missing_attribution`).
    GPU-hours: the device's share of a GPU x the bucket's hours; cost: at the node's price (capacity nobody pays
    for); detail: the activity and the working GPU-hours it stands for."""
    names = {(pod.namespace, pod.pod) for pod in pods}
    held = {(s.uuid, s.gpu_instance_id) for s in series if (s.namespace, s.pod) in names}
    held_gpus = {uuid for uuid, _gi in held}
    unmeasured_nodes = {pod.node for pod in pods if pod.unmeasured > EPS}
    where = DeviceNodes(pods, series, nodes, [(d.node, d.uuid) for d in unheld], exporters)
    out = []
    for d in sorted((replace(d, node=where.node(d.node, d.uuid)) for d in unheld),
                    key=lambda d: (d.node, d.uuid, d.gpu_instance_id)):
        if d.value <= p.unattributed_threshold or d.node in unmeasured_nodes:
            continue
        fact = nodes.get(d.node)
        if fact is not None and fact.gpu.sharing in NOT_DEVICE_PLUGIN:
            continue
        mig = fact is not None and fact.gpu.sharing in (MIG_MIXED, MIG_SINGLE)
        if mig and not d.gpu_instance_id:
            continue  # a MIG GPU's own series sums its instances: the instances are judged instead
        if (d.uuid, d.gpu_instance_id) in held or (not d.gpu_instance_id and d.uuid in held_gpus):
            continue
        share = 1.0
        if d.gpu_instance_id and fact is not None:
            share = fact.gpu.instance_share(d.profile) or 1.0
        hours = share * bucket_seconds / 3600.0
        cost, unpriced = priced(hours, fact.price if fact else None)
        subject = f"{d.node}/{d.uuid}" + (f"/{d.gpu_instance_id}" if d.gpu_instance_id else "")
        detail: Detail = {"activity": _dec(d.value), "working_gpu_hours": _dec(d.value * hours), "share": _dec(share)}
        if d.profile:
            detail["profile"] = d.profile
        if fact is not None:
            detail.update(node_group=fact.node_group, gpu_model=fact.gpu_model)
        out.append(HourFinding(
            kind=Kind.UNATTRIBUTED_ACTIVITY, subject=subject, node=d.node, gpu_uuid=d.uuid, gpu_hours=gh(hours),
            cost=cost, unpriced_gpu_hours=unpriced, detail=plain(detail),
        ))
    return out


# ---- Missing signals and tenant labels (from the bucket's own record) ----


def missing_signal(pods: Sequence[PodFigures], series: int, signals: Iterable[str], signal: str, metric: str
                   ) -> list[HourFinding]:
    """Pods held GPUs but the bucket had no DCGM series at all, or series without the default signal, and no pod
    was measured under it: their hours are unmeasured under it. GPU-hours and cost: the unmeasured ones."""
    if not pods or (series and signal in set(signals)) or any(pod.working + pod.idle > 0 for pod in pods):
        return []  # (a pod measured under the signal: the signal was there)
    hours = math.fsum(pod.unmeasured for pod in pods)
    if hours <= 0:
        return []
    cost = unpriced = ZERO
    for pod in pods:
        c, u = priced(pod.unmeasured, pod.price)
        cost, unpriced = cost + c, unpriced + u
    reason = "no DCGM series" if not series else f"DCGM series without {metric}"
    detail: Detail = {"signal": signal, "metric": metric, "reason": reason,
                      "fix": str(metrics_fix(metric)) if series else "deploy dcgm-exporter with pod labels"}
    if series:
        detail["line"] = metrics_fix(metric).line  # the metrics-list line to add (stock lists leave it out)
    charge = sum((priced(pod.allocated, pod.price)[0] for pod in pods), ZERO)
    return [HourFinding(
        kind=Kind.MISSING_SIGNAL, subject=signal, gpu_hours=gh(hours), cost=cost, unpriced_gpu_hours=unpriced,
        allocated_gpu_hours=gh(math.fsum(pod.allocated for pod in pods)), allocated_cost=charge,
        detail=plain(detail),
    )]


def team_label_rejected(rejected: Iterable[tuple[str, str, str]], pods: Sequence[PodFigures]) -> list[HourFinding]:
    """Pods whose team label was reported ((uid, label value, reason): `invalid` or `enforced`, not obeyed, or
    `other_team`, obeyed although it names another team than the namespace's); their hours, charged to the team
    the rule chose, are the finding's. Shown to staff and finance only."""
    by_uid = {pod.uid: pod for pod in pods}
    out = []
    for uid, value, reason in sorted(set(rejected)):
        pod = by_uid.get(uid)
        if pod is None:
            continue
        cost, unpriced = priced(pod.allocated, pod.price)
        out.append(HourFinding(
            kind=Kind.TEAM_LABEL_REJECTED, subject=uid, team=pod.team, namespace=pod.namespace,
            workload=pod.workload, pod=pod.pod, node=pod.node, gpu_hours=gh(pod.allocated), cost=cost,
            unpriced_gpu_hours=unpriced, allocated_gpu_hours=gh(pod.allocated), allocated_cost=cost,
            detail=plain({"label": value[:100], "reason": reason, "charged_to": pod.team}),
        ))
    return out


# ---- From snapshots: zero-allocatable nodes ----


@dataclass(frozen=True)
class NodeHourFigures:
    node: str
    node_group: str
    gpu_model: str
    physical_gpus: int
    unavailable: float  # GPU-hours
    price: Decimal | None


def zero_allocatable(flagged: Mapping[str, tuple[int, int]], nodes: Iterable[NodeHourFigures]) -> list[HourFinding]:
    """Nodes a capacity snapshot of the hour showed advertising zero allocatable GPUs (`flagged`: node ->
    (snapshots showing it, snapshots in the hour)), with unavailable GPU-hours in the ledger's node row that
    hour. GPU-hours and cost: those unavailable hours, at the node's price (the platform's)."""
    out = []
    for n in sorted(nodes, key=lambda n: n.node):
        if n.node not in flagged or n.unavailable <= 0:
            continue
        cost, unpriced = priced(n.unavailable, n.price)
        shown, taken = flagged[n.node]
        out.append(HourFinding(
            kind=Kind.ZERO_ALLOCATABLE_NODE, subject=n.node, node=n.node, gpu_hours=gh(n.unavailable), cost=cost,
            unpriced_gpu_hours=unpriced, detail=plain({"node_group": n.node_group, "gpu_model": n.gpu_model,
                                                       "physical_gpus": n.physical_gpus, "snapshots": shown,
                                                       "snapshots_in_hour": taken}),
        ))
    return out


def hour_of(value: datetime) -> datetime:
    return value.replace(minute=0, second=0, microsecond=0)
