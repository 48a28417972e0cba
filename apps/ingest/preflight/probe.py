"""What the preflight asks the cluster's own APIs: the Kubernetes API (version, SelfSubjectAccessReview of every
LIST the collector makes, API groups, the collector's own snapshot read) and Prometheus (build, retention, the
DCGM and kube-state-metrics series). Read-only; each source's failure is recorded in the facts, never raised."""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from kubernetes import client

from apps.ingest.collectors.kubernetes import api_client_for, read_snapshot
from apps.ingest.collectors.limits import request_timeout
from apps.ingest.collectors.prometheus import PrometheusSource
from apps.ingest.collectors.promql import MAX_REGEX_NAMES, ksm_label
from apps.ingest.preflight.checks import ACCESS, DRA_ACCESS, DRA_GROUP, KUEUE_ACCESS, KUEUE_GROUP
from apps.inventory import gpus
from apps.inventory.models import Cluster
from apps.usage.activity import DEFAULT_METRICS, SIGNALS, default_signal

log = logging.getLogger(__name__)
FB_USED = "DCGM_FI_DEV_FB_USED"  # every exporter list has it: one series per GPU, MIG instance and holder
KSM_FAMILIES = ("kube_pod_info", "kube_pod_labels", "kube_pod_container_resource_requests", "kube_node_labels")
RECENT = timedelta(minutes=5)


def _why(exc: Exception) -> str:
    status = getattr(exc, "status", "")
    reason = getattr(exc, "reason", "")
    return f"{type(exc).__name__} {status} {reason}".strip() if status else f"{type(exc).__name__}: {str(exc)[:200]}"


def kubernetes_facts(cluster: Cluster, api_client: client.ApiClient | None = None) -> dict[str, Any]:
    try:
        api_client = api_client or api_client_for(cluster)
        version = client.VersionApi(api_client).get_code(_request_timeout=request_timeout()).git_version
    except Exception as exc:  # unreachable, bad credentials, bad kubeconfig
        return {"kubernetes_error": f"unreachable: {_why(exc)}"}
    groups: dict[str, list[str]] = {}
    try:
        for g in client.ApisApi(api_client).get_api_versions(_request_timeout=request_timeout()).groups or []:
            groups[g.name] = [v.version for v in g.versions or []]
    except Exception as exc:
        log.warning("preflight %s: API groups unreadable: %s", cluster.name, _why(exc))
    wanted = [(group, resource) for group, resource, _l in ACCESS]
    if KUEUE_GROUP in groups:
        wanted += [(KUEUE_GROUP, r) for r in KUEUE_ACCESS]
    if DRA_GROUP in groups:
        wanted += [(DRA_GROUP, r) for r in DRA_ACCESS]
    auth = client.AuthorizationV1Api(api_client)
    access: dict[tuple[str, str], bool | None] = {}
    for group, resource in wanted:
        review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(verb="list", group=group, resource=resource)))
        try:
            answer = auth.create_self_subject_access_review(review, _request_timeout=request_timeout()).status
            access[(group, resource)] = bool(answer and answer.allowed)
        except Exception as exc:
            log.warning("preflight %s: access review of %s/%s failed: %s", cluster.name, group, resource, _why(exc))
            access[(group, resource)] = None
    facts: dict[str, Any] = {"kubernetes_version": version, "access": access, "groups": groups}
    try:
        snap = read_snapshot(cluster, api_client)
    except Exception as exc:  # RBAC without pods or nodes: the access checks say which
        log.warning("preflight %s: snapshot unreadable: %s", cluster.name, _why(exc))
        return facts
    key = settings.GPUFINOPS_TEAM_LABEL
    nodes = {n.name: gpus.classify_node(n.labels, n.capacity) for n in snap.nodes}
    facts.update(
        gpu_nodes=sorted(nodes), gpus=sum(g.physical_gpus for g in nodes.values()),
        mig_nodes=sorted(n for n, g in nodes.items() if g.sharing in (gpus.MIG_MIXED, gpus.MIG_SINGLE)),
        gfd_nodes=sorted(n.name for n in snap.nodes if n.labels.get(gpus.LABEL_PRODUCT)),
        gpu_pods_running=sum(1 for p in snap.pods if p.phase == "Running" and p.node),
        team_label=key, team_pods=sum(1 for p in snap.pods if p.labels.get(key)),
        team_namespaces=sum(1 for n in snap.namespaces if n.labels.get(key)),
        # Nodes whose GPUs a DRA driver publishes (the collector's own ResourceSlice read).
        dra_gpu_nodes=sorted(snap.dra.inventory.nodes) if snap.dra is not None else [],
    )
    return facts


