"""Writes of the findings app: each hour's contribution, replaced whole, and the runs (findings) kept in step.

Called by the collection (apps/ingest/services.py) after every written bucket (`record_bucket`) and after every
recorded Kubernetes snapshot (`record_snapshot`); `rebuild_from_ledger` recomputes what the stored ledger rows
and snapshots alone determine (idle allocations, zero-allocatable nodes, borrowed-while-idle, missing signals)
for hours collected before findings existed.

Determinism (docs/findings.md, "Computed at collection"): an hour's `FindingHour` rows are a function of the
bucket's data; a run's figures are the exact decimal sums of its hours, kept by adding the difference of the
one hour that changed (reading the run's hours only when an hour inside it stops being flagged), and a run is
ongoing (`end` null) while its last hour is the cluster's latest collected hour. Re-collecting an hour with the
same data writes nothing; with other data, the tables end as if the hours had been collected in order.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum

from apps.capacity.models import NodeGroupSnapshot
from apps.common.timeutils import HOUR, floor_hour
from apps.inventory.models import Cluster
from apps.queues.models import LocalQueueSnapshot, QueueCollection
from apps.queues.selectors import queue_usage
from apps.usage import money
from apps.usage.activity import DEFAULT_METRICS, default_signal
from apps.usage.inputs import AssembledBucket
from apps.usage.ledger import BucketInputs, BucketResult
from apps.usage.models import Bucket, NodeHour, PodHour
from apps.usage.services import lock_cluster
from apps.usage.sources import MetricsSource

from . import accelerator_rules, rules
from .constants import IDLE_KINDS, Kind
from .models import Finding, FindingHour, Notification
from .rules import HourFinding, Params, PodFigures
from .selectors import latest_hour

log = logging.getLogger(__name__)

# Kinds each writer replaces for an hour.
BUCKET_KINDS = (Kind.IDLE_ALLOCATION, Kind.IDLE_HELD, Kind.UNHEALTHY_GPU, Kind.STRAGGLER,
                Kind.UNATTRIBUTED_ACTIVITY, Kind.MISSING_SIGNAL, Kind.TEAM_LABEL_REJECTED, Kind.IDLE_CLAIM,
                Kind.OVERSUBSCRIBED_GPU, Kind.MISSING_ATTRIBUTION)
SNAPSHOT_KINDS = (Kind.ZERO_ALLOCATABLE_NODE, Kind.BORROWED_IDLE)
FIGURES = ("gpu_hours", "cost", "unpriced_gpu_hours", "allocated_gpu_hours", "allocated_cost")
IDENTITY = ("team", "namespace", "workload", "pod", "node", "gpu_uuid")


def params() -> Params:
    return Params(
        signal=default_signal(),
        idle_threshold=settings.GPUFINOPS_IDLE_THRESHOLD,
        fb_used_min_mib=settings.GPUFINOPS_FB_USED_MIN_MIB,
        straggler_fraction=settings.GPUFINOPS_STRAGGLER_FRACTION,
        unattributed_threshold=settings.GPUFINOPS_UNATTRIBUTED_THRESHOLD,
        xid_codes=frozenset(settings.GPUFINOPS_XID_CODES),
        throttle_mask=settings.GPUFINOPS_THROTTLE_REASONS_MASK,
        throttle_min_share=settings.GPUFINOPS_THROTTLE_MIN_SHARE,
    )


def metric_name(cluster: Cluster, signal: str) -> str:
    return (cluster.metric_names or {}).get(signal) or DEFAULT_METRICS[signal]


# ---- After a written bucket ----


def bucket_findings(cluster: Cluster, hour: datetime, assembled: AssembledBucket, result: BucketResult,
                    source: MetricsSource, p: Params | None = None) -> list[HourFinding]:
    """Every bucket kind's findings of one hour, from the bucket's own inputs and rows plus the source's
    aggregated health, memory and holder-less answers."""
    p = p or params()
    inputs = assembled.inputs
    end = hour + timedelta(seconds=inputs.seconds)
    # A claim allocated with no consumer has ledger rows of its own: an idle claim, not a pod's idle allocation.
    claims = {r.fact.uid for r in result.pods if accelerator_rules.is_claim_row(r)}
    pods = [pod for pod in rules.pods_from_result(result, p.signal) if pod.uid not in claims]
    nodes = {n.name: n for n in inputs.nodes}
    series = inputs.series
    out: list[HourFinding] = []

    idle_names = {pod.pod for pod in pods if pod.activity is not None and pod.activity < p.idle_threshold}
    memory: dict[tuple[str, str], float] = {}
    if idle_names:
        for m in source.pod_memory(hour, end, idle_names):
            key = (m.namespace, m.pod)
            memory[key] = max(memory.get(key, 0.0), m.fb_used_mib)
    out += rules.idle(pods, memory, p, rules.first_devices(series))
    out += rules.stragglers(pods, series, nodes, p)

    health = source.device_health(hour, end)
    vanished = source.vanished_devices(hour, end)
    before = gone_before(cluster, hour)
    if before:
        reporting = source.devices_reporting(hour, end, {g.uuid for g in before})
        before = [g for g in before if g.uuid not in reporting]
    unheld = source.unheld_activity(hour, end, above=p.unattributed_threshold)
    # Hostnames that are no node's: exporters without NODE_NAME name their own pod; Kubernetes says where it runs.
    hosts = {h.node for h in health} | {v.node for v in vanished} | {d.node for d in unheld}
    strangers = hosts - set(nodes)
    exporters = source.pod_nodes(hour, end, strangers) if strangers else {}
    out += rules.unhealthy(health, vanished, before, pods, series, nodes, inputs.seconds, p, exporters)
    out += rules.unattributed(unheld, pods, series, nodes, inputs.seconds, p, exporters)
    out += rules.missing_signal(pods, result.series, result.signals, p.signal, metric_name(cluster, p.signal))
    out += rules.team_label_rejected(
        ((pod.uid, choice.rejected, choice.reason) for pod, choice in assembled.rejected_teams), pods)
    out += accelerator_findings(hour, end, inputs, result, source, p)
    return out


def accelerator_findings(hour: datetime, end: datetime, inputs: BucketInputs, result: BucketResult,
                         source: MetricsSource, p: Params) -> list[HourFinding]:
    """Idle claims, oversubscribed HAMi GPUs and DRA nodes without attribution, from the bucket's ledger rows
    (`accelerator_rules`); the devices that report series are asked of the source only when a DRA node had no
    attributed series."""
    out = accelerator_rules.idle_claims(accelerator_rules.claim_holds(inputs, result))
    out += accelerator_rules.oversubscribed(accelerator_rules.oversubscriptions(inputs, result))
    units = accelerator_rules.claim_units(result, p.signal)
    if any(u.unmeasured > 0 for u in units):
        reporting = source.devices_reporting(hour, end, {uuid for u in units for uuid in (u.gpu_uuid, u.device_uuid)
                                                         if uuid})
        drivers = settings.GPUFINOPS_DRA_GPU_DRIVERS
        out += accelerator_rules.missing_attribution(units, reporting, {n.name: n for n in inputs.nodes},
                                                     drivers[0] if drivers else "")
    return out


def gone_before(cluster: Cluster, hour: datetime) -> list[rules.StillGone]:
    """GPUs found vanished in the hour before, with their holder then."""
    rows = FindingHour.objects.filter(cluster=cluster, hour=hour - HOUR, kind=Kind.UNHEALTHY_GPU,
                                      subject__endswith="/vanished")
    return [rules.StillGone(node, uuid, (namespace, pod))
            for node, uuid, namespace, pod in rows.values_list("node", "gpu_uuid", "namespace", "pod")]


def record_bucket(cluster: Cluster, hour: datetime, *, assembled: AssembledBucket, result: BucketResult,
                  source: MetricsSource) -> int:
    """The hour's findings after its bucket was written: bucket kinds from its data, then the snapshot kinds.
    Returns how many subjects were flagged."""
    found = bucket_findings(cluster, hour, assembled, result, source)
    replace_hour(cluster, hour, BUCKET_KINDS, found)
    return len(found) + refresh_snapshot_kinds(cluster, hour)


# ---- After a recorded snapshot, and the kinds it determines ----


def record_snapshot(cluster: Cluster, taken_at: datetime) -> int:
    """Zero-allocatable nodes and borrowed-while-idle queues of the snapshot's hour, once its bucket exists."""
    hour = floor_hour(taken_at)
    if not Bucket.objects.filter(cluster=cluster, hour=hour, collected_at__isnull=False).exists():
        return 0  # the bucket's write will do it
    return refresh_snapshot_kinds(cluster, hour)


