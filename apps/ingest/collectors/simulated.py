"""The demo's stand-in for Prometheus: the same interface as PrometheusSource, answered in-process
from the simulator's own samples, for a machine with only Python (issue 4, "the demo").

Tests exercise the real path (a real Prometheus loaded from `simulate export-openmetrics`); this
class exists so `make run` shows a week of ledger without a Prometheus binary.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, datetime

from apps.ingest.collectors.prometheus import KsmNode, KsmPod, ksm_resource
from apps.usage.activity import DEFAULT_METRICS, SIGNAL_SCALE
from apps.usage.ledger import SeriesFact


class SimulatedSource:
    def __init__(self, scenario, step_seconds: int = 300):  # type: ignore[no-untyped-def]
        self.scenario = scenario
        self.step = step_seconds
        self.queries = 0
        self.samples = 0
        self.warnings: list[str] = []
        self._signal_of = {m: s for s, m in DEFAULT_METRICS.items()}

    def _grid(self, start: datetime, end: datetime) -> list[datetime]:
        t = math.ceil(start.timestamp() / self.step) * self.step
        out = []
        while t <= end.timestamp():
            out.append(datetime.fromtimestamp(t, tz=UTC))
            t += self.step
        return out

    def activity(self, start: datetime, end: datetime) -> list[SeriesFact]:
        sums: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for t in self._grid(start, end):
            self.queries += 1
            for metric, labels, value in self.scenario.dcgm_samples(t):
                signal = self._signal_of.get(metric)
                if signal is None or not labels.get("pod"):
                    continue
                key = (labels.get("namespace", ""), labels["pod"], labels.get("UUID", ""),
                       labels.get("GPU_I_ID", ""), labels.get("GPU_I_PROFILE", ""))
                sums[key][signal].append(value * SIGNAL_SCALE.get(signal, 1.0))
        self.samples += len(sums)
        return [SeriesFact(*key, {s: sum(v) / len(v) for s, v in per.items()}) for key, per in sorted(sums.items())]

    def has_dcgm(self, start: datetime, end: datetime) -> bool:
        return True

    def _ksm(self, start: datetime, end: datetime) -> list[tuple[datetime, list]]:
        return [(t, self.scenario.ksm_samples(t)) for t in self._grid(start, end)]

    def ksm_pods(self, start: datetime, end: datetime) -> list[KsmPod]:
        info: dict[str, dict] = {}
        for t, samples in self._ksm(start, end):
            for metric, labels, value in samples:
                uid = labels.get("uid")
                if not uid:
                    continue
                p = info.setdefault(uid, {"labels": {}, "app": {}, "init": {}, "node": "", "started": None,
                                          "finished": None, "last": t, "ns": labels.get("namespace", ""),
                                          "name": labels.get("pod", "")})
                p["last"] = max(p["last"], t)
                if metric == "kube_pod_start_time":
                    p["started"] = datetime.fromtimestamp(value, tz=UTC)
                elif metric == "kube_pod_completion_time":
                    done = datetime.fromtimestamp(value, tz=UTC)
                    p["finished"] = max(p["finished"] or done, done)
                elif metric == "kube_pod_labels":
                    p["labels"] = {k: v for k, v in labels.items() if k.startswith("label_")}
                elif metric in ("kube_pod_container_resource_requests", "kube_pod_init_container_resource_requests"):
                    res = ksm_resource(labels.get("resource", ""))
                    if res:
                        target = p["app" if metric.startswith("kube_pod_container") else "init"]
                        target.setdefault(labels.get("container", ""), {})[res] = value
                        p["node"] = labels.get("node") or p["node"]
                elif metric == "kube_pod_info" and labels.get("node"):
                    p["node"] = labels["node"]
        return [
            KsmPod(uid, p["ns"], p["name"], p["node"], p["started"], p["finished"], p["last"], p["labels"],
                   p["app"], p["init"])
            for uid, p in info.items() if p["started"] and (p["app"] or p["init"])
        ]

    def ksm_namespace_labels(self, start: datetime, end: datetime) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for _, samples in self._ksm(start, end):
            for metric, labels, _value in samples:
                if metric == "kube_namespace_labels":
                    out[labels.get("namespace", "")] = {k: v for k, v in labels.items() if k.startswith("label_")}
        return out

    def ksm_nodes(self, start: datetime, end: datetime) -> list[KsmNode]:
        nodes: dict[str, dict] = {}
        for t, samples in self._ksm(start, end):
            for metric, labels, value in samples:
                name = labels.get("node")
                if not name or not metric.startswith("kube_node_"):
                    continue
                n = nodes.setdefault(name, {"labels": {}, "alloc": {}, "cap": {}, "cordoned": False, "ready": True,
                                            "first": t, "last": t})
                n["first"], n["last"] = min(n["first"], t), max(n["last"], t)
                if metric == "kube_node_labels":
                    n["labels"] = {k: v for k, v in labels.items() if k.startswith("label_")}
                elif metric in ("kube_node_status_allocatable", "kube_node_status_capacity"):
                    res = ksm_resource(labels.get("resource", ""))
                    if res:
                        n["alloc" if metric.endswith("allocatable") else "cap"][res] = value
                elif metric == "kube_node_spec_unschedulable" and value > 0:
                    n["cordoned"] = True
                elif (metric == "kube_node_status_condition" and labels.get("condition") == "Ready"
                      and labels.get("status") == "true" and value < 1):
                    n["ready"] = False
        return [KsmNode(name, n["labels"], n["alloc"], n["cap"], n["cordoned"], n["ready"], n["first"], n["last"])
                for name, n in nodes.items()]
