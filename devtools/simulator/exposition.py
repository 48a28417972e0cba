"""dcgm-exporter and kube-state-metrics series of a scenario; text exposition and OpenMetrics history."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time as _time
from bisect import bisect_right
from dataclasses import dataclass

from . import dra
from .model import (
    DRIVER,
    MODELS,
    SEG,
    Controller,
    Node,
    Pod,
    Scenario,
    _uuid,
    parse_quantity,
    provider_id,
    sanitize,
    to_ts,
)

# (metric, key in entity_values, help): dcgm-exporter's field names (etc/default-counters.csv, help texts too)
DCGM_METRICS = [
    ("DCGM_FI_DEV_GPU_UTIL", "util", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "fb_free", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "fb_used", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "power", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_TEMP", "temp", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_XID_ERRORS", "xid", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "power_violation", "Throttling duration due to power constraints (in ns)."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "thermal_violation", "Throttling duration due to thermal constraints (in ns)."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_dbe", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "remap_uncorrectable",
     "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "remap_correctable", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "remap_failure", "Whether remapping of rows has failed"),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "throttle", "Current clock event reasons (bitmask)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gr", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "sm", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor", "Ratio of cycles the tensor (HMMA) pipe is active."),
]
DCGM_FAMILIES = [m for m, _k, _h in DCGM_METRICS]
# deploy/monitoring/gpufinops-recording.yaml, as a Prometheus evaluating it at every scrape stores it
# (``Scenario.recording_rules``): one series per raw series of these metrics that carries a pod (either spelling),
# named RECORDED, with the `signal` label and only the labels the rules keep; its value is the raw series' at the
# same instant. tests/monitoring/test_recording_rules.py holds this to the rules file.
RECORDED = "pod_gpu:gpufinops_dcgm:max"
# The rules' heartbeat (`vector(1)`, no labels), stored beside kube-state-metrics' series (one per scrape, like them).
RECORDED_HEARTBEAT = "gpufinops:recording_rules:heartbeat"
RECORDED_SIGNALS = {"DCGM_FI_PROF_SM_ACTIVE": "sm_active", "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gr_engine_active",
                    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active", "DCGM_FI_DEV_GPU_UTIL": "gpu_util",
                    "DCGM_FI_DEV_FB_USED": "fb_used"}
RECORDED_BY = ("namespace", "pod", "exported_namespace", "exported_pod", "UUID", "uuid", "gpu_uuid", "GPU_I_ID",
               "GPU_I_PROFILE", "vgpu", "dra_mig_device_uuid")

# The health fields of the same rules file: one series per physical GPU and field (`max by` the labels naming a GPU),
# named HEALTH_RECORDED, for the raw series of these metrics (either name of a renamed one), pod or not. Only GPUs and
# MIG parents carry these fields (never an instance), so a GPU's holders' series all give one recorded series, which
# holds a sample only at the scrapes where the field has something to report (``health_recorded_kept``).
HEALTH_RECORDED = "gpu:gpufinops_health:max"
HEALTH_RECORDED_FIELDS = {
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "clock_events", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "clock_events",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "row_remap_failure", "DCGM_FI_DEV_POWER_VIOLATION": "power_violation",
    "DCGM_FI_DEV_THERMAL_VIOLATION": "thermal_violation",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "uncorrectable_remapped_rows",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_dbe",
}
HEALTH_RECORDED_BY = ("UUID", "uuid", "Hostname", "hostname")
# The rules record a field only at the scrapes where it has something to report: clock events from this value up
# (a counted reason bit), every other field above 0. A sample below is not stored (a healthy GPU has no series).
HEALTH_RECORDED_FLOORS = {"clock_events": 8.0}


def health_recorded_kept(field: str, value: float) -> bool:
    """Whether the rules store this value of a recorded health field (``HEALTH_RECORDED_FLOORS``)."""
    floor = HEALTH_RECORDED_FLOORS.get(field)
    return value >= floor if floor is not None else value > 0


def health_recorded_field(metric: str, labels) -> str | None:
    """The `field` of a recorded health series (labels: pairs or a dict), None for any other series: the one kind
    of stored series whose samples depend on its value (``health_recorded_kept``)."""
    if metric != HEALTH_RECORDED:
        return None
    return dict(labels)["field"]


def health_recorded_row(metric: str, labels: list) -> list | None:
    """The labels of the HEALTH_RECORDED series of a stored raw series, or None (not a recorded health field)."""
    field = HEALTH_RECORDED_FIELDS.get(metric)
    if field is None:
        return None
    d = dict(labels)
    return [(k, d[k]) for k in HEALTH_RECORDED_BY if d.get(k)] + [("field", field)]


def recorded_row(metric: str, labels: list) -> list | None:
    """The labels of the recorded series of a stored raw series (``RECORDED``), or None when the rules record
    none for it (another metric, or no pod: `{exported_pod!=""} or {pod!="",exported_pod=""}`)."""
    signal = RECORDED_SIGNALS.get(metric)
    if signal is None:
        return None
    d = dict(labels)
    if not (d.get("exported_pod") or d.get("pod")):
        return None
    return [(k, d[k]) for k in RECORDED_BY if d.get(k)] + [("signal", signal)]
# Commented out in dcgm-exporter's stock lists (default-counters.csv, dcp-metrics-included.csv) and the GPU
# Operator's built-in one; GR_ENGINE_ACTIVE and PIPE_TENSOR_ACTIVE are on (Scenario.stock_counters).
STOCK_OFF = frozenset({"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY"})
# Typed `counter` in dcgm-exporter's /metrics (the OpenMetrics export types every family gauge: OpenMetrics
# counters need a `_total` suffix these names lack).
DCGM_COUNTERS = frozenset({"DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION",
                           "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                           "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"})
# Names an exporter may use instead (its CSV names the metric): the clock-event reasons field (112) was
# DCGM_FI_DEV_CLOCK_THROTTLE_REASONS before DCGM 3.1, the XID field (230) is DCGM_FI_DEV_XID_ERROR from 4.6.
LEGACY_CLOCK_EVENTS = {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"}
DCGM_4_6_XID = {"DCGM_FI_DEV_XID_ERRORS": "DCGM_FI_DEV_XID_ERROR"}
# Device-level fields: a MIG instance reports none of them (its GPU does); the row-remapping ones only on
# GPUs that remap rows (MODELS[...]["remap"]).
REMAP_KEYS = frozenset({"remap_uncorrectable", "remap_correctable", "remap_failure"})
DEVICE_KEYS = frozenset({"power", "temp", "throttle", "power_violation", "thermal_violation", "ecc_dbe"}) | REMAP_KEYS

KSM_HELP = {
    "kube_pod_info": "Information about pod.",
    "kube_pod_owner": "Information about the Pod's owner.",
    "kube_pod_status_phase": "The pods current phase.",
    "kube_pod_start_time": "Start time in unix timestamp for a pod.",
    "kube_pod_completion_time": "Completion time in unix timestamp for a pod.",
    "kube_pod_deletion_timestamp": "Unix deletion timestamp",
    "kube_pod_labels": "Kubernetes labels converted to Prometheus labels.",
    "kube_pod_status_unschedulable": "Describes the unschedulable status for the pod.",
    "kube_pod_container_resource_requests": "The number of requested request resource by a container.",
    "kube_pod_container_resource_limits": "The number of requested limit resource by a container.",
    "kube_pod_init_container_resource_requests": "The number of requested request resource by an init container.",
    "kube_pod_init_container_resource_limits": "The number of requested limit resource by an init container.",
    "kube_replicaset_owner": "Information about the ReplicaSet's owner.",
    "kube_job_owner": "Information about the Job's owner.",
    "kube_namespace_labels": "Kubernetes labels converted to Prometheus labels.",
    "kube_node_info": "Information about a cluster node.",
    "kube_node_labels": "Kubernetes labels converted to Prometheus labels.",
    "kube_node_status_capacity": "The capacity for different resources of a node.",
    "kube_node_status_allocatable": (
        "The allocatable for different resources of a node that are available for scheduling."
    ),
    "kube_node_spec_unschedulable": "Whether a node can schedule new pods.",
    "kube_node_status_condition": "The condition of a cluster node.",
    "kube_node_created": "Unix creation timestamp",
}
KSM_FAMILIES = [*KSM_HELP, RECORDED_HEARTBEAT]  # the heartbeat only with Scenario.recording_rules


def exporter_pod(sc: Scenario, node: str) -> str:
    return "nvidia-dcgm-exporter-" + _uuid("dcgmpod", sc.name, node).replace("-", "")[:5]


def _fmt(v: float) -> str:
    if v == int(v):
        return str(int(v))
    return repr(v)


def _esc(v: str) -> str:
    if "\\" in v or '"' in v or "\n" in v:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return v


# ------------------------------------------------------------------------------------------ DCGM
@dataclass
class DcgmSeries:
    """The DCGM series present at an instant, without values: they change only at change points (see
    ``ChangePoints``), while values change every 5-minute segment. ``series`` rows are
    (metric, [(label, value), ...], slot, key): the value is ``Scenario.entity_values(entity, t, holders)[key]``
    of ``entities[slot]`` (a MIG parent's sums its instances', which follow it)."""

    entities: list  # [(entity, holders)], slot order
    series: list


class DcgmLayout:
    """The label sets of the DCGM series, per entity and holders: they change only when an entity's holders
    do, so a layout kept across instants (an export, a simulated Prometheus) builds each once.

    ``hostname_label``: ``Hostname`` (exporters up to 4.5.3-4.8.2) or ``hostname``; ``exported``: the
    Prometheus-Operator shape (the exporter's pod labels renamed ``exported_*``); ``scrape_labels``: what
    Prometheus attaches when scraping (job/instance, with ``exported`` the target's namespace/pod/container/
    service/endpoint); ``drop_empty``: empty-valued labels removed (what the TSDB stores); ``metrics``: only
    these (emitted) names; ``renames``: canonical name -> the name this exporter uses
    (``LEGACY_CLOCK_EVENTS``, ``DCGM_4_6_XID``)."""

    def __init__(self, sc: Scenario, hostname_label: str = "Hostname", exported: bool = False,
                 scrape_labels: bool = False, drop_empty: bool = False, metrics=None, renames=None):
        self.sc = sc
        self.hostname_label = hostname_label
        self.exported = exported
        self.scrape_labels = scrape_labels
        self.drop_empty = drop_empty
        self.renames = dict(renames or {})
        # Stored series only (what a Prometheus holds): with the recording rules, their series too.
        self.recorded = bool(sc.recording_rules and scrape_labels and drop_empty)
        self.want = set(metrics) if metrics else None
        if sc.stock_counters:  # dcgm-exporter's stock counters list: SM activity commented out
            self.want = (self.want or set(DCGM_FAMILIES)) - STOCK_OFF
        self.names = (("exported_container", "exported_namespace", "exported_pod") if exported
                      else ("container", "namespace", "pod"))
        self.plans: dict = {}  # entity kind -> [(emitted metric, value key)]
        self.targets: dict = {}  # node -> target labels
        self.cache: dict = {}  # (entity idx, holders key) -> rows

    @property
    def families(self) -> list[str]:
        """The metric names this layout emits, in exposition order."""
        names = [n for n in (self.renames.get(m, m) for m in DCGM_FAMILIES) if self.want is None or n in self.want]
        return (names + ([RECORDED] if self.recorded and set(names) & set(RECORDED_SIGNALS) else [])
                + ([HEALTH_RECORDED] if self.recorded and set(names) & set(HEALTH_RECORDED_FIELDS) else []))

    def _plan(self, e) -> list:
        kind = ("instance" if e.profile is not None else "parent" if e.mig_parent else "gpu",
                bool(MODELS[e.model].get("remap")))
        plan = self.plans.get(kind)
        if plan is None:
            plan = self.plans[kind] = []
            for metric, key, _h in DCGM_METRICS:
                name = self.renames.get(metric, metric)
                if self.want is not None and name not in self.want:
                    continue
                # MIG instances export no GPU_UTIL and no device-level field; MIG parents no GPU_UTIL.
                if key == "util" and kind[0] != "gpu":
                    continue
                if key in DEVICE_KEYS and kind[0] == "instance":
                    continue
                if key in REMAP_KEYS and not kind[1]:
                    continue
                plan.append((name, key))
        return plan

    def _target(self, node: Node) -> list:
        target = self.targets.get(node.name)
        if target is None:
            target = []
            if self.exported:
                target = [
                    ("endpoint", "gpu-metrics"),
                    ("instance", f"{node.ip}:9400"),
                    ("job", "nvidia-dcgm-exporter"),
                    ("namespace", "gpu-operator"),
                    ("pod", exporter_pod(self.sc, node.name)),
                    ("service", "nvidia-dcgm-exporter"),
                ]
                if self.scrape_labels:
                    target.insert(0, ("container", "nvidia-dcgm-exporter"))
            elif self.scrape_labels:
                target = [("instance", f"{node.ip}:9400"), ("job", "nvidia-dcgm-exporter")]
            self.targets[node.name] = target
        return target

    def rows(self, node: Node, e, holders: list) -> list:
        """[(metric, [(label, value), ...], value key)] of entity ``e`` held by ``holders`` (cached)."""
        key = (e.idx, tuple((p.idx, c, v, g) for p, c, v, g in holders))
        rows = self.cache.get(key)
        if rows is not None:
            return rows
        names = self.names
        base = [
            ("gpu", str(e.gpu)),
            ("UUID", e.uuid),
            ("pci_bus_id", e.pci),
            ("device", f"nvidia{e.gpu}"),
            ("modelName", MODELS[e.model]["modelName"]),
        ]
        if e.profile:
            base += [("GPU_I_PROFILE", e.profile), ("GPU_I_ID", e.gi_id)]
        # Without NODE_NAME dcgm-exporter names its own pod as the Hostname (dcgm-exporter#58, #68, #188).
        host = node.name if self.sc.exporter_node_name else exporter_pod(self.sc, node.name)
        base += [(self.hostname_label, host), ("DCGM_FI_DRIVER_VERSION", DRIVER)]
        attrs = []
        # dcgm-exporter never attributes HAMi tenants, nor DRA devices unless its DRA attribution is on.
        attributed = node.kind != "hami" and (node.kind != "dra" or self.sc.dra_attribution)
        if not e.labels_lost and attributed:
            for pod, cont, vgpu, ghost in holders:
                if ghost:
                    continue
                a = [(names[0], cont), (names[1], pod.namespace), (names[2], pod.name)]
                if vgpu is not None:
                    a.append(("vgpu", vgpu))
                if node.kind == "dra":
                    a += self._dra_labels(node, e, pod)
                attrs.append(a)
        if not attrs:  # no pod holds it: dcgm-exporter leaves the pod labels empty
            attrs = [[] if self.drop_empty else [(names[0], ""), (names[1], ""), (names[2], "")]]
        target = self._target(node)
        rows = self.cache[key] = [(metric, base + a + target, vkey) for metric, vkey in self._plan(e) for a in attrs]
        if self.recorded:  # one per label set (`max by`): a pod's containers on one GPU read the same value
            recorded, health = {}, {}
            for metric, labels, vkey in rows:
                rec = recorded_row(metric, labels)
                if rec is not None:
                    recorded.setdefault(tuple(rec), vkey)
                rec = health_recorded_row(metric, labels)
                if rec is not None:
                    health.setdefault(tuple(rec), vkey)
            rows += [(RECORDED, list(rec), vkey) for rec, vkey in recorded.items()]
            rows += [(HEALTH_RECORDED, list(rec), vkey) for rec, vkey in health.items()]
        return rows

    def _dra_labels(self, node: Node, e, pod: Pod) -> list:
        """The labels dcgm-exporter's DRA attribution adds to the series of a device a pod consumes (``dra_*``
        keep their names under Prometheus Operator, unlike pod/namespace/container)."""
        claim_idx, name = self.sc.dra_held[(pod.idx, e.idx)]
        claim = self.sc.claims[claim_idx]
        labels = [("dra_claim_name", claim.name), ("dra_claim_namespace", claim.namespace),
                  ("dra_device_name", name), ("dra_driver_name", dra.DRIVER)]
        if e.profile is not None:
            d = dra.device(self.sc, node.name, name)
            labels += [("dra_mig_device_uuid", d.uuid), ("dra_mig_profile", d.profile)]
        return labels + [("dra_pool_name", node.name)]

    def gpus(self, t: float):
        """Per physical GPU at t, in exposition order: [(entity, holders, rows)] for the GPU and then its MIG
        instances. A GPU in a ``vanish`` gap of its health reports nothing."""
        sc = self.sc
        health = sc.health
        for node in sc.nodes:
            if node.created > t or not node.entities:
                continue
            for gidx in node.entities:
                ent = sc.entities[gidx]
                h = health.get(gidx)
                if h is not None and h.gaps and h.vanished(t):
                    continue
                gpu = []
                for e in [ent] + [sc.entities[c] for c in ent.children]:
                    holders = sc.entity_state(e, t) if not e.mig_parent else []
                    gpu.append((e, holders, self.rows(node, e, holders)))
                yield gpu


def _dcgm_gpus(sc: Scenario, t: float, hostname_label: str, exported: bool, scrape_labels: bool,
               drop_empty: bool, metrics, renames=None):
    """``DcgmLayout(...).gpus(t)`` for one instant."""
    return DcgmLayout(sc, hostname_label, exported, scrape_labels, drop_empty, metrics, renames).gpus(t)


def _gpu_values(sc: Scenario, t: float, gpu: list, activity_only: bool = False) -> list[dict]:
    """``entity_values`` of a GPU and its MIG instances at t (instances first: the GPU sums them)."""
    values = [None if e.mig_parent else sc.entity_values(e, t, holders, activity_only=activity_only)
              for e, holders, _rows in gpu]
    if gpu[0][0].mig_parent:
        e, holders, _rows = gpu[0]
        values[0] = sc.entity_values(e, t, holders, kids=values[1:], activity_only=activity_only)
    return values


def dcgm_series(
    sc: Scenario,
    t: float,
    hostname_label: str = "Hostname",
    exported: bool = False,
    scrape_labels: bool = False,
    drop_empty: bool = False,
    metrics=None,
    renames=None,
    layout: DcgmLayout | None = None,
) -> DcgmSeries:
    """Every DCGM series at t (see ``DcgmLayout`` for the options, or give one), in exposition order."""
    layout = layout or DcgmLayout(sc, hostname_label, exported, scrape_labels, drop_empty, metrics, renames)
    entities: list = []
    series: list = []
    for gpu in layout.gpus(t):
        for e, holders, rows in gpu:
            slot = len(entities)
            entities.append((e, holders))
            series += [(metric, labels, slot, key) for metric, labels, key in rows]
    return DcgmSeries(entities, series)


def dcgm_rows(
    sc: Scenario,
    t: float,
    hostname_label: str = "Hostname",
    exported: bool = False,
    scrape_labels: bool = False,
    drop_empty: bool = False,
    metrics=None,
    renames=None,
):
    """Yield (metric, [(label, value), ...], value) for every DCGM series at t (options: ``DcgmLayout``)."""
    for gpu in _dcgm_gpus(sc, t, hostname_label, exported, scrape_labels, drop_empty, metrics, renames):
        for (_e, _holders, rows), values in zip(gpu, _gpu_values(sc, t, gpu), strict=True):
            for metric, labels, key in rows:
                yield metric, labels, values[key]


def dcgm_samples(sc: Scenario, at, *, hostname_label: str = "Hostname", exported_labels: bool = False,
                 renames=None):
    return [(m, dict(lab), float(v))
            for m, lab, v in dcgm_rows(sc, to_ts(at), hostname_label, exported_labels, renames=renames)]


def render_text(rows, helps: dict | None = None, counters=frozenset()) -> str:
    """Prometheus text exposition (0.0.4), families contiguous with HELP/TYPE (``counters``: typed counter)."""
    by: dict = {}
    for m, lab, v in rows:
        by.setdefault(m, []).append((lab, v))
    out = []
    for m, items in by.items():
        if helps and m in helps:
            out.append(f"# HELP {m} {helps[m]}")
        out.append(f"# TYPE {m} {'counter' if m in counters else 'gauge'}")
        for lab, v in items:
            ls = ",".join(f'{k}="{_esc(x)}"' for k, x in (lab.items() if isinstance(lab, dict) else lab))
            out.append(f"{m}{{{ls}}} {_fmt(v)}")
    return "\n".join(out) + "\n"


def dcgm_helps(renames=None) -> dict:
    renames = renames or {}
    return {renames.get(m, m): h for m, _k, h in DCGM_METRICS}


def dcgm_text(sc: Scenario, at, hostname_label: str = "Hostname", exported: bool = False, renames=None) -> str:
    """dcgm-exporter's /metrics at ``at`` (counters typed as the exporter types them)."""
    return render_text(dcgm_rows(sc, to_ts(at), hostname_label, exported, renames=renames), dcgm_helps(renames),
                       DCGM_COUNTERS)