def refresh_snapshot_kinds(cluster: Cluster, hour: datetime) -> int:
    found = zero_allocatable_findings(cluster, hour) + borrowed_idle_findings(cluster, hour)
    replace_hour(cluster, hour, SNAPSHOT_KINDS, found)
    return len(found)


def zero_allocatable_findings(cluster: Cluster, hour: datetime) -> list[HourFinding]:
    snapshots = NodeGroupSnapshot.objects.filter(cluster=cluster, taken_at__gte=hour, taken_at__lt=hour + HOUR)
    taken: set[datetime] = set()
    shown: dict[str, set[datetime]] = defaultdict(set)
    for taken_at, names in snapshots.values_list("taken_at", "zero_allocatable_nodes"):
        taken.add(taken_at)
        for name in names or []:
            shown[name].add(taken_at)
    if not shown:
        return []
    rows = NodeHour.objects.filter(cluster=cluster, hour=hour, node__in=sorted(shown)).values_list(
        "node", "node_group", "gpu_model", "physical_gpus", "unavailable_gpu_hours", "price")
    nodes = [rules.NodeHourFigures(*r) for r in rows]
    return rules.zero_allocatable({n: (len(t), len(taken)) for n, t in shown.items()}, nodes)


def borrowed_idle_findings(cluster: Cluster, hour: datetime) -> list[HourFinding]:
    """Per ClusterQueue and hour: GPUs it borrowed from its cohort while at least that much of its pods' GPU time
    sat idle (`apps.queues.selectors.queue_usage`), from GPUFINOPS_BORROWED_IDLE_MIN_GPU_HOURS. Cost: that share
    of the idle cost of the queue's pods in the hour. Team: the team of the queue's LocalQueues when they are
    one team's, else the team with the most idle GPU-hours in the queue."""
    minimum = settings.GPUFINOPS_BORROWED_IDLE_MIN_GPU_HOURS
    signal = default_signal()
    rows = [r for r in queue_usage(start=hour, end=hour + HOUR, signal=signal, visible_teams=None,
                                   cluster=cluster.name) if r.borrowed_idle_gpu_hours >= minimum]
    if not rows:
        return []
    latest = QueueCollection.objects.filter(cluster=cluster, taken_at__lt=hour + HOUR).order_by("-taken_at").first()
    lq_to_cq: dict[tuple[str, str], str] = {}
    cq_teams: dict[str, set[str]] = defaultdict(set)
    if latest is not None:
        for lq in LocalQueueSnapshot.objects.filter(collection=latest):
            lq_to_cq[(lq.namespace, lq.name)] = lq.cluster_queue
            cq_teams[lq.cluster_queue].add(lq.team)
    idle: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(lambda: [0.0, money.ZERO]))
    grouped = PodHour.objects.filter(cluster=cluster, hour=hour).values(
        "team", "namespace", "cluster_queue", "local_queue").annotate(
        idle=Sum(f"idle_{signal}"), idle_cost=Sum(f"idle_cost_{signal}"))
    for g in grouped:
        name = g["cluster_queue"] or lq_to_cq.get((g["namespace"], g["local_queue"]), "")
        entry = idle[name][g["team"]]
        entry[0] += g["idle"] or 0.0
        entry[1] += money.to_decimal(g["idle_cost"])
    out = []
    for r in rows:
        per_team = idle.get(r.cluster_queue, {})
        idle_hours = sum(v[0] for v in per_team.values())
        idle_cost = sum((v[1] for v in per_team.values()), money.ZERO)
        cost = money.ZERO
        if idle_hours > 0:
            cost = (idle_cost * rules.gh(r.borrowed_idle_gpu_hours) / rules.gh(idle_hours)).quantize(money.MICRO)
        teams = cq_teams.get(r.cluster_queue, set())
        team = next(iter(teams)) if len(teams) == 1 else (
            max(sorted(per_team), key=lambda t: per_team[t][0]) if per_team else "")
        out.append(HourFinding(
            kind=Kind.BORROWED_IDLE, subject=r.cluster_queue, team=team, gpu_hours=rules.gh(r.borrowed_idle_gpu_hours),
            cost=cost, allocated_gpu_hours=rules.gh(r.allocated_gpu_hours),
            detail=rules.plain({"cluster_queue": r.cluster_queue, "cohort": r.cohort,
                                "borrowed_gpu_hours": round(r.borrowed_gpu_hours, 6),
                                "idle_gpu_hours": round(r.idle_gpu_hours, 6), "nominal_gpus": r.nominal_gpus}),
        ))
    return out


