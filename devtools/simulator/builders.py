"""Building blocks of scenarios: GPU units, Kueue workloads and jobs, and the interpreter of declarative
scenario descriptions (``scenarios/demo.py``).

Imports only the model; the scenario registry (``scenarios``) imports this module.
"""

from __future__ import annotations

import random
import re

from .model import (
    ACT_KINDS,
    SEG,
    ClusterQueue,
    Flavor,
    LocalQueue,
    Scenario,
    Unit,
    Workload,
    _uuid,
    align5,
    owner_uid,
)

H = 3600.0
D = 86400.0


def _hash5(sc: Scenario, *parts) -> str:
    return _uuid(sc.name, sc.seed, *parts).replace("-", "")[:5]


def _rs(sc: Scenario, *parts) -> str:
    return _uuid(sc.name, sc.seed, "rs", *parts).replace("-", "")[:10]


# ------------------------------------------------------------------------------ GPU units
def whole(sc: Scenario, node: str, gpus, ghost_from: int | None = None) -> list:
    return [
        Unit(
            entity=sc.gpu_entity(node, g).idx,
            resource="nvidia.com/gpu",
            share=1.0,
            ghost=ghost_from is not None and i >= ghost_from,
        )
        for i, g in enumerate(gpus)
    ]


def mig(sc: Scenario, node: str, gpu: int, gis) -> list:
    out = []
    for gi in gis:
        e = sc.mig_entity(node, gpu, gi)
        out.append(Unit(entity=e.idx, resource=f"nvidia.com/mig-{e.profile}", share=e.slices / 7.0))
    return out


def ts_unit(sc: Scenario, node: str, gpu: int, replica: int) -> list:
    n = sc.node_by_name[node]
    e = sc.gpu_entity(node, gpu)
    res = n.shared_resource or "nvidia.com/gpu"
    return [Unit(entity=e.idx, resource=res, share=1.0 / n.timesliced, vgpu=str(replica))]


# ------------------------------------------------------------------------------ Kueue
def add_workload(
    sc: Scenario,
    namespace: str,
    name: str,
    lq: str,
    cq: str,
    flavor: str,
    count: int,
    gpus: int,
    created: float,
    admitted: float | None,
    finished: float | None = None,
    reason: str = "Succeeded",
    cpu: str = "16",
    memory: str = "128Gi",
    owner=("Job", ""),
    pending_message: str = "",
    gpu_resource: str = "nvidia.com/gpu",
) -> Workload:
    wl = Workload(
        namespace=namespace,
        name=name,
        uid=_uuid("wl", sc.name, sc.seed, namespace, name),
        queue=lq,
        cluster_queue=cq,
        flavor=flavor,
        count=count,
        per_pod={"cpu": cpu, "memory": memory, gpu_resource: str(gpus)},
        created=created,
        admitted=admitted,
        finished=finished,
        finish_reason=reason,
        owner=owner,
        pending_message=pending_message,
    )
    if finished is not None:
        wl.deleted = finished + 3 * H
    sc.workloads.append(wl)
    return wl


def _job_names(sc: Scenario, base: str, *parts):
    job = f"{base}-{_hash5(sc, 'job', base, *parts)}"
    return job, f"job-{job}-{_hash5(sc, 'wl', base, *parts)}"


