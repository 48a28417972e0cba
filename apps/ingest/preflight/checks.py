"""The preflight's checks, pure: what the cluster's own APIs answered (`Facts`, gathered by `probe.py`) in, one
`Check` per question out: what was found (figures), pass / warn / fail, and the exact fix.

A check **fails** when what it found would leave GPU-hours unmeasured or unattributed (the command then exits
non-zero); it **warns** when figures would be poorer but every hour still lands (workload names, GPU models, a
short retention). docs/operations.md, "Preflight", lists every check with its reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from apps.usage.activity import metrics_fix

PASS, WARN, FAIL = "pass", "warn", "fail"
RBAC_FILE = "deploy/k8s/base/rbac.yaml (ClusterRole gpufinops-collector)"
# What the collector LISTs (apps/ingest/collectors), and whether going without it loses hours (True) or only
# names (False: workloads stop at the ReplicaSet/Job/StatefulSet; Kueue pages stay empty).
ACCESS: tuple[tuple[str, str, bool], ...] = (
    ("", "nodes", True),
    ("", "pods", True),
    ("", "namespaces", True),
    ("apps", "replicasets", False),
    ("apps", "statefulsets", False),
    ("batch", "jobs", False),
)
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_ACCESS = ("clusterqueues", "localqueues", "workloads")
DRA_GROUP = "resource.k8s.io"
# Read whenever the group is served: a served but unreadable DRA fails the snapshot (claims' GPUs would be lost).
DRA_ACCESS = ("resourceslices", "resourceclaims", "deviceclasses")
KUEUE_VERSIONS = ("v1beta2", "v1beta1")  # what the collector reads, newest first
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
RETENTION_DAYS_NEEDED = 14  # GPUFINOPS_ABANDON_AFTER_DAYS: a failed hour is retried from history this long
SCRAPE_SECONDS_MAX = 60.0  # the collector's history subqueries step 30 s; a 5-minute lookback needs samples


@dataclass(frozen=True)
class Facts:
    """What the cluster's APIs answered. A source that could not be asked leaves its error and empty figures."""

    kubernetes_error: str = ""
    kubernetes_version: str = ""
    access: Mapping[tuple[str, str], bool | None] = field(default_factory=dict)  # None: the review itself failed
    groups: Mapping[str, Sequence[str]] = field(default_factory=dict)  # API group -> versions served
    gpu_nodes: Sequence[str] = ()
    gpus: int = 0
    mig_nodes: Sequence[str] = ()
    gfd_nodes: Sequence[str] = ()  # GPU nodes carrying nvidia.com/gpu.product (GPU Feature Discovery)
    dra_gpu_nodes: Sequence[str] = ()  # nodes whose GPUs a DRA driver publishes (ResourceSlices)
    gpu_pods_running: int = 0
    team_label: str = "team"
    team_pods: int = 0  # GPU pods with the team label (Kubernetes API)
    team_namespaces: int = 0  # namespaces with the team label
    prometheus_error: str = ""
    prometheus_version: str = ""
    retention: str = ""
    scrape_seconds: float | None = None
    signal_series: Mapping[str, int] = field(default_factory=dict)  # signal -> series of its metric
    signal_metrics: Mapping[str, str] = field(default_factory=dict)  # signal -> the cluster's metric name
    default_signal: str = "sm_active"
    gpu_series: int = 0  # DCGM_FI_DEV_FB_USED series (one per GPU, MIG instance and holder)
    uuids: int = 0  # GPUs the exporters report
    uuids_with_pod: int = 0  # GPUs with at least one series naming a pod
    pod_label: str = ""  # "pod" or "exported_pod" (Prometheus Operator, honorLabels: false)
    hostnames: Sequence[str] = ()
    hostnames_not_nodes: Sequence[str] = ()
    hostnames_resolved: Mapping[str, str] = field(default_factory=dict)  # exporter pod -> node (kube_pod_info)
    exporter_nodes: Sequence[str] = ()  # GPU nodes some exporter reports from (resolved)
    mig_instance_series: int = 0
    dra_attributed_series: int = 0
    ksm_series: Mapping[str, int] = field(default_factory=dict)  # family -> series
    ksm_team_pods: int = 0
    ksm_team_namespaces: int = 0