# ---- From the stored ledger alone ----


def pods_from_ledger(cluster: Cluster, hour: datetime, signal: str) -> list[PodFigures]:
    rows = PodHour.objects.filter(cluster=cluster, hour=hour).exclude(  # a claim's own rows: idle claims
        pod="", workload__startswith="ResourceClaim/").order_by("pod_uid").values_list(
        "pod_uid", "namespace", "pod", "workload", "team", "node", "node_group", "gpu_model", "gpus", "held_seconds",
        "allocated_gpu_hours", f"working_{signal}", f"idle_{signal}", f"unmeasured_{signal}", "price")
    return [PodFigures(*r) for r in rows]


def rebuild_from_ledger(cluster: Cluster, hours: Iterable[datetime]) -> int:
    """Recompute, oldest first, the kinds the stored ledger rows and snapshots determine: idle allocations (an
    hour's pods already found idle-held stay so: the framebuffer is not in the ledger), missing signals (from
    the bucket's record), zero-allocatable nodes and borrowed-while-idle. Returns the subjects flagged."""
    p = params()
    flagged = 0
    for hour in sorted(set(hours)):
        written = Bucket.objects.filter(cluster=cluster, hour=hour).first()
        if written is not None and written.collected_at is None and written.status != Bucket.Status.OK:
            written = None  # never collected: no record of what it was measured with
        pods = pods_from_ledger(cluster, hour, p.signal)
        if not pods and written is None:
            continue
        held = FindingHour.objects.filter(cluster=cluster, hour=hour, kind=Kind.IDLE_HELD)
        memory = {}
        for ns, pod, detail in held.values_list("namespace", "pod", "detail"):
            memory[(ns, pod)] = float((detail or {}).get("fb_used_mib", p.fb_used_min_mib + 1))
        kinds: tuple[str, ...] = IDLE_KINDS
        found = rules.idle(pods, memory, p)
        if written is not None:  # what the bucket was measured with is in its record
            kinds += (Kind.MISSING_SIGNAL,)
            found += rules.missing_signal(pods, written.series, written.signals or [], p.signal,
                                          metric_name(cluster, p.signal))
        replace_hour(cluster, hour, kinds, found)
        flagged += len(found) + refresh_snapshot_kinds(cluster, hour)
    return flagged