def kueue_job(
    sc: Scenario,
    namespace: str,
    base: str,
    lq: str,
    cq: str,
    flavor: str,
    placements: list,
    gpus: int,
    start: float | None,
    finish: float | None = None,
    phase: str | None = None,
    act: str = "batch",
    created: float | None = None,
    labels: dict | None = None,
    pending_pods: bool = False,
    node_selector: dict | None = None,
    pending_message: str = "",
    xid: int = 0,
    cpu: str = "16",
    memory: str = "128Gi",
    container: str = "main",
    acts: list | None = None,
):
    """A Kueue-managed batch/v1 Job with len(placements) pods of ``gpus`` GPUs each.

    ``placements``: one ``(node, units)`` per pod, or ``None`` for a pod that is not bound."""
    job, wname = _job_names(sc, base, start, created)
    created = created if created is not None else start
    wl = add_workload(
        sc,
        namespace,
        wname,
        lq,
        cq,
        flavor,
        len(placements),
        gpus,
        created,
        admitted=created if (start is not None or pending_pods) else None,
        finished=finish,
        reason=phase or "Succeeded",
        cpu=cpu,
        memory=memory,
        owner=("Job", job),
        pending_message=pending_message,
    )
    pods = []
    for i, pl in enumerate(placements):
        suffix = _hash5(sc, "pod", job, i)
        pname = f"{job}-{i}-{suffix}" if len(placements) > 1 else f"{job}-{suffix}"
        lab = {
            "batch.kubernetes.io/job-name": job,
            "job-name": job,
            "batch.kubernetes.io/controller-uid": owner_uid(sc, namespace, job),
            "app.kubernetes.io/name": base,
        }
        if len(placements) > 1:
            lab["batch.kubernetes.io/job-completion-index"] = str(i)
        lab.update(labels or {})
        node, units = pl if pl is not None else (None, [])
        p = sc.add_pod(
            namespace,
            pname,
            node=node,
            start=start if node else None,
            gpus={"nvidia.com/gpu": gpus},
            units=units,
            act=(acts[i] if acts else act),
            finish=finish if node else None,
            end_phase=phase,
            labels=lab,
            owner=("Job", job),
            created=created,
            container=container,
            workload=wl,
            node_selector=node_selector,
            pending_message=pending_message,
            xid=xid,
            cpu=cpu,
            memory=memory,
        )
        if node is None and finish is not None:
            p.deleted = finish + 3 * H
        pods.append(p)
    return wl, pods


# ------------------------------------------------------------------------------ declarative scenarios
class SpecError(ValueError):
    """A declarative scenario description the interpreter does not understand."""


_TIME = re.compile(r"^(T0|T1)((?:[+-]\d+(?:\.\d+)?[dhms])*)$")
_TERM = re.compile(r"([+-])(\d+(?:\.\d+)?)([dhms])")
_UNIT = {"d": D, "h": H, "m": 60.0, "s": 1.0}


def when(sc: Scenario, spec: str | None) -> float | None:
    """``"T0+1d+3h"``, ``"T1-6h"``, ... (T0/T1 = scenario start/end) as a timestamp on the 5-minute grid."""
    if spec is None:
        return None
    m = _TIME.match(spec.replace(" ", ""))
    if not m:
        raise SpecError(f"bad time {spec!r}: expected T0 or T1 followed by +/- terms such as 1d, 3h, 30m")
    offset = sum((1 if sign == "+" else -1) * float(n) * _UNIT[u] for sign, n, u in _TERM.findall(m.group(2)))
    return float(align5((sc.t0 if m.group(1) == "T0" else sc.t1) + offset))


_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def name(sc: Scenario, template: str, i: int | None = None, n: int | None = None, **names: str) -> str:
    """Expand ``{h5:a,b}`` (a 5-character hash of the seed and parts), ``{rs:a}`` (a ReplicaSet hash),
    ``{i}`` / ``{n:03}`` (replica index / stream counter) and ``{pod}``-style references to ``names``.
    A hash part ``i`` or ``n`` stands for that integer."""

    def part(p: str):
        return i if p == "i" else n if p == "n" else p

    def sub(m: re.Match) -> str:
        key, _, arg = m.group(1).partition(":")
        if key == "h5":
            return _hash5(sc, *(part(p) for p in arg.split(",")))
        if key == "rs":
            return _rs(sc, *(part(p) for p in arg.split(",")))
        if key in ("i", "n"):
            value = i if key == "i" else n
            if value is None:
                raise SpecError(f"{{{key}}} outside a replica list or stream in {template!r}")
            return format(value, arg)
        if key in names:
            return names[key]
        raise SpecError(f"unknown placeholder {{{m.group(1)}}} in {template!r}")

    return _PLACEHOLDER.sub(sub, template)