# ------------------------------------------------------------------------------------------ KSM
def _unit(res: str) -> str:
    return {"cpu": "core", "memory": "byte"}.get(
        res, "byte" if res.startswith(("ephemeral", "hugepages")) else "integer"
    )


def ksm_rows(sc: Scenario, t: float):
    """Yield (metric, [(label, value)], value) as kube-state-metrics exposes them at t."""
    for p in sc.pods:
        if p.created <= t < p.deleted:
            yield from ksm_pod_rows(sc, p, t)
    for c in sc.controllers.values():
        if c.visible(t):
            yield from ksm_controller_rows(c)
    yield from ksm_namespace_rows(sc)
    for n in sc.nodes:
        if n.created <= t:
            yield from ksm_node_rows(sc, n, t)


def ksm_pod_state(p: Pod, t: float) -> tuple:
    """What ``ksm_pod_rows`` depends on at t, besides the pod itself."""
    return (
        p.node is not None and p.start is not None and t >= p.start,
        p.phase(t),
        p.finish is not None and t >= p.finish,
        p.deleted_running and p.deleted - 30 <= t,
    )


def ksm_pod_rows(sc: Scenario, p: Pod, t: float):
    """The kube-state-metrics rows of a visible pod at t (they change with ``ksm_pod_state``)."""
    ns, name, uid = p.namespace, p.name, p.uid
    pl = [("namespace", ns), ("pod", name), ("uid", uid)]
    bound = p.node is not None and p.start is not None and t >= p.start
    node = p.node if bound else ""
    nobj = sc.node_by_name.get(p.node) if bound else None
    ok, oname = p.owner if p.owner else ("<none>", "<none>")
    yield (
        "kube_pod_info",
        pl
        + [
            ("host_ip", nobj.ip if nobj else ""),
            ("pod_ip", p.ip if bound else ""),
            ("node", node),
            ("created_by_kind", ok),
            ("created_by_name", oname),
            ("priority_class", ""),
            ("host_network", "false"),
        ],
        1.0,
    )
    yield (
        "kube_pod_owner",
        pl + [("owner_kind", ok), ("owner_name", oname), ("owner_is_controller", "true" if p.owner else "<none>")],
        1.0,
    )
    phase = p.phase(t)
    for ph in ("Pending", "Succeeded", "Failed", "Unknown", "Running"):
        yield "kube_pod_status_phase", pl + [("phase", ph)], 1.0 if ph == phase else 0.0
    if bound:
        yield "kube_pod_start_time", pl, float(p.start)
    if p.finish is not None and t >= p.finish:
        yield "kube_pod_completion_time", pl, float(p.finish)
    if p.deleted_running and p.deleted - 30 <= t:
        yield "kube_pod_deletion_timestamp", pl, float(p.deleted)
    # kube-state-metrics exports only the labels its --metric-labels-allowlist names (none by default).
    shown = sorted(p.labels.items()) if sc.ksm_labels is None else \
        sorted((k, v) for k, v in p.labels.items() if k in sc.ksm_labels)
    yield "kube_pod_labels", pl + [("label_" + sanitize(k), v) for k, v in shown], 1.0
    if p.start is None:
        yield "kube_pod_status_unschedulable", pl, 1.0
    for fam_req, fam_lim, conts in (
        ("kube_pod_container_resource_requests", "kube_pod_container_resource_limits", p.containers),
        ("kube_pod_init_container_resource_requests", "kube_pod_init_container_resource_limits", p.init_containers),
    ):
        for c in conts:
            cl = pl[:2] + [("uid", uid), ("container", c.name), ("node", node)]
            req = {"cpu": c.cpu, "memory": c.memory}
            req.update({r: str(n) for r, n in c.gpu.items()})
            for r, q in req.items():
                yield fam_req, cl + [("resource", sanitize(r)), ("unit", _unit(r))], parse_quantity(q)
            lim = {"memory": c.memory}
            lim.update({r: str(n) for r, n in c.gpu.items()})
            for r, q in lim.items():
                yield fam_lim, cl + [("resource", sanitize(r)), ("unit", _unit(r))], parse_quantity(q)