# ---- One hour's contribution, and the runs ----


def _merge_duplicates(found: Iterable[HourFinding]) -> dict[tuple[str, str], HourFinding]:
    """One row per (kind, subject): the rules never flag a subject twice in an hour; if one did, its figures
    add up."""
    out: dict[tuple[str, str], HourFinding] = {}
    for f in found:
        key = (str(f.kind), f.subject)
        prev = out.get(key)
        if prev is None:
            out[key] = replace(f, kind=str(f.kind))
            continue
        tags = sorted(set(prev.detail.get("tags", [])) | set(f.detail.get("tags", [])))
        sums = _add_sums(prev.detail.get("sums", {}), f.detail.get("sums", {}), 1)
        out[key] = replace(prev, **{name: getattr(prev, name) + getattr(f, name) for name in FIGURES},
                           detail={**prev.detail, **f.detail, "tags": tags, "sums": sums})
    return out


def _same(row: FindingHour, f: HourFinding) -> bool:
    return (all(getattr(row, n) == getattr(f, n) for n in (*FIGURES, *IDENTITY))
            and (row.detail or {}) == f.detail)


def replace_hour(cluster: Cluster, hour: datetime, kinds: Sequence[str], found: Iterable[HourFinding]) -> None:
    """Replace the hour's rows of `kinds` with `found` and bring the runs in step, under the cluster's lock."""
    new = _merge_duplicates(found)
    with transaction.atomic():
        lock_cluster(cluster)
        old = {(r.kind, r.subject): r for r in FindingHour.objects.filter(cluster=cluster, hour=hour, kind__in=kinds)}
        changed = sorted(k for k in old.keys() | new.keys()
                         if k not in old or k not in new or not _same(old[k], new[k]))
        if changed:
            FindingHour.objects.filter(pk__in=[old[k].pk for k in changed if k in old]).delete()
            FindingHour.objects.bulk_create(
                [FindingHour(cluster=cluster, hour=hour, **_fields(new[k])) for k in changed if k in new],
                batch_size=500)
            _update_runs(cluster, hour, {k: (old.get(k), new.get(k)) for k in changed})
        set_ends(cluster)


