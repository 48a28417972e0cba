"""Prometheus collector: instant queries at a bucket's end with *_over_time, so PromQL aggregates
and no raw samples stream into Python. Implements the ledger's `MetricsSource`.

Reads two families: DCGM activity per device series carrying a pod identity, and the
kube-state-metrics history used to rebuild allocations for hours the Kubernetes collector missed.
"""

from __future__ import annotations

import base64
import logging
import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from apps.common.secrets import SecretError
from apps.inventory.models import Cluster
from apps.usage.activity import DEFAULT_METRICS, SIGNAL_SCALE, SIGNALS
from apps.usage.ledger import SeriesFact
from apps.usage.sources import HISTORY_STEP_SECONDS, NodeHistory, PodHistory, SourceError

log = logging.getLogger(__name__)


class PrometheusError(SourceError):
    """Prometheus unreachable, or its answer unusable."""


def ksm_resource(name: str) -> str | None:
    """kube-state-metrics sanitizes resource names (`nvidia.com/mig-1g.10gb` -> `nvidia_com_mig_1g_10gb`)."""
    if not name.startswith("nvidia_com_"):
        return None
    rest = name[len("nvidia_com_") :]
    if rest == "gpu":
        return "nvidia.com/gpu"
    if rest == "gpu_shared":
        return "nvidia.com/gpu.shared"
    m = re.match(r"^mig_(\d+)g_(\d+)gb(.*)$", rest)
    if m:
        return f"nvidia.com/mig-{m.group(1)}g.{m.group(2)}gb{m.group(3).replace('_', '.')}"
    return "nvidia.com/" + rest  # unknown: kept so the ledger can report it, never counted