def ksm_controller_rows(c: Controller):
    """``kube_replicaset_owner`` / ``kube_job_owner`` of a visible ReplicaSet or Job (``<none>`` without owner).
    kube-state-metrics has no owner series for StatefulSets: nothing for them."""
    if c.kind == "StatefulSet":
        return
    replicaset = c.kind == "ReplicaSet"
    metric, label = ("kube_replicaset_owner", "replicaset") if replicaset else ("kube_job_owner", "job_name")
    ok, oname = c.owner if c.owner else ("<none>", "<none>")
    yield (
        metric,
        [("namespace", c.namespace), (label, c.name), ("owner_kind", ok), ("owner_name", oname),
         ("owner_is_controller", "true" if c.owner else "<none>")],
        1.0,
    )


def ksm_namespace_rows(sc: Scenario):
    for ns, labels in sc.namespaces.items():
        shown = sorted(labels.items()) if sc.ksm_labels is None else \
            sorted((k, v) for k, v in labels.items() if k in sc.ksm_labels)
        yield (
            "kube_namespace_labels",
            [("namespace", ns)] + [("label_" + sanitize(k), v) for k, v in shown],
            1.0,
        )


def ksm_node_rows(sc: Scenario, n: Node, t: float):
    """The kube-state-metrics rows of an existing node at t (they change with ``n.unschedulable(t)``)."""
    nl = [("node", n.name)]
    yield (
        "kube_node_info",
        nl
        + [
            ("container_runtime_version", "containerd://1.7.22"),
            ("internal_ip", n.ip),
            ("kernel_version", "6.1.112-124.190.amzn2023.x86_64"),
            ("kubelet_version", f"v1.{dra.kubernetes_minor(sc)}.4"),
            ("kubeproxy_version", f"v1.{dra.kubernetes_minor(sc)}.4"),
            ("os_image", "Amazon Linux 2023"),
            ("pod_cidr", "10.244.0.0/24"),
            ("provider_id", provider_id(sc.cluster_name, n.name)),
            ("system_uuid", n.uid),
        ],
        1.0,
    )
    yield "kube_node_labels", nl + [("label_" + sanitize(k), v) for k, v in sorted(n.labels.items())], 1.0
    for fam, src in (("kube_node_status_capacity", n.capacity), ("kube_node_status_allocatable", n.allocatable)):
        for r, q in src.items():
            yield fam, nl + [("resource", sanitize(r)), ("unit", _unit(r))], parse_quantity(q)
    yield "kube_node_spec_unschedulable", nl, 1.0 if n.unschedulable(t) else 0.0
    for st in ("true", "false", "unknown"):
        yield (
            "kube_node_status_condition",
            nl + [("condition", "Ready"), ("status", st)],
            1.0 if st == "true" else 0.0,
        )
    yield "kube_node_created", nl, float(n.created)
    if not sc.exporter_node_name and n.entities:
        # The node's dcgm-exporter pod, whose name its series carry as Hostname when it runs without NODE_NAME.
        # (Only in that variant: the other scenarios' kube-state-metrics series stay as the tests pin them.)
        pod = exporter_pod(sc, n.name)
        yield (
            "kube_pod_info",
            [("namespace", "gpu-operator"), ("pod", pod), ("uid", _uuid("dcgmpod-uid", sc.name, n.name)),
             ("host_ip", n.ip), ("pod_ip", n.ip), ("node", n.name), ("created_by_kind", "DaemonSet"),
             ("created_by_name", "nvidia-dcgm-exporter"), ("priority_class", "system-node-critical"),
             ("host_network", "false")],
            1.0,
        )