def units(sc: Scenario, node: str, spec: dict | None) -> list:
    """``{"whole": [gpus], "ghost_from": k}``, ``{"mig": [gpu, [gi, ...]]}`` or ``{"ts": [gpu, replica]}``."""
    if not spec:
        return []
    if "whole" in spec:
        return whole(sc, node, spec["whole"], ghost_from=spec.get("ghost_from"))
    if "mig" in spec:
        gpu, gis = spec["mig"]
        return mig(sc, node, gpu, gis)
    if "ts" in spec:
        gpu, replica = spec["ts"]
        return ts_unit(sc, node, gpu, replica)
    raise SpecError(f"bad units {spec!r}")


_POD_TIMES = ("start", "finish", "deleted", "created", "active_until")
_POD_KEYS = {
    "namespace", "name", "node", "gpus", "units", "act", "end_phase", "deleted_running", "labels", "owner",
    "container", "image", "init_gpus", "cpu", "memory", "node_selector", "pending_message", "xid", "annotations",
    "workload", "overrides", *_POD_TIMES,
}
_JOB_KEYS = {
    "namespace", "base", "queue", "cluster_queue", "flavor", "placements", "gpus", "start", "finish", "phase",
    "act", "created", "labels", "pending_pods", "node_selector", "pending_message", "xid", "cpu", "memory",
    "container", "acts",
}
_WORKLOAD_KEYS = {
    "namespace", "name", "queue", "cluster_queue", "flavor", "count", "gpus", "created", "admitted", "finished",
    "reason", "cpu", "memory", "owner", "pending_message",
}


def _check(kind: str, spec: dict, allowed: set) -> None:
    unknown = set(spec) - allowed - {"kind", "replicas", "stream", "on_failure"}
    if unknown:
        raise SpecError(f"{kind}: unknown keys {sorted(unknown)}")


def _owner(sc: Scenario, owner, i, n, **names) -> tuple | None:
    """``[kind, name]``, or ``[kind, name, parent kind, parent name]`` for a ReplicaSet or Job with a controller
    (a Deployment, a CronJob, a JobSet): ``(kind, name)`` or ``(kind, name, parent kind, parent name)``."""
    if owner is None:
        return None
    if len(owner) not in (2, 4):
        raise SpecError(f"bad owner {owner!r}: expected [kind, name] or [kind, name, parent kind, parent name]")
    return tuple(x if k % 2 == 0 else name(sc, x, i, n, **names) for k, x in enumerate(owner))


def _labels(sc: Scenario, labels: dict | None, i, n) -> dict | None:
    if labels is None:
        return None
    return {k: name(sc, v, i, n) for k, v in labels.items()}


def _workload(sc: Scenario, spec: dict, i=None, n=None, **names) -> Workload:
    _check("workload", spec, _WORKLOAD_KEYS)
    return add_workload(
        sc,
        spec["namespace"],
        name(sc, spec["name"], i, n, **names),
        spec["queue"],
        spec["cluster_queue"],
        spec["flavor"],
        spec.get("count", 1),
        spec["gpus"],
        created=when(sc, spec["created"]),
        admitted=when(sc, spec.get("admitted")),
        finished=when(sc, spec.get("finished")),
        reason=spec.get("reason", "Succeeded"),
        cpu=spec.get("cpu", "16"),
        memory=spec.get("memory", "128Gi"),
        owner=_owner(sc, spec.get("owner", ("Job", "")), i, n, **names),
        pending_message=spec.get("pending_message", ""),
    )