@dataclass(frozen=True)
class Check:
    name: str
    found: str
    status: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _kubernetes(f: Facts) -> list[Check]:
    if f.kubernetes_error:
        return [Check("kubernetes reachable", f.kubernetes_error, FAIL,
                      "check the kubeconfig or in-cluster service account (add_cluster --kubeconfig/--context)")]
    out = [Check("kubernetes reachable", f"server {f.kubernetes_version}", PASS)]
    wanted = list(ACCESS)
    if KUEUE_GROUP in f.groups:
        wanted += [(KUEUE_GROUP, r, False) for r in KUEUE_ACCESS]
    if DRA_GROUP in f.groups:
        wanted += [(DRA_GROUP, r, True) for r in DRA_ACCESS]
    for group, resource, loses_hours in wanted:
        allowed = f.access.get((group, resource))
        name = f"rbac: list {resource}" + (f" ({group})" if group else "")
        if allowed:
            out.append(Check(name, "allowed (SelfSubjectAccessReview)", PASS))
            continue
        found = "denied" if allowed is False else "could not be reviewed"
        effect = "its GPU-hours are lost" if loses_hours else "workloads stop at the owner it cannot read"
        fix = (f'add to {RBAC_FILE}: - apiGroups: ["{group}"] resources: ["{resource}"] '
               f'verbs: ["get", "list", "watch"]')
        out.append(Check(name, f"{found}: {effect}", FAIL if loses_hours else WARN, fix))
    return out


def _nodes(f: Facts) -> list[Check]:
    if f.kubernetes_error:
        return []
    out = []
    if not f.gpu_nodes:
        out.append(Check("gpu nodes", "no node advertises nvidia.com/* or carries GPU labels", FAIL,
                         "install the NVIDIA device plugin (or GPU Operator) so nodes advertise nvidia.com/gpu"))
    else:
        out.append(Check("gpu nodes", f"{len(f.gpu_nodes)} GPU nodes, {f.gpus} GPUs, {f.gpu_pods_running} GPU pods "
                                      f"running", PASS))
    missing = sorted(set(f.gpu_nodes) - set(f.gfd_nodes))
    if missing:
        out.append(Check("gfd labels", f"{len(missing)} of {len(f.gpu_nodes)} GPU nodes without "
                                       f"nvidia.com/gpu.product: {', '.join(missing[:5])}", WARN,
                         "deploy GPU Feature Discovery (GPU Operator, or the device plugin chart with "
                         "gfd.enabled=true): without the product label those GPUs have no model, hence no price"))
    elif f.gpu_nodes:
        out.append(Check("gfd labels", f"{len(f.gfd_nodes)} of {len(f.gpu_nodes)} GPU nodes labelled", PASS))
    kueue = list(f.groups.get(KUEUE_GROUP, ()))
    if not kueue:
        out.append(Check("kueue", "not installed (no kueue.x-k8s.io)", PASS))
    elif set(kueue) & set(KUEUE_VERSIONS):
        out.append(Check("kueue", f"kueue.x-k8s.io {', '.join(kueue)} served", PASS))
    else:
        out.append(Check("kueue", f"kueue.x-k8s.io {', '.join(kueue)} served", WARN,
                         f"upgrade Kueue to serve {' or '.join(KUEUE_VERSIONS)} (the versions the collector reads)"))
    dra = list(f.groups.get(DRA_GROUP, ()))
    if not dra:
        out.append(Check("resource.k8s.io", "not served (no DRA)", PASS))
    else:
        status = PASS if set(dra) & set(DRA_VERSIONS) else WARN
        out.append(Check("resource.k8s.io", f"{', '.join(dra)} served", status,
                         "" if status == PASS else f"serve one of {', '.join(DRA_VERSIONS)}"))
    return out