def prometheus_facts(cluster: Cluster, at: datetime, gpu_nodes: Collection[str]) -> dict[str, Any]:
    try:
        source = PrometheusSource(cluster)
        build = source.status("buildinfo")
    except Exception as exc:
        return {"prometheus_error": f"unreachable: {str(exc)[:300]}"}
    facts: dict[str, Any] = {"prometheus_version": str(build.get("version", "?"))}
    try:
        facts["retention"] = str(source.status("flags").get("storage.tsdb.retention.time", ""))
    except Exception as exc:
        log.info("preflight %s: flags unreadable (%s)", cluster.name, exc)
    try:
        facts.update(_series_facts(source, at, gpu_nodes))
    except Exception as exc:
        facts["prometheus_error"] = f"queries failed: {str(exc)[:300]}"
    return facts


def _count(source: PrometheusSource, promql: str, at: datetime) -> int:
    answer = source.query(f"count({promql})", at)
    return int(float(answer[0]["value"][1])) if answer else 0


def _series_facts(source: PrometheusSource, at: datetime, gpu_nodes: Collection[str]) -> dict[str, Any]:
    metrics = {s: source.metrics.get(s) or DEFAULT_METRICS[s] for s in SIGNALS}
    series = source.query(f"last_over_time({FB_USED}[5m])", at)
    uuids: set[str] = set()
    held: set[str] = set()
    hostnames: dict[str, set[str]] = {}  # Hostname -> the UUIDs it reports
    # With Prometheus Operator's honorLabels: false the holder is `exported_pod` and `pod` is the exporter itself.
    exported = any(r["metric"].get("exported_pod") for r in series)
    pod_label = "exported_pod" if exported else ""
    mig = dra = 0
    for r in series:
        m = r["metric"]
        uuid = m.get("UUID") or m.get("uuid") or ""
        host = m.get("Hostname") or m.get("hostname") or ""
        uuids.add(uuid)
        hostnames.setdefault(host, set()).add(uuid)
        if m.get("exported_pod" if exported else "pod"):
            held.add(uuid)
            pod_label = pod_label or "pod"
        mig += bool(m.get("GPU_I_ID"))
        dra += bool(m.get("dra_claim_name"))
    strays = sorted(set(hostnames) - set(gpu_nodes) - {""})
    resolved = source.pod_nodes(at - RECENT, at, strays[:MAX_REGEX_NAMES]) if strays else {}
    exporter_nodes = {h for h in hostnames if h in gpu_nodes} | set(resolved.values())
    samples = source.query(f"max(count_over_time({FB_USED}[10m]))", at)
    count = float(samples[0]["value"][1]) if samples else 0.0
    team = ksm_label(settings.GPUFINOPS_TEAM_LABEL)
    return {
        "signal_metrics": metrics, "default_signal": default_signal(),
        "signal_series": {s: _count(source, f"last_over_time({metric}[5m])", at) for s, metric in metrics.items()},
        "gpu_series": len(series), "uuids": len(uuids - {""}), "uuids_with_pod": len(held - {""}),
        "pod_label": pod_label, "hostnames": sorted(hostnames), "hostnames_not_nodes": strays,
        "hostnames_resolved": resolved, "exporter_nodes": sorted(exporter_nodes),
        "mig_instance_series": mig, "dra_attributed_series": dra,
        "scrape_seconds": 600.0 / count if count >= 2 else None,
        "ksm_series": {f: _count(source, f"last_over_time({f}[5m])", at) for f in KSM_FAMILIES},
        "ksm_team_pods": _count(source, f'last_over_time(kube_pod_labels{{{team}!=""}}[5m])', at),
        "ksm_team_namespaces": _count(source, f'last_over_time(kube_namespace_labels{{{team}!=""}}[5m])', at),
    }