def ksm_samples(sc: Scenario, at):
    return [(m, dict(lab), float(v)) for m, lab, v in ksm_rows(sc, to_ts(at))]


# ------------------------------------------------------------------------------------------ what a TSDB stores
KSM_TARGET = [("instance", "10.0.0.5:8080"), ("job", "kube-state-metrics")]


def tsdb_layout(sc: Scenario, hostname_label: str = "Hostname", exported: bool = False, metrics=None,
                renames=None) -> DcgmLayout:
    """The layout of DCGM series as Prometheus stores them after a scrape: target labels added, empty labels
    dropped."""
    return DcgmLayout(sc, hostname_label, exported, scrape_labels=True, drop_empty=True, metrics=metrics,
                      renames=renames)


def tsdb_dcgm_series(sc: Scenario, t: float, hostname_label: str = "Hostname", exported: bool = False,
                     metrics=None, renames=None, layout: DcgmLayout | None = None) -> DcgmSeries:
    """DCGM series as Prometheus stores them after a scrape (``tsdb_layout``)."""
    return dcgm_series(sc, t, layout=layout or tsdb_layout(sc, hostname_label, exported, metrics, renames))


def tsdb_ksm_labels(labels: list) -> list:
    """kube-state-metrics labels as Prometheus stores them after a scrape (target added, empty dropped); the
    recording rules' heartbeat (no labels: no scrape) as it is."""
    if not labels:
        return []
    return [(k, x) for k, x in labels if x != ""] + KSM_TARGET


