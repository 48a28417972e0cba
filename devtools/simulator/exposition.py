"""dcgm-exporter and kube-state-metrics series of a scenario; text exposition and OpenMetrics history."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time as _time
from bisect import bisect_right
from dataclasses import dataclass

from .model import DRIVER, MODELS, SEG, Node, Pod, Scenario, _uuid, parse_quantity, sanitize, to_ts

# (metric, key in entity_values, help)
DCGM_METRICS = [
    ("DCGM_FI_DEV_GPU_UTIL", "util", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "fb_free", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "fb_used", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "power", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_TEMP", "temp", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_XID_ERRORS", "xid", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "throttle", "Current clock throttle reasons (bitmask)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gr", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "sm", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor", "Ratio of cycles the tensor (HMMA) pipe is active."),
]
DCGM_FAMILIES = [m for m, _k, _h in DCGM_METRICS]

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
KSM_FAMILIES = list(KSM_HELP)


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


def _dcgm_gpus(sc: Scenario, t: float, hostname_label: str, exported: bool, scrape_labels: bool,
               drop_empty: bool, metrics):
    """Per physical GPU at t, in exposition order: [(entity, holders, [(metric, labels, value key)])] for the
    GPU and then its MIG instances."""
    want = set(metrics) if metrics else None
    names = (
        ("exported_container", "exported_namespace", "exported_pod") if exported else ("container", "namespace", "pod")
    )
    for node in sc.nodes:
        if node.created > t or not node.entities:
            continue
        target = []
        if scrape_labels or exported:
            if exported:
                target = [
                    ("endpoint", "gpu-metrics"),
                    ("instance", f"{node.ip}:9400"),
                    ("job", "nvidia-dcgm-exporter"),
                    ("namespace", "gpu-operator"),
                    ("pod", exporter_pod(sc, node.name)),
                    ("service", "nvidia-dcgm-exporter"),
                ]
                if scrape_labels:
                    target.insert(0, ("container", "nvidia-dcgm-exporter"))
            else:
                target = [("instance", f"{node.ip}:9400"), ("job", "nvidia-dcgm-exporter")]
        for gidx in node.entities:
            ent = sc.entities[gidx]
            gpu = []
            for e in [ent] + [sc.entities[c] for c in ent.children]:
                holders = sc.entity_state(e, t) if not e.mig_parent else []
                m = MODELS[e.model]
                base = [
                    ("gpu", str(e.gpu)),
                    ("UUID", e.uuid),
                    ("pci_bus_id", e.pci),
                    ("device", f"nvidia{e.gpu}"),
                    ("modelName", m["modelName"]),
                ]
                if e.profile:
                    base += [("GPU_I_PROFILE", e.profile), ("GPU_I_ID", e.gi_id)]
                base += [(hostname_label, node.name), ("DCGM_FI_DRIVER_VERSION", DRIVER)]
                attrs = []
                if not e.labels_lost:
                    for pod, cont, vgpu, ghost in holders:
                        if ghost:
                            continue
                        a = [(names[0], cont), (names[1], pod.namespace), (names[2], pod.name)]
                        if vgpu is not None:
                            a.append(("vgpu", vgpu))
                        attrs.append(a)
                if not attrs:
                    attrs = [[] if drop_empty else [(names[0], ""), (names[1], ""), (names[2], "")]]
                rows = []
                for metric, key, _h in DCGM_METRICS:
                    if want is not None and metric not in want:
                        continue
                    # MIG instances export no GPU_UTIL, power, temperature or throttling; MIG parents no GPU_UTIL.
                    if key == "util" and (e.mig_parent or e.profile is not None):
                        continue
                    if key in ("power", "temp", "throttle") and e.profile is not None:
                        continue
                    for a in attrs:
                        rows.append((metric, base + a + target, key))
                gpu.append((e, holders, rows))
            yield gpu


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
) -> DcgmSeries:
    """Every DCGM series at t (see ``dcgm_rows`` for the options), in exposition order."""
    entities: list = []
    series: list = []
    for gpu in _dcgm_gpus(sc, t, hostname_label, exported, scrape_labels, drop_empty, metrics):
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
):
    """Yield (metric, [(label, value), ...], value) for every DCGM series at t.

    scrape_labels adds what Prometheus attaches when scraping (job/instance, and with
    ``exported`` the Prometheus-Operator target labels namespace/pod/container/service/endpoint).
    drop_empty removes empty-valued labels (what the TSDB stores)."""
    for gpu in _dcgm_gpus(sc, t, hostname_label, exported, scrape_labels, drop_empty, metrics):
        for (_e, _holders, rows), values in zip(gpu, _gpu_values(sc, t, gpu), strict=True):
            for metric, labels, key in rows:
                yield metric, labels, values[key]


def dcgm_samples(sc: Scenario, at, *, hostname_label: str = "Hostname", exported_labels: bool = False):
    return [(m, dict(lab), float(v)) for m, lab, v in dcgm_rows(sc, to_ts(at), hostname_label, exported_labels)]


def render_text(rows, helps: dict | None = None) -> str:
    """Prometheus text exposition (0.0.4), families contiguous with HELP/TYPE."""
    by: dict = {}
    for m, lab, v in rows:
        by.setdefault(m, []).append((lab, v))
    out = []
    for m, items in by.items():
        if helps and m in helps:
            out.append(f"# HELP {m} {helps[m]}")
        out.append(f"# TYPE {m} gauge")
        for lab, v in items:
            ls = ",".join(f'{k}="{_esc(x)}"' for k, x in (lab.items() if isinstance(lab, dict) else lab))
            out.append(f"{m}{{{ls}}} {_fmt(v)}")
    return "\n".join(out) + "\n"


def dcgm_text(sc: Scenario, at, hostname_label: str = "Hostname", exported: bool = False) -> str:
    helps = {m: h for m, _k, h in DCGM_METRICS}
    return render_text(dcgm_rows(sc, to_ts(at), hostname_label, exported), helps)


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
    yield "kube_pod_labels", pl + [("label_" + sanitize(k), v) for k, v in sorted(p.labels.items())], 1.0
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


def ksm_namespace_rows(sc: Scenario):
    for ns, labels in sc.namespaces.items():
        yield (
            "kube_namespace_labels",
            [("namespace", ns)] + [("label_" + sanitize(k), v) for k, v in sorted(labels.items())],
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
            ("kubelet_version", "v1.31.4"),
            ("kubeproxy_version", "v1.31.4"),
            ("os_image", "Amazon Linux 2023"),
            ("pod_cidr", "10.244.0.0/24"),
            ("provider_id", f"sim://{sc.cluster_name}/{n.name}"),
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


def ksm_samples(sc: Scenario, at):
    return [(m, dict(lab), float(v)) for m, lab, v in ksm_rows(sc, to_ts(at))]


# ------------------------------------------------------------------------------------------ what a TSDB stores
KSM_TARGET = [("instance", "10.0.0.5:8080"), ("job", "kube-state-metrics")]


def tsdb_dcgm_series(sc: Scenario, t: float, hostname_label: str = "Hostname", exported: bool = False,
                     metrics=None) -> DcgmSeries:
    """DCGM series as Prometheus stores them after a scrape: target labels added, empty labels dropped."""
    return dcgm_series(sc, t, hostname_label, exported, scrape_labels=True, drop_empty=True, metrics=metrics)


def tsdb_ksm_labels(labels: list) -> list:
    """kube-state-metrics labels as Prometheus stores them after a scrape (target added, empty dropped)."""
    return [(k, x) for k, x in labels if x != ""] + KSM_TARGET


def tsdb_ksm_rows(sc: Scenario, t: float, metrics=None):
    """kube-state-metrics rows as Prometheus stores them after a scrape."""
    want = set(metrics) if metrics else None
    for m, lab, v in ksm_rows(sc, t):
        if want is None or m in want:
            yield m, tsdb_ksm_labels(lab), v


class ChangePoints:
    """The instants at which the series or values of a scenario can change.

    DCGM series change when a node appears, a pod starts or stops holding a GPU, or an XID window opens
    or closes; their values also change at every 5-minute segment. kube-state-metrics series change
    when a pod or node appears, starts, finishes, shows its deletion timestamp or goes, or a node is
    cordoned. Two instants with the same key have the same samples (``dcgm_rows``, ``ksm_rows``):
    exporters and the simulated Prometheus compute a state once per key, not once per sample."""

    def __init__(self, sc: Scenario):
        dcgm = {n.created for n in sc.nodes if n.entities}
        for e in sc.entities:
            for s, end, *_ in e.intervals:
                dcgm.update((s, end))
        for windows in sc.xid_events.values():
            for s, end, _code in windows:
                dcgm.update((s, end))
        ksm = set()
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
) -> dict:
    """Stream DCGM (+KSM) series for [since, until) at ``step`` seconds to an OpenMetrics file.

    Memory-bounded: the lines of one state (``ChangePoints``) are held at a time; each family is streamed
    into its own temporary file and the files are concatenated (families contiguous, samples of
    every series in time order, integer-second timestamps, ``# EOF``)."""
    fams = [f for f in DCGM_FAMILIES if not metrics or f in metrics]
    if include_ksm:
        fams += [f for f in KSM_FAMILIES if not metrics or f in metrics]
    out_path = str(out_path)
    tmpdir = tempfile.mkdtemp(prefix="simexport-", dir=os.path.dirname(os.path.abspath(out_path)) or None)
    files = {f: open(os.path.join(tmpdir, f), "w", buffering=1 << 20) for f in fams}  # noqa: SIM115 (closed below)
    changes = ChangePoints(sc)

    def line(m, lab, v):
        return m + "{" + ",".join(f'{k}="{_esc(x)}"' for k, x in lab) + "} " + _fmt(v) + " "

    series = set()
    samples = 0
    t0 = _time.time()
    try:
        dcgm_key = ksm_key = None
        lines: dict = {f: [] for f in fams}
        ts = int(since)
        n_steps = max(1, (int(until) - int(since) + step - 1) // step)
        i = 0
        while ts < until:
            key = changes.dcgm_key(ts)
            if key != dcgm_key:
                for f in DCGM_FAMILIES:
                    if f in lines:
                        lines[f] = []
                for m, lab, v in dcgm_rows(sc, ts, hostname_label, exported, scrape_labels=True, drop_empty=True,
                                           metrics=fams):
                    lines[m].append(line(m, lab, v))
                dcgm_key = key
                series.update(hash(s[: s.rindex("}")]) for f in DCGM_FAMILIES if f in lines for s in lines[f])
            if include_ksm and changes.ksm_key(ts) != ksm_key:
                for f in KSM_FAMILIES:
                    if f in lines:
                        lines[f] = []
                for m, lab, v in tsdb_ksm_rows(sc, ts, fams):
                    lines[m].append(line(m, lab, v))
                ksm_key = changes.ksm_key(ts)
                series.update(hash(s[: s.rindex("}")]) for f in KSM_FAMILIES if f in lines for s in lines[f])
            suffix = f"{ts}\n"
            for f, ls in lines.items():
                if ls:
                    files[f].write(suffix.join(ls) + suffix)
                    samples += len(ls)
            i += 1
            if progress and (i % max(1, n_steps // 20) == 0 or ts + step >= until):
                progress(i, n_steps, samples, _time.time() - t0)
            ts += step
        for fh in files.values():
            fh.close()
        helps = {m: h for m, _k, h in DCGM_METRICS}
        helps.update(KSM_HELP)
        with open(out_path, "w", buffering=1 << 20) as out:
            for f in fams:
                path = os.path.join(tmpdir, f)
                if os.path.getsize(path) == 0:
                    continue
                out.write(f"# HELP {f} {helps.get(f, f)}\n# TYPE {f} gauge\n")
                with open(path) as src:
                    shutil.copyfileobj(src, out, 1 << 22)
            out.write("# EOF\n")
    finally:
        for fh in files.values():
            if not fh.closed:
                fh.close()
        shutil.rmtree(tmpdir, ignore_errors=True)
    return {"samples": samples, "series": len(series), "bytes": os.path.getsize(out_path), "seconds": _time.time() - t0}


def stderr_progress(i, n, samples, elapsed):
    sys.stderr.write(f"\r  {i}/{n} steps, {samples:,} samples, {elapsed:.1f}s")
    if i >= n:
        sys.stderr.write("\n")
    sys.stderr.flush()