def _fields(f: HourFinding) -> dict:
    return {"kind": f.kind, "subject": f.subject, **{n: getattr(f, n) for n in (*IDENTITY, *FIGURES)},
            "detail": f.detail}


def set_ends(cluster: Cluster) -> None:
    """end = last hour + 1 h for runs a later collected hour did not continue; null for those at the latest."""
    latest = latest_hour(cluster)
    if latest is None:
        return
    runs = Finding.objects.filter(cluster=cluster)
    runs.filter(end__isnull=True, last_hour__lt=latest).update(end=F("last_hour") + HOUR)
    runs.filter(end__isnull=False, last_hour__gte=latest).update(end=None)


# A run's figures and its detail's `sums` (exact decimals, as strings) and `tags` (hours per tag) add up over its
# hours; the rest of its detail is its last hour's. Who it is about: its first hour's subject for stragglers (the
# slowest GPU when it began), the holder with the most GPU-hours for unhealthy GPUs, else its last hour's.
FIRST_IDENTITY = frozenset({Kind.STRAGGLER})
HOLDER = "holder:"
# Kinds about a GPU that name the holder (or tenant) with the most GPU-hours over the run.
HOLDER_KINDS = frozenset({Kind.UNHEALTHY_GPU, Kind.OVERSUBSCRIBED_GPU})


def _tags(detail: Mapping | None) -> list[str]:
    return list((detail or {}).get("tags", []))


def _add_sums(a: Mapping[str, str], b: Mapping[str, str], sign: int) -> dict[str, str]:
    out = {k: Decimal(v) for k, v in a.items()}
    for k, v in b.items():
        out[k] = out.get(k, Decimal(0)) + sign * Decimal(v)
    return {k: str(v) for k, v in sorted(out.items()) if v != 0}


def _add_tags(a: Mapping[str, int], tags: Iterable[str], sign: int) -> dict[str, int]:
    out = dict(a)
    for tag in tags:
        out[tag] = out.get(tag, 0) + sign
    return {k: v for k, v in sorted(out.items()) if v > 0}


def _add(run: Finding, f: FindingHour | HourFinding, sign: int) -> None:
    for name in FIGURES:
        setattr(run, name, getattr(run, name) + sign * Decimal(getattr(f, name)))
    detail = dict(run.detail or {})
    detail["tags"] = _add_tags(detail.get("tags", {}), _tags(f.detail), sign)
    detail["sums"] = _add_sums(detail.get("sums", {}), (f.detail or {}).get("sums", {}), sign)
    run.detail = detail
    _holder_identity(run)


