"""Assembling one bucket's inputs: what `ledger.compute_bucket` needs for `[hour, end)` of one cluster.

Allocations come from the Kubernetes API's observations (`PodObservation`, nodes in the inventory) merged
with kube-state-metrics history for what the collector did not see; activity comes from DCGM series. The
metrics source is any `MetricsSource` (the Prometheus adapter in production).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Q

from apps.inventory import gpus
from apps.inventory.gpus.holds import Hold
from apps.inventory.gpus.vocabulary import AllocationMode
from apps.inventory.models import Cluster, Node
from apps.inventory.observations import KUEUE_CLUSTER_QUEUE_LABEL, KUEUE_QUEUE_LABEL, ContainerRequest
from apps.inventory.selectors import price_for
from apps.inventory.teams import TeamChoice, TeamRule
from apps.inventory.workloads import WORKLOAD_LABELS, OwnerMap, workload_of
from apps.usage.ledger import BucketInputs, ClaimFact, NodeFact, PodFact
from apps.usage.models import ClaimObservation, PodObservation
from apps.usage.sources import HISTORY_STEP_SECONDS, MetricsSource, NodeHistory, PodHistory

# A sample lands every history step: something seen within two steps of an edge was there at the edge.
EDGE_TOLERANCE = timedelta(seconds=2 * HISTORY_STEP_SECONDS)


def pod_label_keys() -> tuple[str, ...]:
    """The pod labels the ledger reads: team, Kueue queues, and the operator labels that name workloads."""
    return (settings.GPUFINOPS_TEAM_LABEL, KUEUE_CLUSTER_QUEUE_LABEL, KUEUE_QUEUE_LABEL, *WORKLOAD_LABELS)


def node_label_keys() -> tuple[str, ...]:
    return (*gpus.GPU_NODE_LABELS, *settings.GPUFINOPS_NODE_GROUP_LABELS)


@dataclass(frozen=True)
class AssembledBucket:
    """A bucket's inputs, and what the assembly saw on the way."""

    inputs: BucketInputs
    has_dcgm: bool  # any DCGM activity series existed in the bucket
    rejected_teams: tuple[tuple[PodFact, TeamChoice], ...]  # pods whose team label was reported (teams.py)
    warnings: tuple[str, ...] = ()  # tenant input that was refused or cut, said in the bucket's warnings


# Longest names the ledger stores (Kubernetes caps names at 253 and label values at 63). Anything longer
# came from a source that did not validate it: it is cut and reported, and its hours are still counted.
NAME_LIMIT = 253
LABEL_LIMIT = 63


def _clip(value: str, limit: int, what: str, warnings: list[str]) -> str:
    if len(value) <= limit:
        return value
    warnings.append(f"{what} {value[:40]!r}... is {len(value)} characters; cut to {limit}")
    return value[:limit]


def _overlap(a0: datetime, a1: datetime, b0: datetime, b1: datetime) -> float:
    return max((min(a1, b1) - max(a0, b0)).total_seconds(), 0.0)


# ---- Nodes ----


@dataclass
class _NodeState:
    """One node's state within a bucket, from the API's last observation or kube-state-metrics history."""

    labels: Mapping[str, str]
    capacity: Mapping[str, object]
    allocatable: Mapping[str, object]
    ready: bool
    cordoned: bool
    first: datetime
    last: datetime


def _state_from_api(n: Node, start: datetime, end: datetime) -> _NodeState:
    return _NodeState(
        labels=n.labels,
        capacity=n.capacity,
        allocatable=n.allocatable,
        ready=n.ready,
        cordoned=n.unschedulable,
        first=max(start, n.created) if n.created else start,
        last=min(end, n.last_seen) if n.gone else end,
    )


def _state_from_history(k: NodeHistory, start: datetime, end: datetime) -> _NodeState:
    return _NodeState(
        labels=k.labels,
        capacity=k.capacity,
        allocatable=k.allocatable,
        ready=k.ready,
        cordoned=k.unschedulable,
        first=start if k.first_seen <= start + EDGE_TOLERANCE else k.first_seen,
        last=end if k.last_seen >= end - EDGE_TOLERANCE else k.last_seen,
    )


def _node_state(api: Node | None, k: NodeHistory | None, start: datetime, end: datetime) -> _NodeState:
    """The API's labels and capacity (richer), kube-state-metrics' state and presence for the hour (historic)."""
    if k is None:
        assert api is not None
        return _state_from_api(api, start, end)
    state = _state_from_history(k, start, end)
    if api is not None:
        state = replace(state, labels=api.labels, capacity=api.capacity or k.capacity)
        if api.created:
            state.first = max(state.first, api.created)
    return state


