"""dcgm-exporter and kube-state-metrics series of a scenario; text exposition and OpenMetrics history."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time as _time

from .scenario import DRIVER, MODELS, SEG, Scenario, _uuid, parse_quantity, sanitize

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
ALL_FAMILIES = DCGM_FAMILIES + KSM_FAMILIES


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
            ents = [ent] + [sc.entities[c] for c in ent.children]
            for e in ents:
                holders = sc.entity_state(e, t) if not e.mig_parent else []
                vals = sc.entity_values(e, t, holders)
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
                for metric, key, _h in DCGM_METRICS:
                    if want is not None and metric not in want:
                        continue
                    v = vals.get(key)
                    if v is None:
                        continue
                    if e.mig_parent and key == "util":
                        continue
                    for a in attrs:
                        yield metric, base + a + target, v


def dcgm_samples(sc: Scenario, t: float, *, hostname_label: str = "Hostname", exported_labels: bool = False):
    return [(m, dict(lab), float(v)) for m, lab, v in dcgm_rows(sc, t, hostname_label, exported_labels)]


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


def dcgm_text(sc: Scenario, t: float, hostname_label: str = "Hostname", exported: bool = False) -> str:
    helps = {m: h for m, _k, h in DCGM_METRICS}
    return render_text(dcgm_rows(sc, t, hostname_label, exported), helps)


# ------------------------------------------------------------------------------------------ KSM
def _unit(res: str) -> str:
    return {"cpu": "core", "memory": "byte"}.get(
        res, "byte" if res.startswith(("ephemeral", "hugepages")) else "integer"
    )


def ksm_rows(sc: Scenario, t: float):
    """Yield (metric, [(label, value)], value) as kube-state-metrics exposes them at t."""
    for p in sc.pods:
        if not (p.created <= t < p.deleted):
            continue
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
    for ns, labels in sc.namespaces.items():
        yield (
            "kube_namespace_labels",
            [("namespace", ns)] + [("label_" + sanitize(k), v) for k, v in sorted(labels.items())],
            1.0,
        )
    for n in sc.nodes:
        if n.created > t:
            continue
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


def ksm_samples(sc: Scenario, t: float):
    return [(m, dict(lab), float(v)) for m, lab, v in ksm_rows(sc, t)]


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

    Memory-bounded: one 5-minute segment of series is held at a time; each family is streamed
    into its own temporary file and the files are concatenated (families contiguous, samples of
    every series in time order, integer-second timestamps, ``# EOF``)."""
    fams = [f for f in DCGM_FAMILIES if not metrics or f in metrics]
    if include_ksm:
        fams += [f for f in KSM_FAMILIES if not metrics or f in metrics]
    out_path = str(out_path)
    tmpdir = tempfile.mkdtemp(prefix="simexport-", dir=os.path.dirname(os.path.abspath(out_path)) or None)
    files = {f: open(os.path.join(tmpdir, f), "w", buffering=1 << 20) for f in fams}  # noqa: SIM115 (closed below)
    ksm_job = [("instance", "10.0.0.5:8080"), ("job", "kube-state-metrics")]
    series = set()
    samples = 0
    t0 = _time.time()
    try:
        cache_seg = None
        lines: dict = {}
        ts = int(since)
        n_steps = max(1, (int(until) - int(since) + step - 1) // step)
        i = 0
        while ts < until:
            seg = ts // SEG
            if seg != cache_seg:
                lines = {f: [] for f in fams}
                for m, lab, v in dcgm_rows(
                    sc, ts, hostname_label, exported, scrape_labels=True, drop_empty=True, metrics=fams
                ):
                    lines[m].append(m + "{" + ",".join(f'{k}="{_esc(x)}"' for k, x in lab) + "} " + _fmt(v) + " ")
                if include_ksm:
                    for m, lab, v in ksm_rows(sc, ts):
                        if m not in lines:
                            continue
                        lab = [(k, x) for k, x in lab if x != ""] + ksm_job
                        lines[m].append(m + "{" + ",".join(f'{k}="{_esc(x)}"' for k, x in lab) + "} " + _fmt(v) + " ")
                for ls in lines.values():
                    for s in ls:
                        series.add(hash(s[: s.rindex("}")]))
                cache_seg = seg
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
