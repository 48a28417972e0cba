"""Kubernetes collector: paginated LISTs through the official client, reduced to the plain dataclasses of
`apps.inventory.observations` (Kueue objects through `kueue.py`, on the same client and at the same time)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from kubernetes import client, config

from apps.ingest.collectors.kueue import KueueError, read_kueue
from apps.ingest.collectors.limits import PAGE_SIZE, request_timeout
from apps.inventory.gpus import is_gpu_node, is_nvidia_resource
from apps.inventory.models import Cluster
from apps.inventory.observations import ClusterSnapshot, ContainerRequest, NamespaceInfo, NodeInfo, PodInfo

log = logging.getLogger(__name__)


class KubernetesError(Exception):
    """The cluster could not be read (unreachable, 5xx, timeout, bad credentials)."""


def api_client_for(cluster: Cluster) -> client.ApiClient:
    """An ApiClient for the cluster: in-cluster service account, or kubeconfig (path/context, else default)."""
    cfg = client.Configuration()
    try:
        if cluster.in_cluster:
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(
                config_file=cluster.kubeconfig_path or None,
                context=cluster.kube_context or None,
                client_configuration=cfg,
            )
    except Exception as exc:  # the config loaders raise several unrelated types
        raise KubernetesError(f"cannot load Kubernetes configuration: {exc}") from exc
    cfg.retries = 0  # a failed bucket is retried by bucket state, not by urllib3
    return client.ApiClient(configuration=cfg)


def _paged(list_fn: Callable[..., Any], **kwargs: Any) -> Iterator[Any]:
    token: str | None = None
    while True:
        page = list_fn(limit=PAGE_SIZE, _continue=token, _request_timeout=request_timeout(), **kwargs)
        yield from page.items or []
        token = page.metadata._continue if page.metadata else None
        if not token:
            return


def _nvidia(resources: dict[str, Any] | None) -> dict[str, str]:
    return {k: str(v) for k, v in (resources or {}).items() if is_nvidia_resource(k)}


def parse_quantity(value: Any) -> float | None:
    """Extended resources are integers; reject anything else instead of guessing."""
    try:
        q = float(str(value))
    except (TypeError, ValueError):
        return None
    if q != q or q < 0 or q in (float("inf"),):
        return None
    return q


def _to_node(n: Any) -> NodeInfo:
    status = n.status
    ready = any(c.type == "Ready" and c.status == "True" for c in (status.conditions or []))
    return NodeInfo(
        name=n.metadata.name,
        labels=dict(n.metadata.labels or {}),
        capacity=_nvidia(status.capacity),
        allocatable=_nvidia(status.allocatable),
        ready=ready,
        unschedulable=bool(n.spec.unschedulable) if n.spec else False,
        created=n.metadata.creation_timestamp,
    )


def _container_resources(c: Any) -> dict[str, float]:
    res = c.resources
    requests = _nvidia(res.requests if res else None)
    limits = _nvidia(res.limits if res else None)
    merged = {**limits, **requests}  # extended resources: requests equal limits; read limits when absent
    out: dict[str, float] = {}
    for k, v in merged.items():
        q = parse_quantity(v)
        if q is None:
            log.warning("ignoring unparsable quantity %r for %s in container %s", v, k, c.name)
            continue
        out[k] = q
    return out


def _finished(pod: Any) -> datetime | None:
    latest: datetime | None = None
    for cs in (pod.status.container_statuses or []) if pod.status else []:
        term = cs.state.terminated if cs.state else None
        if term and term.finished_at and (latest is None or term.finished_at > latest):
            latest = term.finished_at
    return latest


def _controller(meta: Any) -> tuple[str, str] | None:
    """(kind, name) of the object's controller among its ownerReferences, or None."""
    for ref in getattr(meta, "owner_references", None) or []:
        if ref.controller:
            return ref.kind, ref.name
    return None