def _take_last(run: Finding, f: FindingHour | HourFinding) -> None:
    """The run's detail is its last hour's (its tags and sums stay the run's); so is who it is about, unless the
    kind names it by its first hour."""
    keep = {k: run.detail.get(k, {}) for k in ("tags", "sums")} if run.detail else {"tags": {}, "sums": {}}
    run.detail = {**{k: v for k, v in (f.detail or {}).items() if k not in ("tags", "sums")}, **keep}
    if run.kind not in FIRST_IDENTITY:
        for name in IDENTITY:
            setattr(run, name, getattr(f, name))
    _holder_identity(run)


def _take_first(run: Finding, f: FindingHour | HourFinding) -> None:
    if run.kind in FIRST_IDENTITY:
        for name in IDENTITY:
            setattr(run, name, getattr(f, name))


def _holder_identity(run: Finding) -> None:
    """Unhealthy and oversubscribed GPUs: the holder with the most GPU-hours over the run (ties: by team,
    namespace, pod)."""
    if run.kind not in HOLDER_KINDS:
        return
    holders = [(Decimal(v), k[len(HOLDER):].split("|", 3)) for k, v in (run.detail or {}).get("sums", {}).items()
               if k.startswith(HOLDER)]
    if not holders:
        run.team = run.namespace = run.workload = run.pod = ""
        return
    if run.kind == Kind.OVERSUBSCRIBED_GPU:  # tenants scaled alike often tie: the first by name, as each hour's
        _hours, (team, namespace, workload, pod) = min(holders, key=lambda h: (-h[0], *h[1]))
    else:
        _hours, (team, namespace, workload, pod) = max(holders, key=lambda h: (h[0], h[1][0], h[1][1], h[1][3]))
    run.team, run.namespace, run.workload, run.pod = team, namespace, workload, pod


def _update_runs(cluster: Cluster, hour: datetime,
                 changes: Mapping[tuple[str, str], tuple[FindingHour | None, HourFinding | None]]) -> None:
    kinds = sorted({k for k, _s in changes})
    near = Finding.objects.filter(cluster=cluster, kind__in=kinds, start__lte=hour + HOUR, last_hour__gte=hour - HOUR)
    runs: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for run in near:
        if (run.kind, run.subject) in changes:
            runs[(run.kind, run.subject)].append(run)
    creates: list[Finding] = []
    for key, (old, new) in changes.items():
        mine = runs.get(key, [])
        inside = next((r for r in mine if r.start <= hour <= r.last_hour), None)
        before = next((r for r in mine if r.last_hour == hour - HOUR), None)
        after = next((r for r in mine if r.start == hour + HOUR), None)
        if old is not None and new is not None and inside is not None:
            _add(inside, old, -1)
            _add(inside, new, +1)
            if hour == inside.last_hour:
                _take_last(inside, new)
            if hour == inside.start:
                _take_first(inside, new)
            inside.save()
        elif old is None and new is not None and inside is None:
            if before is not None and after is not None:
                _add(before, new, +1)
                _absorb(before, after)
            elif before is not None:
                _add(before, new, +1)
                before.last_hour, before.hours = hour, before.hours + 1
                _take_last(before, new)
                before.save()
            elif after is not None:
                _add(after, new, +1)
                after.start, after.hours = hour, after.hours + 1
                _take_first(after, new)
                after.save()
            else:
                run = Finding(cluster=cluster, start=hour, last_hour=hour, hours=1, kind=new.kind, subject=new.subject,
                              **{n: getattr(new, n) for n in FIGURES}, detail={})
                run.detail = {"tags": _add_tags({}, _tags(new.detail), 1),
                              "sums": _add_sums({}, new.detail.get("sums", {}), 1)}
                for name in IDENTITY:
                    setattr(run, name, getattr(new, name))
                _take_last(run, new)
                creates.append(run)
        else:  # the hour left a run (or the tables disagreed): rebuild the runs around it from the hours
            _rebuild_around(cluster, key, hour, mine)
    Finding.objects.bulk_create(creates, batch_size=500)