def _prometheus(f: Facts) -> list[Check]:
    if f.prometheus_error:
        return [Check("prometheus reachable", f.prometheus_error, FAIL,
                      "check add_cluster --prometheus-url (and its credential)")]
    out = [Check("prometheus reachable", f"Prometheus {f.prometheus_version}", PASS)]
    days = _days(f.retention)
    if days is not None and days < RETENTION_DAYS_NEEDED:
        out.append(Check("retention", f"{f.retention}", WARN,
                         f"--storage.tsdb.retention.time={RETENTION_DAYS_NEEDED}d or more: hours that failed are "
                         f"re-collected from history for {RETENTION_DAYS_NEEDED} days"))
    else:
        out.append(Check("retention", f.retention or "not reported", PASS))
    if f.scrape_seconds is None:
        out.append(Check("scrape interval", "no DCGM samples to measure it by", WARN,
                         "scrape dcgm-exporter (ServiceMonitor or a scrape job)"))
    elif f.scrape_seconds > SCRAPE_SECONDS_MAX:
        out.append(Check("scrape interval", f"about {f.scrape_seconds:.0f} s", WARN,
                         f"scrape dcgm-exporter every {SCRAPE_SECONDS_MAX:.0f} s or less (ServiceMonitor interval)"))
    else:
        out.append(Check("scrape interval", f"about {f.scrape_seconds:.0f} s", PASS))
    return out


def _ksm(f: Facts) -> list[Check]:
    if f.prometheus_error:
        return []
    out = []
    empty = sorted(name for name, n in f.ksm_series.items() if n == 0)
    figures = ", ".join(f"{name} {n}" for name, n in sorted(f.ksm_series.items()))
    if empty:
        out.append(Check("kube-state-metrics series", figures, FAIL,
                         "deploy kube-state-metrics and scrape it: hours the collector did not see are rebuilt "
                         "from it, and without it they are lost"))
    else:
        out.append(Check("kube-state-metrics series", figures, PASS))
    key = f.team_label
    found = (f"Kubernetes: {f.team_pods} GPU pods and {f.team_namespaces} namespaces labelled {key}; "
             f"kube-state-metrics: {f.ksm_team_pods} pods, {f.ksm_team_namespaces} namespaces")
    lost = (f.team_pods and not f.ksm_team_pods) or (f.team_namespaces and not f.ksm_team_namespaces)
    if lost:
        out.append(Check("kube-state-metrics label allowlist", found, FAIL,
                         f"run kube-state-metrics with --metric-labels-allowlist=pods=[{key}],namespaces=[{key}] "
                         f"(kube-prometheus-stack: kube-state-metrics.metricLabelsAllowlist): otherwise hours "
                         f"rebuilt from its history go to `unassigned`"))
    else:
        out.append(Check("kube-state-metrics label allowlist", found, PASS))
    return out