def _to_pod(p: Any) -> PodInfo | None:
    spec, status = p.spec, p.status
    containers: list[ContainerRequest] = []
    for c in spec.containers or []:
        containers.append(ContainerRequest(c.name, "app", _container_resources(c)))
    for c in spec.init_containers or []:
        kind = "sidecar" if getattr(c, "restart_policy", None) == "Always" else "init"
        containers.append(ContainerRequest(c.name, kind, _container_resources(c)))
    if not any(c.resources for c in containers):
        return None
    phase = (status.phase if status else "") or ""
    conditions = {c.type: c.status for c in (status.conditions or [])} if status else {}
    message = ""
    for c in (status.conditions or []) if status else []:
        if c.type == "PodScheduled" and c.status == "False":
            message = c.message or c.reason or ""
    return PodInfo(
        uid=p.metadata.uid,
        namespace=p.metadata.namespace,
        name=p.metadata.name,
        node=spec.node_name or "",
        phase=phase,
        labels=dict(p.metadata.labels or {}),
        annotations=dict(p.metadata.annotations or {}),
        containers=tuple(containers),
        created=p.metadata.creation_timestamp,
        started=status.start_time if status else None,
        finished=_finished(p) if phase in ("Succeeded", "Failed") else None,
        deletion=p.metadata.deletion_timestamp,
        conditions=conditions,
        scheduling_message=message,
        node_selector=dict(spec.node_selector or {}),
        owner=_controller(p.metadata),
    )


def read_snapshot(cluster: Cluster, api_client: client.ApiClient | None = None) -> ClusterSnapshot:
    """GPU nodes, pods requesting NVIDIA resources, namespaces, and Kueue's objects when it is installed.

    A failure to read Kueue is recorded in the snapshot (`kueue_error`), never fails the rest of it.
    """
    api_client = api_client or api_client_for(cluster)
    api = client.CoreV1Api(api_client)
    taken_at = datetime.now(UTC)
    try:
        nodes = [info for info in map(_to_node, _paged(api.list_node)) if is_gpu_node(info.labels, info.capacity)]
        pods = [p for p in (_to_pod(x) for x in _paged(api.list_pod_for_all_namespaces)) if p is not None]
        namespaces = [
            NamespaceInfo(ns.metadata.name, dict(ns.metadata.labels or {})) for ns in _paged(api.list_namespace)
        ]
    except Exception as exc:  # ApiException, urllib3 errors, timeouts: the bucket is marked failed
        raise KubernetesError(f"Kubernetes API: {type(exc).__name__}: {str(exc)[:300]}") from exc
    try:
        kueue, kueue_error = read_kueue(api_client), ""
    except KueueError as exc:
        kueue, kueue_error = None, str(exc)
        log.warning("Kueue could not be read for %s: %s", cluster.name, exc)
    owners, owners_error = read_owners(api_client)
    return ClusterSnapshot(taken_at, tuple(nodes), tuple(pods), tuple(namespaces), kueue, kueue_error, owners,
                           owners_error)


def read_owners(api_client: client.ApiClient) -> tuple[dict[tuple[str, str, str], tuple[str, str]], str]:
    """The controllers of ReplicaSets and Jobs (to name Deployments, CronJobs, JobSets as workloads).

    Read-only LISTs; only objects with a controller are kept. A failure (e.g. RBAC without these resources)
    is returned as a reason, never raised: workloads then stop at the ReplicaSet or Job.
    """
    owners: dict[tuple[str, str, str], tuple[str, str]] = {}
    calls = (
        ("ReplicaSet", client.AppsV1Api(api_client).list_replica_set_for_all_namespaces),
        ("Job", client.BatchV1Api(api_client).list_job_for_all_namespaces),
    )
    try:
        for kind, list_fn in calls:
            for obj in _paged(list_fn):
                parent = _controller(obj.metadata)
                if parent is not None:
                    owners[(obj.metadata.namespace, kind, obj.metadata.name)] = parent
    except Exception as exc:  # ApiException (403 without RBAC), timeouts: workloads fall back, nothing fails
        reason = f"{type(exc).__name__} {getattr(exc, 'status', '') or ''} {getattr(exc, 'reason', '') or ''}".strip()
        log.warning("ReplicaSets/Jobs could not be read (%s): workloads stop at them", reason)
        return owners, reason
    return owners, ""
