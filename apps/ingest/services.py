"""Collection: read the sources for a cluster and hand each hourly bucket to the ledger.

A cycle (beat, every 5 minutes) or a `collect` run:
1. reads the Kubernetes API once and records what it shows (nodes, pod observations, capacity, queues);
2. picks the buckets to (re)compute: the provisional hour, ended hours not yet final, failed buckets whose
   backoff has passed, and on a first run the last 24 hours;
3. per bucket: claims its lease, rebuilds allocations (API observations merged with kube-state-metrics
   history), reads DCGM activity, computes rows and replaces the bucket whole.
A failure marks only that cluster's buckets failed; other clusters are never touched.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.ingest.collectors.kubernetes import KubernetesError, api_client_for, read_snapshot
from apps.ingest.collectors.prometheus import (
    KSM_STEP_SECONDS,
    KsmNode,
    KsmPod,
    PrometheusError,
    PrometheusSource,
    ksm_label,
)
from apps.ingest.collectors.types import ClusterSnapshot, PodInfo
from apps.inventory import services as inventory
from apps.inventory.models import Cluster, Node
from apps.usage import services as ledger_write
from apps.usage.ledger import BucketInputs, NodeFact, PodFact, compute_bucket, effective_request
from apps.usage.models import Bucket, PodObservation

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)
CQ_LABEL = "kueue.x-k8s.io/cluster-queue-name"
LQ_LABEL = "kueue.x-k8s.io/queue-name"
# Node labels the ledger reads; kube-state-metrics exposes them sanitized as label_<key>.
KNOWN_NODE_LABELS = (
    "nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.replicas", "nvidia.com/gpu.memory",
    "nvidia.com/gpu.sharing-strategy", "nvidia.com/mig.strategy",
)
Progress = Callable[[str], None]


def floor_hour(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class CollectReport:
    cluster: str
    written: list[datetime] = field(default_factory=list)
    failed: dict[datetime, str] = field(default_factory=dict)
    skipped: list[datetime] = field(default_factory=list)
    queries: int = 0
    samples: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed


# ---- Kubernetes observations ----

OBSERVATION_FIELDS = ["namespace", "pod", "node", "phase", "labels", "requests", "started", "finished", "last_seen",
                      "gone"]


def _pod_requests(pod: PodInfo) -> dict[str, float]:
    return effective_request([(c.kind, c.resources) for c in pod.containers])


@transaction.atomic
def record_observations(cluster: Cluster, snap: ClusterSnapshot) -> None:
    """Nodes upserted; each GPU pod's allocation interval updated; pods that vanished end at last sight.

    Two workers observing the same cluster at once would race on the same rows: the cluster row's lock
    serializes them (a no-op on SQLite, which serializes writers anyway).
    """
    Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
    inventory.nodes_sync(cluster, snap.nodes, snap.taken_at)
    uids = [p.uid for p in snap.pods]
    # Pods not gone, plus any of this snapshot's pods seen before (a pod can come back after a blip).
    known = {o.uid: o for o in PodObservation.objects.filter(cluster=cluster).filter(Q(gone=False) | Q(uid__in=uids))}
    to_create, to_update = [], []
    for pod in snap.pods:
        obs = known.get(pod.uid)
        if obs is None:
            obs = PodObservation(cluster=cluster, uid=pod.uid, first_seen=snap.taken_at)
            to_create.append(obs)
        else:
            to_update.append(obs)
        obs.namespace, obs.pod, obs.node, obs.phase = pod.namespace, pod.name, pod.node, pod.phase
        obs.labels = pod.labels
        obs.requests = _pod_requests(pod)
        obs.started = pod.started
        # A pod seen with a deletion timestamp ends there at the latest (ledger.md "Allocation").
        obs.finished = pod.finished or (pod.deletion if pod.phase == "Running" and pod.deletion else None)
        obs.last_seen = snap.taken_at
        obs.gone = False
    seen = set(uids)
    for uid, obs in known.items():
        if uid not in seen and not obs.gone:
            obs.gone = True
            if obs.finished is None and obs.started is not None:
                obs.finished = obs.last_seen  # disappeared while running: ends at its last observation
            to_update.append(obs)
    # Bulk writes: a 10,000-GPU cluster has thousands of GPU pods; one UPDATE each dominated the bucket.
    PodObservation.objects.bulk_create(to_create, batch_size=1000)
    PodObservation.objects.bulk_update(to_update, OBSERVATION_FIELDS, batch_size=1000)


# ---- Building one bucket's inputs ----

def _node_labels_from_ksm(k: KsmNode) -> dict[str, str]:
    keys = [*KNOWN_NODE_LABELS, *settings.GPUFINOPS_NODE_GROUP_LABELS]
    return {key: k.labels[ksm_label(key)] for key in keys if ksm_label(key) in k.labels}


def _overlap(a0: datetime, a1: datetime, b0: datetime, b1: datetime) -> float:
    return max((min(a1, b1) - max(a0, b0)).total_seconds(), 0.0)


@dataclass
class _NodeState:
    """One node's state within a bucket, from the API's last observation or kube-state-metrics history."""

    labels: dict[str, str]
    capacity: dict[str, float]
    allocatable: dict[str, float]
    ready: bool
    cordoned: bool
    first: datetime
    last: datetime


def _state_from_api(n: Node, start: datetime, end: datetime) -> _NodeState:
    return _NodeState(
        labels=n.labels,
        capacity={r: float(v) for r, v in n.capacity.items()},
        allocatable={r: float(v) for r, v in n.allocatable.items()},
        ready=n.ready,
        cordoned=n.unschedulable,
        first=max(start, n.created) if n.created else start,
        last=min(end, n.last_seen) if n.gone else end,
    )


def _state_from_ksm(k: KsmNode, start: datetime, end: datetime) -> _NodeState:
    # Samples land every KSM step: a node seen within two steps of an edge was there at the edge.
    tolerance = timedelta(seconds=2 * KSM_STEP_SECONDS)
    return _NodeState(
        labels=_node_labels_from_ksm(k),
        capacity=k.capacity,
        allocatable=k.allocatable,
        ready=k.ready,
        cordoned=k.unschedulable,
        first=start if k.first_seen <= start + tolerance else k.first_seen,
        last=end if k.last_seen >= end - tolerance else k.last_seen,
    )


def _node_state(api: Node | None, k: KsmNode | None, start: datetime, end: datetime) -> _NodeState:
    """The API's labels and capacity (richer), kube-state-metrics' state and presence for the hour (historic)."""
    if k is None:
        return _state_from_api(api, start, end)  # type: ignore[arg-type]
    state = _state_from_ksm(k, start, end)
    if api is not None:
        state.labels = api.labels
        state.capacity = {r: float(v) for r, v in api.capacity.items()} or k.capacity
        if api.created:
            state.first = max(state.first, api.created)
    return state


def _node_facts(
    cluster: Cluster, start: datetime, end: datetime, ksm: list[KsmNode]
) -> list[NodeFact]:
    api_nodes = {
        n.name: n
        for n in Node.objects.filter(cluster=cluster).filter(Q(gone=False) | Q(last_seen__gte=start))
    }
    ksm_nodes = {k.name: k for k in ksm}
    price_cache: dict[str, float | None] = {}
    facts = []
    for name in sorted(set(api_nodes) | set(ksm_nodes)):
        state = _node_state(api_nodes.get(name), ksm_nodes.get(name), start, end)
        cls = inventory.classify_node(state.labels, state.capacity)
        if cls.physical_gpus == 0:
            continue
        present = _overlap(state.first, state.last, start, end)
        if present <= 0:
            continue
        if cls.gpu_model not in price_cache:
            price_cache[cls.gpu_model] = inventory.price_for(cluster, cls.gpu_model, start.date())
        facts.append(
            NodeFact(
                name=name,
                node_group=inventory.node_group_name(state.labels, cls.gpu_model),
                gpu_model=cls.gpu_model,
                physical_gpus=cls.physical_gpus,
                sharing=cls.sharing,
                replicas=cls.replicas,
                compute_slices=cls.compute_slices,
                mig_single_slices=cls.mig_single_slices,
                mig_memory_fraction=cls.mig_memory_fraction,
                present_seconds=present,
                unavailable=(not state.ready) or state.cordoned or sum(state.allocatable.values()) <= 0,
                price=price_cache[cls.gpu_model],
            )
        )
    return facts


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


def _held_intervals(
    cluster: Cluster, start: datetime, end: datetime, ksm: list[KsmPod]
) -> list[_Held]:
    """API observations merged with kube-state-metrics history; the API wins where it saw the pod."""
    tolerance = timedelta(seconds=2 * KSM_STEP_SECONDS)
    team_key = ksm_label(settings.GPUFINOPS_TEAM_LABEL)
    ksm_by_uid = {k.uid: k for k in ksm}
    out: dict[str, _Held] = {}
    observed = PodObservation.objects.filter(cluster=cluster, started__lt=end).filter(
        Q(finished__isnull=True) | Q(finished__gt=start)
    )
    for o in observed:
        k = ksm_by_uid.get(o.uid)
        finished = o.finished
        running = o.finished is None and not o.gone
        if k and o.gone and k.finished:
            finished = k.finished  # the pod completed while we were not looking
        out[o.uid] = _Held(o.uid, o.namespace, o.pod, o.node, o.labels, o.requests, o.started, finished, running)
    for k in ksm:
        if k.uid in out or not k.node or k.started is None:
            continue
        running = k.finished is None and k.last_seen is not None and k.last_seen >= end - tolerance
        finished = k.finished or (None if running else k.last_seen)
        containers = [("app", r) for r in k.app_requests.values()] + [("init", r) for r in k.init_requests.values()]
        labels = {}
        if team_key in k.labels:
            labels[settings.GPUFINOPS_TEAM_LABEL] = k.labels[team_key]
        for key in (CQ_LABEL, LQ_LABEL):
            if ksm_label(key) in k.labels:
                labels[key] = k.labels[ksm_label(key)]
        out[k.uid] = _Held(k.uid, k.namespace, k.name, k.node, labels, effective_request(containers),
                           k.started, finished, running)
    return list(out.values())


def build_inputs(
    cluster: Cluster,
    hour: datetime,
    end: datetime,
    source: PrometheusSource,
    namespaces: dict[str, dict[str, str]],
) -> tuple[BucketInputs, bool]:
    """Everything compute_bucket needs for [hour, end); returns also whether DCGM data was present."""
    ksm_pods = source.ksm_pods(hour, end)
    ksm_nodes = source.ksm_nodes(hour, end)
    ns_labels = {**_ns_labels_from_ksm(source.ksm_namespace_labels(hour, end)), **namespaces}
    mapping = inventory.namespace_mapping(cluster)
    pods = []
    for h in _held_intervals(cluster, hour, end, ksm_pods):
        if h.started is None or not h.node:
            continue  # never bound: holds nothing
        held_from = max(h.started, hour)
        held_to = end if h.running_through or h.finished is None else min(h.finished, end)
        held = (held_to - held_from).total_seconds()
        if held <= 0:
            continue
        team = inventory.team_for(h.labels, ns_labels.get(h.namespace, {}), h.namespace, mapping)
        pods.append(PodFact(
            uid=h.uid, namespace=h.namespace, name=h.name, node=h.node, team=team, requests=h.requests,
            held_seconds=held, cluster_queue=h.labels.get(CQ_LABEL, ""), local_queue=h.labels.get(LQ_LABEL, ""),
        ))
    nodes = _node_facts(cluster, hour, end, ksm_nodes)
    series = source.activity(hour, end)
    has_dcgm = bool(series) or source.has_dcgm(hour, end)
    inputs = BucketInputs(
        hour=hour, seconds=(end - hour).total_seconds(), nodes=nodes, pods=pods, series=series,
        mig_weight_by_memory=settings.GPUFINOPS_MIG_WEIGHT_BY_MEMORY,
    )
    return inputs, has_dcgm


def _ns_labels_from_ksm(raw: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    key = settings.GPUFINOPS_TEAM_LABEL
    return {ns: {key: labels[ksm_label(key)]} for ns, labels in raw.items() if ksm_label(key) in labels}


# ---- Buckets ----

def collect_bucket(
    cluster: Cluster,
    hour: datetime,
    now: datetime,
    source: PrometheusSource,
    namespaces: dict[str, dict[str, str]],
    owner: str,
    report: CollectReport,
) -> None:
    if not ledger_write.claim_bucket(cluster, hour, owner):
        report.skipped.append(hour)  # another worker holds it: a duplicate tick is harmless
        return
    end = min(hour + HOUR, now)
    try:
        inputs, has_dcgm = build_inputs(cluster, hour, end, source, namespaces)
        result = compute_bucket(inputs)
        status = Bucket.Status.OK
        if not has_dcgm and result.pods:
            status = Bucket.Status.SOURCE_MISSING  # written with everything unmeasured; retried later
        inventory.ensure_teams({p.fact.team for p in result.pods})
        ledger_write.write_bucket(
            cluster, hour, result, owner=owner, covered_until=end, status=status,
            extra_warnings=list(source.warnings),
        )
        source.warnings.clear()
        report.written.append(hour)
    except (PrometheusError, ledger_write.LeaseLost) as exc:
        ledger_write.mark_failed(cluster, hour, owner, str(exc), now=now)
        report.failed[hour] = str(exc)
    except Exception as exc:
        log.exception("bucket %s %s crashed", cluster.name, hour)
        ledger_write.mark_failed(cluster, hour, owner, f"{type(exc).__name__}: {exc}", now=now)
        report.failed[hour] = f"{type(exc).__name__}: {exc}"


def due_hours(cluster: Cluster, now: datetime) -> list[datetime]:
    """The provisional hour, ended hours not yet final since the last final one, and failed buckets due."""
    current = floor_hour(now)
    last_final = (
        Bucket.objects.filter(cluster=cluster, state=Bucket.State.FINAL, status=Bucket.Status.OK)
        .order_by("-hour").values_list("hour", flat=True).first()
    )
    first = last_final + HOUR if last_final else current - timedelta(hours=settings.GPUFINOPS_FIRST_RUN_HOURS)
    hours = set()
    h = first
    while h <= current:
        hours.add(h)
        h += HOUR
    retry = Bucket.objects.filter(cluster=cluster).exclude(status=Bucket.Status.OK).filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
    )
    hours.update(retry.values_list("hour", flat=True))
    not_final = Bucket.objects.filter(cluster=cluster, state=Bucket.State.PROVISIONAL, hour__lt=current)
    hours.update(not_final.values_list("hour", flat=True))
    return sorted(hours)


def collect_cluster(
    cluster: Cluster,
    hours: list[datetime] | None = None,
    *,
    now: datetime | None = None,
    progress: Progress | None = None,
    source: PrometheusSource | None = None,
) -> CollectReport:
    """One collection for one cluster: observe Kubernetes, then (re)write the given or due buckets."""
    now = now or timezone.now()
    report = CollectReport(cluster.name)
    owner = worker_id()
    hours = sorted(set(hours)) if hours is not None else due_hours(cluster, now)
    hours = [h for h in hours if h < now]
    try:
        api_client = api_client_for(cluster)
        snap = read_snapshot(cluster, api_client)
    except KubernetesError as exc:
        for h in hours:
            Bucket.objects.get_or_create(cluster=cluster, hour=h)
            ledger_write.mark_failed(cluster, h, owner, str(exc), now=now)
            report.failed[h] = str(exc)
        return report
    record_observations(cluster, snap)
    record_side_snapshots(cluster, snap, api_client)
    namespaces = {ns.name: ns.labels for ns in snap.namespaces}
    try:
        source = source or PrometheusSource(cluster)
    except PrometheusError as exc:
        for h in hours:
            Bucket.objects.get_or_create(cluster=cluster, hour=h)
            ledger_write.mark_failed(cluster, h, owner, str(exc), status=Bucket.Status.SOURCE_MISSING, now=now)
            report.failed[h] = str(exc)
        return report
    for i, h in enumerate(hours, 1):
        collect_bucket(cluster, h, now, source, namespaces, owner, report)
        if progress:
            state = "failed: " + report.failed[h] if h in report.failed else "ok"
            progress(f"[{i}/{len(hours)}] {cluster.name} {h:%Y-%m-%dT%H:00Z} {state}")
    report.queries, report.samples = source.queries, source.samples
    return report


def record_side_snapshots(cluster: Cluster, snap: ClusterSnapshot, api_client: object) -> None:
    """Capacity and queue snapshots ride on the same observation (same time, so pending pods and pending
    workloads land in one collection); their failure never fails the ledger."""
    from apps.capacity import services as capacity
    from apps.queues import services as queues
    from apps.queues.collectors import KueueError

    try:
        capacity.record_capacity_snapshot(cluster, snap)
    except Exception:
        log.exception("capacity snapshot failed for %s", cluster.name)
    try:
        queues.record_queue_snapshot(cluster, api_client, snap.taken_at)
    except KueueError as exc:
        log.warning("Kueue could not be read for %s: %s", cluster.name, exc)
    except Exception:
        log.exception("queue snapshot failed for %s", cluster.name)


def hours_between(since: datetime, until: datetime) -> list[datetime]:
    """Every hourly bucket overlapping [since, until)."""
    h, out = floor_hour(since), []
    while h < until:
        out.append(h)
        h += HOUR
    return out