def _pod(sc: Scenario, spec: dict, i=None, n=None, times: dict | None = None):
    _check("pod", spec, _POD_KEYS)
    t = {k: when(sc, spec.get(k)) for k in _POD_TIMES}
    t.update(times or {})
    pod_name = name(sc, spec["name"], i, n)
    wl = _workload(sc, spec["workload"], i, n, pod=pod_name) if "workload" in spec else None
    kw = {k: spec[k] for k in ("act", "end_phase", "deleted_running", "container", "image", "cpu", "memory",
                                "pending_message", "xid", "annotations", "init_gpus", "node_selector", "gpus")
          if k in spec}
    if t["active_until"] is not None:
        kw["active_until"] = t["active_until"]
    owner = _owner(sc, spec.get("owner"), i, n, pod=pod_name)
    p = sc.add_pod(
        spec["namespace"],
        pod_name,
        node=spec.get("node"),
        start=t["start"],
        units=units(sc, spec.get("node"), spec.get("units")),
        finish=t["finish"],
        deleted=t["deleted"],
        created=t["created"],
        labels=_labels(sc, spec.get("labels"), i, n),
        owner=owner[:2] if owner else None,
        owner_parent=owner[2:] if owner and len(owner) == 4 else None,
        workload=wl,
        **kw,
    )
    for o in spec.get("overrides", ()):  # {"unit": k, "from": T, "until": T, "act": kind}
        if set(o) != {"unit", "from", "until", "act"} or o["act"] not in ACT_KINDS:
            raise SpecError(f"bad override {o!r}")
        key = (p.idx, p.units[o["unit"]].entity)
        sc.overrides.setdefault(key, []).append((when(sc, o["from"]), when(sc, o["until"]), o["act"]))
    return p


_CLOCK_BITS = {"hw_slowdown": 0x8, "sw_thermal": 0x20, "hw_thermal": 0x40, "hw_power_brake": 0x80}
_COUNTERS = ("ecc_dbe", "remap_correctable", "remap_uncorrectable")


def _health(sc: Scenario, spec: dict) -> None:
    """One health event of a physical GPU (``node``, ``gpu``) from ``from`` until ``until``: ``xid`` (the code
    the GPU reports meanwhile), ``clock_events`` (reason names set meanwhile), ``vanish`` (no series at all),
    ``rogue`` (busy with no pod holding it); or at ``from``: ``counter`` + ``increment``, ``remap_failure``."""
    kinds = {"xid", "clock_events", "vanish", "rogue", "counter", "remap_failure"} & set(spec)
    allowed = {"node", "gpu", "from", "until", "increment", *kinds}
    if len(kinds) != 1 or set(spec) - allowed:
        raise SpecError(f"bad health event {spec!r}")
    ent = sc.gpu_entity(spec["node"], spec["gpu"])
    start = when(sc, spec["from"])
    until = when(sc, spec.get("until"))
    health = sc.health_of(ent.idx)
    kind = kinds.pop()
    if kind in ("xid", "clock_events", "vanish", "rogue") and until is None:
        raise SpecError(f"health event {kind} needs until: {spec!r}")
    if kind == "xid":
        sc.xid_events.setdefault(ent.idx, []).append((start, until, int(spec["xid"])))
    elif kind == "clock_events":
        bits = 0
        for reason in spec["clock_events"]:
            if reason not in _CLOCK_BITS:
                raise SpecError(f"unknown clock event reason {reason!r} ({', '.join(_CLOCK_BITS)})")
            bits |= _CLOCK_BITS[reason]
        health.throttle.append((start, until, bits))
    elif kind == "vanish":
        health.gaps.append((start, until))
    elif kind == "rogue":
        health.rogue.append((start, until))
    elif kind == "counter":
        if spec["counter"] not in _COUNTERS:
            raise SpecError(f"unknown counter {spec['counter']!r} ({', '.join(_COUNTERS)})")
        health.counters.append((start, spec["counter"], int(spec.get("increment", 1))))
    else:
        health.remap_failure_from = start if health.remap_failure_from is None else min(
            health.remap_failure_from, start)


def _job(sc: Scenario, spec: dict, n=None, times: dict | None = None, **extra):
    _check("job", spec, _JOB_KEYS)
    t = {k: when(sc, spec.get(k)) for k in ("start", "finish", "created")}
    t.update(times or {})
    placements = [
        None if pl is None else (pl["node"], units(sc, pl["node"], pl.get("units"))) for pl in spec["placements"]
    ]
    kw = {k: spec[k] for k in ("act", "labels", "pending_pods", "node_selector", "pending_message", "xid", "cpu",
                                "memory", "container", "acts", "phase") if k in spec}
    kw.update(extra)
    return kueue_job(
        sc, spec["namespace"], name(sc, spec["base"], None, n), spec["queue"], spec["cluster_queue"],
        spec["flavor"], placements, spec["gpus"], start=t["start"], finish=t["finish"], created=t["created"], **kw,
    )