def _dcgm(f: Facts) -> list[Check]:
    if f.prometheus_error:
        return []
    out = []
    missing = sorted(set(f.gpu_nodes) - set(f.exporter_nodes))
    covered = len(set(f.gpu_nodes) & set(f.exporter_nodes))
    if not f.gpu_series:
        out.append(Check("dcgm-exporter on every GPU node", "no DCGM series at all", FAIL,
                         "deploy dcgm-exporter on the GPU nodes and scrape it (deploy/dcgm-exporter/)"))
    elif missing:
        out.append(Check("dcgm-exporter on every GPU node", f"{covered} of {len(f.gpu_nodes)} GPU nodes report; "
                                                            f"none from {', '.join(missing[:5])}", FAIL,
                         "let the dcgm-exporter DaemonSet run there (nodeSelector/tolerations): their hours are "
                         "unmeasured"))
    else:
        out.append(Check("dcgm-exporter on every GPU node", f"{covered} of {len(f.gpu_nodes)} GPU nodes, "
                                                            f"{f.uuids} GPUs, {f.gpu_series} series", PASS))
    for signal, metric in f.signal_metrics.items():
        n = f.signal_series.get(signal, 0)
        fix = metrics_fix(metric)
        name = f"signal {signal}"
        if n:
            out.append(Check(name, f"{metric}: {n} series", PASS))
        elif f.gpu_series:
            default = signal == f.default_signal
            out.append(Check(name, f"{metric}: no series" + (" (the default signal: every hour unmeasured)"
                                                             if default else ""),
                             FAIL if default else WARN, str(fix)))
    if f.gpu_series:
        share = f.uuids_with_pod / f.uuids if f.uuids else 0.0
        found = (f"{f.uuids_with_pod} of {f.uuids} GPUs ({share:.0%}) have a series naming a pod, "
                 f"label {f.pod_label or 'none'}")
        if f.gpu_pods_running and not f.uuids_with_pod:
            out.append(Check("pod attribution", found, FAIL,
                             "run dcgm-exporter with Kubernetes pod mapping (DCGM_EXPORTER_KUBERNETES=true, the "
                             "kubelet pod-resources socket mounted); every held GPU-hour is unmeasured without it"))
        else:
            note = " (Prometheus Operator honorLabels: false; read either way)" if f.pod_label == "exported_pod" else ""
            out.append(Check("pod attribution", found + note, PASS))
        out.append(_hostname(f))
        if f.mig_nodes:
            status = PASS if f.mig_instance_series else FAIL
            out.append(Check("mig series", f"{len(f.mig_nodes)} MIG nodes, {f.mig_instance_series} instance series",
                             status, "" if status == PASS else
                             "run dcgm-exporter 3.x or newer on the MIG nodes (GPU_I_ID series per instance): "
                             "MIG allocations are unmeasured without them"))
        if f.dra_gpu_nodes:
            status = PASS if f.dra_attributed_series else FAIL
            out.append(Check("dra attribution", f"{len(f.dra_gpu_nodes)} DRA GPU nodes, {f.dra_attributed_series} "
                                                f"series naming a claim", status, "" if status == PASS else
                             "enable dcgm-exporter's DRA attribution (chart kubernetesDRA.enabled=true, "
                             "KUBERNETES_ENABLE_DRA=true): GPUs handed out by claims are unmeasured without it"))
    return out


def _hostname(f: Facts) -> Check:
    name = "hostname semantics"
    if not f.hostnames_not_nodes:
        return Check(name, f"{len(f.hostnames)} Hostname values, each a node name (NODE_NAME set)", PASS)
    strays = sorted(f.hostnames_not_nodes)
    resolved = sum(1 for h in strays if h in f.hostnames_resolved)
    # Held GPUs are matched by UUID whatever Hostname says; a GPU no pod holds (idle capacity, activity nobody
    # pays for, a vanished GPU) is placed on its node only through kube-state-metrics' record of the exporter
    # pod, lost with that history: a fail, so the exporter is fixed before it matters.
    return Check(name, f"{len(strays)} of {len(f.hostnames)} Hostname values are no node ({', '.join(strays[:3])}): "
                       f"the exporter's own pod name; {resolved} placed on a node only through kube-state-metrics' "
                       f"kube_pod_info of the exporter pod", FAIL,
                 "pass NODE_NAME to dcgm-exporter (env NODE_NAME from fieldRef spec.nodeName; charts since early "
                 "2023, GPU Operator v23.9+): otherwise GPUs no pod holds are put on no node when that history "
                 "is missing")


def evaluate(f: Facts) -> list[Check]:
    """Every check, in the order the table prints them."""
    return [*_kubernetes(f), *_nodes(f), *_prometheus(f), *_ksm(f), *_dcgm(f)]


def _days(retention: str) -> float | None:
    """A Prometheus duration (`15d`, `2w`, `360h`, `1y`) in days; None when absent or unreadable."""
    units = {"y": 365.0, "w": 7.0, "d": 1.0, "h": 1 / 24, "m": 1 / 1440, "s": 1 / 86400}
    total, number = 0.0, ""
    for ch in retention.strip():
        if ch.isdigit():
            number += ch
        elif ch in units and number:
            total, number = total + int(number) * units[ch], ""
        else:
            return None
    return total if total and not number else None


def failed(checks: Sequence[Check]) -> bool:
    return any(c.status == FAIL for c in checks)