def ksm_label(key: str) -> str:
    """kube-state-metrics writes a Kubernetes label `a.b/c` as the metric label `label_a_b_c`."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


def unsanitized(metric_labels: dict[str, str], keys: Sequence[str]) -> dict[str, str]:
    """The Kubernetes labels `keys` read back from a kube-state-metrics `*_labels` series."""
    return {key: metric_labels[ksm_label(key)] for key in keys if ksm_label(key) in metric_labels}


def window(start: datetime, end: datetime) -> tuple[str, datetime]:
    """Range and evaluation time covering the samples of [start, end) exactly once.

    Prometheus 2.x ranges include both ends, so a bucket evaluated at its end would also read the
    first sample of the next bucket; evaluating 1 ms earlier over the same length reads
    [start, end - 1 ms] on 2.x and (start - 1 ms, end - 1 ms] on 3.x: the same samples.
    """
    ms = max(int((end - start).total_seconds() * 1000), 1)
    return f"{ms}ms", end - timedelta(milliseconds=1)


def _ts(v: float) -> datetime:
    return datetime.fromtimestamp(v, tz=UTC)


def _value(sample: dict[str, Any]) -> float | None:
    try:
        v = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return None if math.isnan(v) or math.isinf(v) else v


class PrometheusSource:
    """Reads one cluster's Prometheus."""

    def __init__(self, cluster: Cluster):
        if not cluster.prometheus_url:
            raise PrometheusError(f"cluster {cluster.name} has no Prometheus URL")
        headers: dict[str, str] = {}
        try:
            auth = cluster.prometheus_auth
        except (OSError, SecretError) as exc:
            raise PrometheusError(f"cluster {cluster.name}: Prometheus credential unreadable: {exc}") from exc
        if auth and ":" in auth:
            headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
        elif auth:
            headers["Authorization"] = f"Bearer {auth}"
        self.cluster = cluster
        self.metrics = {**DEFAULT_METRICS, **(cluster.metric_names or {})}
        self.prom = PrometheusConnect(
            url=cluster.prometheus_url,
            headers=headers or None,
            disable_ssl=not cluster.prometheus_verify_tls,
            timeout=settings.GPUFINOPS_PROMETHEUS_TIMEOUT,
            # One quick retry for a dropped connection; real recovery is the bucket's own retry state.
            retry=Retry(total=1, backoff_factor=0.2, status_forcelist=[502, 503, 504]),
        )
        self.queries = 0
        self.samples = 0
        self.warnings: list[str] = []

    # ---- plumbing ----
    def query(self, promql: str, at: datetime) -> list[dict[str, Any]]:
        self.queries += 1
        try:
            result = self.prom.custom_query(query=promql, params={"time": at.timestamp()})
        except Exception as exc:  # connection errors, HTTP errors, JSON errors: the bucket fails
            raise PrometheusError(f"Prometheus query failed ({type(exc).__name__}): {str(exc)[:300]}") from exc
        if not isinstance(result, list) or any(not isinstance(r, dict) or "metric" not in r for r in result):
            raise PrometheusError(f"malformed Prometheus answer for {promql[:80]!r}")
        self.samples += len(result)
        return result

    # ---- DCGM activity ----
    def _signal_series(self, signal: str, start: datetime, end: datetime) -> dict[tuple, float]:
        metric = self.metrics[signal]
        rng, at = window(start, end)
        # Prometheus Operator with honorLabels=false renames the exporter's pod labels to exported_*.
        q = (
            f'avg_over_time({metric}{{exported_pod!=""}}[{rng}]) or '
            f'avg_over_time({metric}{{pod!="",exported_pod=""}}[{rng}])'
        )
        scale = SIGNAL_SCALE.get(signal, 1.0)
        out: dict[tuple, float] = {}
        for r in self.query(q, at):
            m = r["metric"]
            pod = m.get("exported_pod") or m.get("pod") or ""
            ns = m.get("exported_namespace") or m.get("namespace") or ""
            uuid = m.get("UUID") or m.get("uuid") or m.get("gpu_uuid") or ""
            v = _value(r)
            if not pod or not ns or not uuid:
                log.warning("cluster %s: DCGM series without pod identity or UUID skipped: %s", self.cluster, m)
                continue
            if v is None:
                self.warnings.append(f"{signal}: non-numeric value for {ns}/{pod} {uuid}")
                continue
            ratio = v * scale
            if ratio < -1e-9 or ratio > 1.0 + 1e-6:
                self.warnings.append(f"{signal}: value {v} out of range for {ns}/{pod} {uuid}; not counted")
                continue
            key = (ns, pod, uuid, m.get("GPU_I_ID", ""), m.get("GPU_I_PROFILE", ""), m.get("vgpu", ""))
            out[key] = ratio
        return out

    def activity(self, start: datetime, end: datetime) -> list[SeriesFact]:
        """Every signal's series, each kept under its own name: a signal the exporter lacks stays missing
        (its hours unmeasured), never filled with another signal's values (ledger.md "Activity")."""
        per_signal = {s: self._signal_series(s, start, end) for s in SIGNALS}
        keys = set().union(*per_signal.values())
        facts = []
        for key in sorted(keys):
            values = {s: per_signal[s][key] for s in SIGNALS if key in per_signal[s]}
            facts.append(SeriesFact(key[0], key[1], key[2], key[3], key[4], values, replica=key[5]))
        return facts

    def has_dcgm(self, start: datetime, end: datetime) -> bool:
        rng, at = window(start, end)
        metrics = "|".join(re.escape(self.metrics[s]) for s in SIGNALS)
        # last_over_time keeps each series' name, so several signal metrics never collapse into one label set
        # (count_over_time drops the name and real Prometheus then refuses the answer with a 422).
        return bool(self.query(f'count(last_over_time({{__name__=~"{metrics}"}}[{rng}]))', at))

    # ---- kube-state-metrics history ----
    def pod_history(self, start: datetime, end: datetime, label_keys: Sequence[str]) -> list[PodHistory]:
        rng, at = window(start, end)
        starts = self.query(f"max_over_time(kube_pod_start_time[{rng}])", at)
        if not starts:
            return []
        done: dict[str, float] = {}
        for r in self.query(f"max by (uid) (max_over_time(kube_pod_completion_time[{rng}]))", at):
            v = _value(r)
            if v:
                done[r["metric"].get("uid", "")] = v
        seen: dict[str, float] = {}
        q = f"max by (uid) (max_over_time(timestamp(kube_pod_start_time)[{rng}:{HISTORY_STEP_SECONDS}s]))"
        for r in self.query(q, at):
            v = _value(r)
            if v:
                seen[r["metric"].get("uid", "")] = v
        app: dict[str, dict[str, dict[str, float]]] = {}
        init: dict[str, dict[str, dict[str, float]]] = {}
        nodes: dict[str, str] = {}
        for metric, target in (
            ("kube_pod_container_resource_requests", app),
            ("kube_pod_init_container_resource_requests", init),
        ):
            for r in self.query(f'max_over_time({metric}{{resource=~"nvidia_com_.*"}}[{rng}])', at):
                m, v = r["metric"], _value(r)
                res = ksm_resource(m.get("resource", ""))
                if v is None or res is None:
                    continue
                uid = m.get("uid", "")
                target.setdefault(uid, {}).setdefault(m.get("container", ""), {})[res] = v
                if m.get("node"):
                    nodes[uid] = m["node"]
        labels: dict[str, dict[str, str]] = {}
        for r in self.query(f"max_over_time(kube_pod_labels[{rng}])", at):
            labels[r["metric"].get("uid", "")] = unsanitized(r["metric"], label_keys)
        for r in self.query(f"max_over_time(kube_pod_info[{rng}])", at):
            m = r["metric"]
            if m.get("node") and m.get("uid"):
                nodes.setdefault(m["uid"], m["node"])
        owners = {}
        for r in self.query(f'max_over_time(kube_pod_owner{{owner_is_controller="true"}}[{rng}])', at):
            m = r["metric"]
            if m.get("uid") and m.get("owner_kind") and m.get("owner_name") not in (None, "", "<none>"):
                owners[m["uid"]] = (m["owner_kind"], m["owner_name"])
        pods = []
        for r in starts:
            m, v = r["metric"], _value(r)
            uid = m.get("uid", "")
            if not uid or (uid not in app and uid not in init):
                continue
            pods.append(
                PodHistory(
                    uid=uid,
                    namespace=m.get("namespace", ""),
                    name=m.get("pod", ""),
                    node=nodes.get(uid, ""),
                    started=_ts(v) if v else None,
                    finished=_ts(done[uid]) if uid in done else None,
                    last_seen=_ts(seen[uid]) if uid in seen else None,
                    labels=labels.get(uid, {}),
                    app_requests=app.get(uid, {}),
                    init_requests=init.get(uid, {}),
                    owner=owners.get(uid),
                )
            )
        return pods

    def owner_history(self, start: datetime, end: datetime) -> dict[tuple[str, str, str], tuple[str, str]]:
        """Controllers of ReplicaSets and Jobs (kube_replicaset_owner, kube_job_owner) seen in the bucket."""
        rng, at = window(start, end)
        out: dict[tuple[str, str, str], tuple[str, str]] = {}
        for metric, kind, name_label in (("kube_replicaset_owner", "ReplicaSet", "replicaset"),
                                         ("kube_job_owner", "Job", "job_name")):
            for r in self.query(f'max_over_time({metric}{{owner_is_controller="true"}}[{rng}])', at):
                m = r["metric"]
                if m.get(name_label) and m.get("owner_kind") and m.get("owner_name") not in (None, "", "<none>"):
                    out[(m.get("namespace", ""), kind, m[name_label])] = (m["owner_kind"], m["owner_name"])
        return out

    def namespace_labels(
        self, start: datetime, end: datetime, label_keys: Sequence[str]
    ) -> dict[str, dict[str, str]]:
        rng, at = window(start, end)
        out: dict[str, dict[str, str]] = {}
        for r in self.query(f"max_over_time(kube_namespace_labels[{rng}])", at):
            m = r["metric"]
            out[m.get("namespace", "")] = unsanitized(m, label_keys)
        return out

    def node_history(self, start: datetime, end: datetime, label_keys: Sequence[str]) -> list[NodeHistory]:
        rng, at = window(start, end)
        labels = {r["metric"].get("node", ""): r["metric"] for r in self.query(
            f"max_over_time(kube_node_labels[{rng}])", at)}
        if not labels:
            return []
        alloc: dict[str, dict[str, float]] = {}
        cap: dict[str, dict[str, float]] = {}
        for metric, target in (("kube_node_status_allocatable", alloc), ("kube_node_status_capacity", cap)):
            for r in self.query(f'max_over_time({metric}{{resource=~"nvidia_com_.*"}}[{rng}])', at):
                res, v = ksm_resource(r["metric"].get("resource", "")), _value(r)
                if res and v is not None:
                    target.setdefault(r["metric"].get("node", ""), {})[res] = v
        cordoned = {r["metric"].get("node", "") for r in self.query(
            f"max_over_time(kube_node_spec_unschedulable[{rng}]) > 0", at)}
        not_ready = {r["metric"].get("node", "") for r in self.query(
            f'min_over_time(kube_node_status_condition{{condition="Ready",status="true"}}[{rng}]) < 1', at)}
        first: dict[str, float] = {}
        last: dict[str, float] = {}
        for fn, target in (("min", first), ("max", last)):
            q = f"{fn}_over_time(timestamp(kube_node_labels)[{rng}:{HISTORY_STEP_SECONDS}s])"
            for r in self.query(q, at):
                v = _value(r)
                if v:
                    target[r["metric"].get("node", "")] = v
        nodes = []
        for name, m in labels.items():
            nodes.append(
                NodeHistory(
                    name=name,
                    labels=unsanitized(m, label_keys),
                    allocatable=alloc.get(name, {}),
                    capacity=cap.get(name, {}),
                    unschedulable=name in cordoned,
                    ready=name not in not_ready,
                    first_seen=_ts(first.get(name, start.timestamp())),
                    last_seen=_ts(last.get(name, end.timestamp())),
                )
            )
        return nodes