def _absorb(left: Finding, right: Finding) -> None:
    """`left` (which the new hour joined) takes `right` in; right's notifications move over (none repeats)."""
    for name in FIGURES:
        setattr(left, name, getattr(left, name) + getattr(right, name))
    tags = dict(left.detail.get("tags", {}))
    for tag, n in (right.detail or {}).get("tags", {}).items():
        tags[tag] = tags.get(tag, 0) + n
    sums = _add_sums(left.detail.get("sums", {}), (right.detail or {}).get("sums", {}), 1)
    left.last_hour, left.end = right.last_hour, right.end
    left.hours = int((left.last_hour - left.start) / HOUR) + 1
    if left.kind not in FIRST_IDENTITY:
        for name in IDENTITY:
            setattr(left, name, getattr(right, name))
    left.detail = {**{k: v for k, v in (right.detail or {}).items() if k not in ("tags", "sums")},
                   "tags": dict(sorted(tags.items())), "sums": sums}
    _holder_identity(left)
    told = set(Notification.objects.filter(finding=left).values_list("channel", "recipient"))
    for n in Notification.objects.filter(finding=right):
        if (n.channel, n.recipient) not in told:
            Notification.objects.filter(pk=n.pk).update(finding=left)
    right.delete()
    left.save()


def runs_from_rows(rows: Sequence[FindingHour]) -> list[dict]:
    """Runs of consecutive hours of one subject, from its hour rows (sorted by hour): each a dict of Finding
    fields. The reference the incremental upkeep must always agree with."""
    out: list[dict] = []
    for row in rows:
        if out and out[-1]["last_hour"] == row.hour - HOUR:
            run = out[-1]
            run["last_hour"], run["hours"] = row.hour, run["hours"] + 1
            for name in FIGURES:
                run[name] += getattr(row, name)
        else:
            run = {"start": row.hour, "last_hour": row.hour, "hours": 1, "kind": row.kind, "subject": row.subject,
                   **{n: getattr(row, n) for n in FIGURES}, **{n: getattr(row, n) for n in IDENTITY},
                   "detail": {"tags": {}, "sums": {}}}
            out.append(run)
        tags = _add_tags(run["detail"]["tags"], _tags(row.detail), 1)
        sums = _add_sums(run["detail"]["sums"], (row.detail or {}).get("sums", {}), 1)
        run["detail"] = {**{k: v for k, v in (row.detail or {}).items() if k not in ("tags", "sums")},
                         "tags": tags, "sums": sums}
        if row.kind not in FIRST_IDENTITY:
            run.update({n: getattr(row, n) for n in IDENTITY})
    for run in out:
        if run["kind"] in HOLDER_KINDS:
            probe = Finding(kind=run["kind"], detail=run["detail"])
            _holder_identity(probe)
            run.update({n: getattr(probe, n) for n in ("team", "namespace", "workload", "pod")})
    return out


def _rebuild_around(cluster: Cluster, key: tuple[str, str], hour: datetime, near: list[Finding]) -> None:
    """Rebuild the subject's runs that touch `hour` from its hour rows; existing runs keep their identity (and
    notifications) where their start survives, else the earliest overlapping one takes the first new run."""
    kind, subject = key
    touched = [r for r in near if r.start - HOUR <= hour <= r.last_hour + HOUR]
    lo = min([hour, *(r.start for r in touched)])
    hi = max([hour, *(r.last_hour for r in touched)])
    rows = list(FindingHour.objects.filter(cluster=cluster, kind=kind, subject=subject, hour__gte=lo,
                                           hour__lte=hi).order_by("hour"))
    wanted = runs_from_rows(rows)
    existing = sorted(touched, key=lambda r: r.start)
    by_start = {r.start: r for r in existing}
    spare = [r for r in existing if r.start not in {w["start"] for w in wanted}]
    assigned = [(w, by_start.get(w["start"]) or (spare.pop(0) if spare else Finding(cluster=cluster)))
                for w in wanted]
    keep = {id(run) for _w, run in assigned}
    for run in existing:
        if id(run) not in keep:
            run.delete()
    for w, run in assigned:
        for name, value in w.items():
            setattr(run, name, value)
        run.end = None  # set_ends decides
        run.save()