def tsdb_ksm_rows(sc: Scenario, t: float, metrics=None):
    """kube-state-metrics rows as Prometheus stores them after a scrape."""
    want = set(metrics) if metrics else None
    for m, lab, v in ksm_rows(sc, t):
        if want is None or m in want:
            yield m, tsdb_ksm_labels(lab), v


class ChangePoints:
    """The instants at which the series or values of a scenario can change.

    DCGM series change when a node appears, a pod starts or stops holding a GPU, a GPU vanishes or comes
    back, or an XID window opens or closes; their values also change at every 5-minute segment (every health
    event sits on that grid). kube-state-metrics series change when a pod, a ReplicaSet, a Job or a node
    appears, a pod starts, finishes, shows its deletion timestamp or goes, or a node is cordoned. Two instants
    with the same key have the same samples (``dcgm_rows``, ``ksm_rows``): exporters and the simulated
    Prometheus compute a state once per key, not once per sample."""

    def __init__(self, sc: Scenario):
        dcgm = {n.created for n in sc.nodes if n.entities}
        for e in sc.entities:
            for s, end, *_ in e.intervals:
                dcgm.update((s, end))
        for windows in sc.xid_events.values():
            for s, end, _code in windows:
                dcgm.update((s, end))
        for h in sc.health.values():
            for s, end in h.gaps:
                dcgm.update((s, end))
        ksm = set()
        for c in sc.controllers.values():
            ksm.update((c.created, c.deleted))
        for p in sc.pods:
            ksm.update((p.created, p.deleted))
            if p.start is not None:
                ksm.add(p.start)
            if p.finish is not None:
                ksm.add(p.finish)
            if p.deleted_running:
                ksm.add(p.deleted - 30)
        for n in sc.nodes:
            ksm.add(n.created)
            if n.unschedulable_from is not None:
                ksm.add(n.unschedulable_from)
        self.dcgm = sorted(x for x in dcgm if x is not None and x != float("inf"))
        self.ksm = sorted(x for x in ksm if x is not None and x != float("inf"))

    def dcgm_series_key(self, t: float) -> int:
        return bisect_right(self.dcgm, t)

    def dcgm_key(self, t: float) -> tuple[int, int]:
        return int(t // SEG), bisect_right(self.dcgm, t)

    def ksm_key(self, t: float) -> int:
        return bisect_right(self.ksm, t)

    def next_dcgm(self, t: float) -> float:
        """The first DCGM change point after t (segment boundaries aside); inf when there is none."""
        i = bisect_right(self.dcgm, t)
        return self.dcgm[i] if i < len(self.dcgm) else float("inf")

    def next_ksm(self, t: float) -> float:
        i = bisect_right(self.ksm, t)
        return self.ksm[i] if i < len(self.ksm) else float("inf")


# ------------------------------------------------------------------------------------------ OpenMetrics export
def _ksm_objects(sc: Scenario, t: float):
    """(cache key, rows at t) of every object kube-state-metrics reports at t: rows change only with the key."""
    for p in sc.pods:
        if p.created <= t < p.deleted:
            yield ("pod", p.idx, ksm_pod_state(p, t)), lambda p=p: ksm_pod_rows(sc, p, t)
    for key, c in sc.controllers.items():
        if c.visible(t):
            yield ("controller", key), lambda c=c: ksm_controller_rows(c)
    yield ("namespaces",), lambda: ksm_namespace_rows(sc)
    for n in sc.nodes:
        if n.created <= t:
            yield ("node", n.name, n.unschedulable(t)), lambda n=n: ksm_node_rows(sc, n, t)
    if sc.recording_rules:
        yield ("recording rules",), heartbeat_rows


def heartbeat_rows() -> list:
    return [(RECORDED_HEARTBEAT, [], 1.0)]


def _concatenate(out, path: str) -> None:
    """Append the file at ``path`` to the binary file ``out`` (in the kernel when it can)."""
    out.flush()
    with open(path, "rb") as src:
        size = os.fstat(src.fileno()).st_size
        if hasattr(os, "sendfile"):
            offset = 0
            try:
                while offset < size:
                    sent = os.sendfile(out.fileno(), src.fileno(), offset, size - offset)
                    if sent == 0:
                        break
                    offset += sent
                out.seek(0, os.SEEK_END)
                if offset == size:
                    return
                src.seek(offset)
            except OSError:
                src.seek(offset)
        shutil.copyfileobj(src, out, 1 << 22)


def export_openmetrics(
    sc: Scenario,
    since: float,
    until: float,
    out_path,
    *,
    step: int = 30,
    hostname_label: str = "Hostname",
    exported: bool = False,
    metrics=None,
    include_ksm: bool = True,
    progress=None,
    renames=None,
    window_seconds: int | None = None,
) -> dict:
    """Stream DCGM (+KSM) series for [since, until) at ``step`` seconds to an OpenMetrics file.

    Memory-bounded: the lines of one state (``ChangePoints``) are held at a time; each family is streamed
    into its own temporary file and the files are concatenated (families contiguous, samples of
    every series in time order, integer-second timestamps, ``# EOF``). A series' labels are written once per
    entity and holders (DCGM) or object state (kube-state-metrics), not once per state.

    With ``window_seconds``, ``out_path`` is a directory (made if missing) of one complete OpenMetrics file per
    window of that many seconds since the epoch that has samples, ``window-<n>.om`` (n: the timestamps // window):
    promtool 2.42 makes one block per two-hour window and re-reads its whole input for each, so a history written
    per window is read twice instead of once per window, and needs no split pass over it first."""
    layout = tsdb_layout(sc, hostname_label, exported, metrics, renames)
    dcgm_fams = layout.families
    ksm_fams = [f for f in KSM_FAMILIES if not metrics or f in metrics] if include_ksm else []
    fams = dcgm_fams + ksm_fams
    out_path = str(out_path)
    if window_seconds is not None:
        os.makedirs(out_path, exist_ok=True)
    tmpdir = tempfile.mkdtemp(prefix="simexport-", dir=os.path.dirname(os.path.abspath(out_path)) or None)
    files = {f: open(os.path.join(tmpdir, f), "wb", buffering=1 << 20) for f in fams}  # noqa: SIM115 (closed below)
    helps = dcgm_helps(renames)
    helps.update(KSM_HELP)
    written: list[str] = []

    def write_out(window: int | None) -> None:
        """The family files so far as one OpenMetrics file (of `window`, or the whole `out_path`), then emptied; a
        window without samples has no file."""
        if window is not None and not any(fh.tell() for fh in files.values()):
            return
        path = out_path if window is None else os.path.join(out_path, f"window-{window}.om")
        with open(path, "wb", buffering=1 << 20) as out:
            for f in fams:
                fh = files[f]
                if fh.tell() == 0:
                    continue
                fh.close()
                out.write(f"# HELP {f} {helps.get(f, f)}\n# TYPE {f} gauge\n".encode())
                _concatenate(out, fh.name)
                files[f] = open(fh.name, "wb", buffering=1 << 20)  # noqa: SIM115 (closed below)
            out.write(b"# EOF\n")
        written.append(path)
    changes = ChangePoints(sc)

    def prefix(m: str, lab: list) -> bytes:
        return (m + "{" + ",".join(f'{k}="{_esc(x)}"' for k, x in lab) + "} ").encode()

    values_text: dict = {}

    def value(v: float) -> bytes:
        text = values_text.get(v)
        if text is None:
            if len(values_text) > 200_000:
                values_text.clear()
            text = values_text[v] = (_fmt(v) + " ").encode()
        return text

    series: set = set()
    samples = 0
    t0 = _time.time()
    try:
        dcgm_key = ksm_key = None
        lines: dict = {f: [] for f in fams}
        dcgm_prefixes: dict = {}  # (entity, holders) -> [(family, prefix, value key)]: the last state's only
        ksm_lines: dict = {}  # object state -> [(family, line)]: the last state's only
        want_ksm = set(ksm_fams)
        ts = int(since)
        n_steps = max(1, (int(until) - int(since) + step - 1) // step)
        i = 0
        window = None if window_seconds is None else ts // window_seconds
        while ts < until:
            if window is not None and ts // window_seconds != window:
                write_out(window)
                window = ts // window_seconds
            key = changes.dcgm_key(ts)
            if key != dcgm_key and dcgm_fams:
                for f in dcgm_fams:
                    lines[f] = []
                kept: dict = {}
                for gpu in layout.gpus(ts):
                    for (e, holders, rows), vals in zip(gpu, _gpu_values(sc, ts, gpu), strict=True):
                        ekey = (e.idx, tuple((p.idx, c, v, g) for p, c, v, g in holders))
                        pre = dcgm_prefixes.get(ekey)
                        if pre is None:
                            pre = [(m, prefix(m, lab), k, health_recorded_field(m, lab)) for m, lab, k in rows]
                            series.update(p for _m, p, _k, field in pre if field is None)
                        kept[ekey] = pre
                        for m, p, k, field in pre:
                            v = vals[k]
                            if field is not None:  # recorded health: stored only with something to report
                                if not health_recorded_kept(field, v):
                                    continue
                                series.add(p)
                            lines[m].append(p + value(v))
                dcgm_prefixes = kept
                layout.cache = {k: layout.cache[k] for k in kept}  # only the current state's label sets
                dcgm_key = key
            if include_ksm and ksm_fams and changes.ksm_key(ts) != ksm_key:
                for f in ksm_fams:
                    lines[f] = []
                kept = {}
                for okey, rows_at in _ksm_objects(sc, ts):
                    got = ksm_lines.get(okey)
                    if got is None:
                        got = []
                        for m, lab, v in rows_at():
                            if m in want_ksm:
                                p = prefix(m, tsdb_ksm_labels(lab))
                                series.add(p)
                                got.append((m, p + value(v)))
                    kept[okey] = got
                    for m, text in got:
                        lines[m].append(text)
                ksm_lines = kept
                ksm_key = changes.ksm_key(ts)
            suffix = b"%d\n" % ts
            for f, ls in lines.items():
                if ls:
                    files[f].write(suffix.join(ls) + suffix)
                    samples += len(ls)
            i += 1
            if progress and (i % max(1, n_steps // 20) == 0 or ts + step >= until):
                progress(i, n_steps, samples, _time.time() - t0)
            ts += step
        write_out(window)
    finally:
        for fh in files.values():
            if not fh.closed:
                fh.close()
        shutil.rmtree(tmpdir, ignore_errors=True)
    return {"samples": samples, "series": len(series), "bytes": sum(os.path.getsize(p) for p in written),
            "files": written, "seconds": _time.time() - t0}


def stderr_progress(i, n, samples, elapsed):
    sys.stderr.write(f"\r  {i}/{n} steps, {samples:,} samples, {elapsed:.1f}s")
    if i >= n:
        sys.stderr.write("\n")
    sys.stderr.flush()