def _node_gpus(api: Node | None, state: _NodeState) -> gpus.GpuNode:
    """A DRA or HAMi node's GPUs as collection read them (its slices or register: kube-state-metrics knows neither),
    any other node's from its labels and capacity."""
    if api is not None and api.sharing in gpus.NOT_DEVICE_PLUGIN:
        return gpus.GpuNode(api.gpu_model, api.physical_gpus, api.sharing, gpus.compute_slices(api.gpu_model))
    return gpus.classify_node(state.labels, state.capacity)


def node_facts(cluster: Cluster, start: datetime, end: datetime, history: list[NodeHistory]) -> list[NodeFact]:
    """Every GPU node present in `[start, end)`, classified by the GPU rules, with its price."""
    api_nodes = {
        n.name: n for n in Node.objects.filter(cluster=cluster).filter(Q(gone=False) | Q(last_seen__gte=start))
    }
    by_name = {k.name: k for k in history}
    prices: dict[str, Decimal | None] = {}
    facts = []
    for name in sorted(set(api_nodes) | set(by_name)):
        state = _node_state(api_nodes.get(name), by_name.get(name), start, end)
        gpu = _node_gpus(api_nodes.get(name), state)
        present = _overlap(state.first, state.last, start, end)
        if gpu.physical_gpus == 0 or present <= 0:
            continue
        if gpu.gpu_model not in prices:
            prices[gpu.gpu_model] = price_for(cluster, gpu.gpu_model, start.date())
        facts.append(
            NodeFact(
                name=name,
                node_group=gpus.node_group(state.labels, gpu.gpu_model, settings.GPUFINOPS_NODE_GROUP_LABELS),
                gpu=gpu,
                present_seconds=present,
                unavailable=(not state.ready) or state.cordoned or gpus.is_zero_allocatable(state.allocatable,
                                                                                             gpu.sharing),
                price=prices[gpu.gpu_model],
            )
        )
    return facts


# ---- Pods ----


@dataclass
class _Held:
    uid: str
    namespace: str
    name: str
    node: str
    labels: dict[str, str]
    requests: dict[str, float]
    started: datetime | None
    finished: datetime | None
    running_through: bool
    workload: str
    holds: tuple[Hold, ...] = ()
    allocation_mode: str = AllocationMode.DEVICE_PLUGIN


def _held_intervals(
    cluster: Cluster, start: datetime, end: datetime, history: list[PodHistory], owners: OwnerMap
) -> list[_Held]:
    """API observations merged with kube-state-metrics history; the API wins where it saw the pod."""
    by_uid = {k.uid: k for k in history}
    out: dict[str, _Held] = {}
    observed = PodObservation.objects.filter(cluster=cluster, started__lt=end).filter(
        Q(finished__isnull=True) | Q(finished__gt=start)
    )
    for o in observed:
        k = by_uid.get(o.uid)
        finished = o.finished
        running = o.finished is None and not o.gone
        if k and o.gone and k.finished:
            finished = k.finished  # the pod completed while we were not looking
        workload = o.workload or workload_of(o.namespace, o.pod, None, o.labels, {})
        out[o.uid] = _Held(o.uid, o.namespace, o.pod, o.node, o.labels, o.requests, o.started, finished, running,
                           workload, tuple(Hold.from_json(h) for h in o.holds or []), o.allocation_mode)
    for k in history:
        if k.uid in out or not k.node or k.started is None:
            continue
        running = k.finished is None and k.last_seen is not None and k.last_seen >= end - EDGE_TOLERANCE
        finished = k.finished or (None if running else k.last_seen)
        containers = [ContainerRequest(c, "app", r) for c, r in k.app_requests.items()]
        containers += [ContainerRequest(c, "init", r) for c, r in k.init_requests.items()]
        out[k.uid] = _Held(k.uid, k.namespace, k.name, k.node, dict(k.labels), gpus.effective_request(containers),
                           k.started, finished, running, workload_of(k.namespace, k.name, k.owner, k.labels, owners))
    return list(out.values())