def _stream(sc: Scenario, spec: dict, rng: random.Random) -> None:
    """Back-to-back runs of one template: durations and gaps drawn from ``rng`` (hours), each run a job or a
    pod; ``fail_probability`` draws a failure per run (``on_failure`` overrides), ``must_end_by`` stops before
    a run that would end after it, ``starts_before`` stops once a run would start at or after it."""
    s = spec["stream"]
    t = align5(when(sc, s["from"]))  # an int, like every time the stream derives (job names hash its repr)
    must_end_by = when(sc, s.get("must_end_by"))
    starts_before = when(sc, s.get("starts_before"))
    n = 0
    while starts_before is None or t < starts_before:
        dur = align5(rng.uniform(*s["hours"]) * H) or SEG
        if must_end_by is not None and t + dur > must_end_by:
            break
        failed = s.get("fail_probability") is not None and rng.random() < s["fail_probability"]
        extra = dict(spec.get("on_failure", {})) if failed else {}
        if spec["kind"] == "job":
            extra.setdefault("phase", "Succeeded")
            _job(sc, spec, n, times={"start": t, "finish": t + dur}, **extra)
        else:
            _pod(sc, {**spec, **extra}, None, n, times={"start": t, "finish": t + dur})
        n += 1
        t = align5(t + dur + align5(rng.uniform(*s["gap_hours"]) * H))


def build_from_spec(sc: Scenario, spec: dict) -> None:
    """Interpret a declarative scenario (see ``scenarios/demo.py``) into ``sc``, in the order given.

    Order matters: pod and workload positions feed the activity model and the streams share one random
    generator, seeded from the scenario seed."""
    rng = random.Random(sc.seed * spec.get("rng_multiplier", 7919) + spec.get("rng_offset", 1))
    for ns, labels in spec["namespaces"].items():
        sc.add_namespace(ns, labels)
    for node in spec["nodes"]:
        options = {k: v for k, v in node.items() if k not in ("name", "count", "model", "gpus", "labels")}
        options["unschedulable_from"] = when(sc, options.get("unschedulable_from"))
        count = node.get("count")
        for i in range(count or 1):
            node_name = name(sc, node["name"], i) if count else node["name"]
            sc.add_node(node_name, node["model"], node["gpus"], dict(node.get("labels", {})), **options)
    queues = spec.get("queues", {})
    sc.flavors = [Flavor(f["name"], dict(f["node_labels"])) for f in queues.get("flavors", [])]
    sc.cluster_queues = [
        ClusterQueue(
            cq["name"],
            cq.get("cohort"),
            [(flavor, {r: tuple(q) for r, q in resources.items()}) for flavor, resources in cq["flavors"]],
            dict(cq.get("namespace_selector", {})),
        )
        for cq in queues.get("cluster_queues", [])
    ]
    sc.local_queues = [
        LocalQueue(q["namespace"], q["name"], q["cluster_queue"]) for q in queues.get("local_queues", [])
    ]
    for node, gpu in spec.get("labels_lost", []):
        sc.gpu_entity(node, gpu).labels_lost = True
    for event in spec.get("health", []):
        _health(sc, event)
    for entry in spec["workloads"]:
        kind = entry["kind"]
        if "stream" in entry:
            _stream(sc, entry, rng)
        elif kind == "job":
            _job(sc, entry)
        elif kind == "workload":
            _workload(sc, entry)
        elif kind == "pod" and "replicas" in entry:
            for i, each in enumerate(entry["replicas"]):
                _pod(sc, {**{k: v for k, v in entry.items() if k != "replicas"}, **each}, i)
        elif kind == "pod":
            _pod(sc, entry)
        else:
            raise SpecError(f"unknown entry kind {kind!r}")