def assemble_bucket(
    cluster: Cluster,
    hour: datetime,
    end: datetime,
    source: MetricsSource,
    namespace_labels: Mapping[str, Mapping[str, str]],
) -> AssembledBucket:
    """Everything compute_bucket needs for `[hour, end)`."""
    history = source.pod_history(hour, end, pod_label_keys())
    labels = {**source.namespace_labels(hour, end, (settings.GPUFINOPS_TEAM_LABEL,)), **namespace_labels}
    rule = TeamRule.for_cluster(cluster, labels)
    pods: list[PodFact] = []
    rejected: list[tuple[PodFact, TeamChoice]] = []
    warnings: list[str] = []
    for h in _held_intervals(cluster, hour, end, history, source.owner_history(hour, end)):
        if h.started is None or not h.node:
            continue  # never bound: holds nothing
        held_from = max(h.started, hour)
        held_to = end if h.running_through or h.finished is None else min(h.finished, end)
        held = (held_to - held_from).total_seconds()
        if held <= 0:
            continue
        team = rule.for_object(h.labels, h.namespace)
        pod = PodFact(
            uid=_clip(h.uid, 64, "pod uid", warnings),
            namespace=_clip(h.namespace, NAME_LIMIT, "namespace", warnings),
            name=_clip(h.name, NAME_LIMIT, "pod name", warnings),
            node=_clip(h.node, NAME_LIMIT, "node name", warnings),
            team=team.team,
            requests=h.requests,
            held_seconds=held,
            cluster_queue=_clip(h.labels.get(KUEUE_CLUSTER_QUEUE_LABEL, ""), NAME_LIMIT, "cluster queue", warnings),
            local_queue=_clip(h.labels.get(KUEUE_QUEUE_LABEL, ""), NAME_LIMIT, "local queue", warnings),
            workload=_clip(h.workload, 320, "workload", warnings),
            holds=h.holds,
            span=((held_from - hour).total_seconds(), (held_to - hour).total_seconds()),
            allocation_mode=h.allocation_mode,
        )
        pods.append(pod)
        if team.rejected:
            rejected.append((pod, team))
            said = "names another team than its namespace's" if team.obeyed else f"not obeyed ({team.reason})"
            warnings.append(f"pod {pod.namespace}/{pod.name}: team label {team.rejected[:80]!r} {said}; "
                            f"charged to {team.team}")
    nodes = node_facts(cluster, hour, end, source.node_history(hour, end, node_label_keys()))
    series = source.activity(hour, end)
    inputs = BucketInputs(
        hour=hour, seconds=(end - hour).total_seconds(), nodes=nodes, pods=pods, series=series,
        mig_weight_by_memory=settings.GPUFINOPS_MIG_WEIGHT_BY_MEMORY,
        claims=claim_facts(cluster, hour, end, rule), gpu_values=tenant_gpu_values(pods, hour, source),
    )
    return AssembledBucket(inputs, bool(series) or source.has_dcgm(hour, end), tuple(rejected), tuple(warnings))


# ---- GPUs handed out by claims and fractions ----


def claim_facts(cluster: Cluster, hour: datetime, end: datetime, rule: TeamRule) -> list[ClaimFact]:
    """The claims seen allocated during `[hour, end)`, each with its stretches of allocation in the bucket; a
    stretch still open (allocated at the last read) lasts to the bucket's end."""
    rows = ClaimObservation.objects.filter(cluster=cluster, allocated_from__lt=end).filter(
        Q(allocated_until__isnull=True) | Q(allocated_until__gt=hour)).order_by("uid", "allocated_from")
    spans: dict[str, list[tuple[float, float]]] = {}
    latest: dict[str, ClaimObservation] = {}
    for row in rows:
        start, stop = max(row.allocated_from, hour), min(row.allocated_until or end, end)
        if stop > start:
            spans.setdefault(row.uid, []).append(((start - hour).total_seconds(), (stop - hour).total_seconds()))
            latest[row.uid] = row
    return [
        ClaimFact(uid=uid, namespace=row.namespace, name=row.name, node=row.node,
                  team=rule.for_object(row.labels, row.namespace).team,
                  devices=tuple(Hold.from_json(d) for d in row.devices), allocated=tuple(spans[uid]))
        for uid, row in sorted(latest.items())
    ]


def tenant_gpu_values(
    pods: list[PodFact], hour: datetime, source: MetricsSource
) -> dict[tuple[str, str], dict[str, float]]:
    """(pod uid, GPU UUID) -> each signal of a HAMi tenant's GPU over the part of the bucket the pod held it
    (dcgm-exporter names no HAMi tenant: the GPU's own series measure each, times its share)."""
    by_span: dict[tuple[float, float], list[PodFact]] = defaultdict(list)
    for pod in pods:
        if any(h.mode == AllocationMode.HAMI for h in pod.holds):
            by_span[pod.held_span].append(pod)
    out: dict[tuple[str, str], dict[str, float]] = {}
    for (a, b), group in sorted(by_span.items()):
        uuids = {h.gpu_uuid for p in group for h in p.holds if h.mode == AllocationMode.HAMI}
        values = source.device_activity(hour + timedelta(seconds=a), hour + timedelta(seconds=b), uuids)
        for pod in group:
            for h in pod.holds:
                if h.mode == AllocationMode.HAMI and h.gpu_uuid in values:
                    out[(pod.uid, h.gpu_uuid)] = values[h.gpu_uuid]
    return out
