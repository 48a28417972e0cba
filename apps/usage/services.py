"""Ledger writes: claim a bucket under a lease, replace it whole in one transaction, roll it up.

Recovery is driven by `Bucket` state (failed buckets carry `next_attempt_at`), never by broker
redelivery: a redelivered or duplicated task finds the lease taken or the bucket already final.

Every write of a cluster's buckets and rollups happens under that cluster's row lock, so two writers of
different hours of one day take turns and the day rollup is always rebuilt from every committed hour.
Sources that answer with less never replace stored rows (ledger.md "Time"): the bucket is marked
`degraded_source` and kept, unless the operator accepts the loss.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Model, Q
from django.utils import timezone

from apps.common.inlists import in_batches
from apps.common.snapshots import field_values, upsert_observed
from apps.common.timeutils import HOUR, day_bounds, iso_week_start, midnight
from apps.inventory.gpus import UNKNOWN_NODE, AllocationMode
from apps.inventory.gpus.holds import Hold, allocation_mode, claim_holds
from apps.inventory.handout import hand_out
from apps.inventory.models import Cluster
from apps.inventory.observations import ClusterSnapshot
from apps.inventory.services import record_teams
from apps.usage import money
from apps.usage.activity import SIGNALS
from apps.usage.inputs import AssembledBucket, assemble_bucket
from apps.usage.ledger import BucketResult, compute_bucket
from apps.usage.models import (
    CAPACITY_KEY,
    USAGE_KEY,
    Bucket,
    CapacityDay,
    CapacityHour,
    ClaimObservation,
    NodeHour,
    PodHour,
    PodObservation,
    UsageDay,
    UsageHour,
    WorkloadDay,
    WorkloadWeek,
)
from apps.usage.sources import MetricsSource, SourceError

log = logging.getLogger(__name__)

SIGNAL_COLUMNS = [f"{kind}_{s}" for s in SIGNALS for kind in ("working", "idle", "unmeasured")]
MONEY_COLUMNS = ["cost"] + [f"idle_cost_{s}" for s in SIGNALS]
SUM_COLUMNS = ["allocated_gpu_hours", "unpriced_gpu_hours", *SIGNAL_COLUMNS, *MONEY_COLUMNS]
POD_COLUMNS = [
    "cluster_id", "hour", "namespace", "pod", "pod_uid", "workload", "team", "node", "node_group", "gpu_model",
    "cluster_queue", "local_queue", "resources", "gpus", "held_seconds", "price", *SUM_COLUMNS, "allocation_mode",
]
CAPACITY_SUMS = [
    "capacity_gpu_hours", "allocated_gpu_hours", "unallocated_gpu_hours", "unavailable_gpu_hours",
    "unpriced_gpu_hours", "capacity_cost", "unallocated_cost",
]
NODE_COLUMNS = ["cluster_id", "hour", "node", "node_group", "gpu_model", "physical_gpus", *CAPACITY_SUMS, "price",
                "inconsistent", "allocation_mode"]
USAGE_KEYS = list(USAGE_KEY)
WORKLOAD_KEYS = ["team", "namespace", "workload", "node_group", "gpu_model"]
CAPACITY_KEYS = list(CAPACITY_KEY)
# Attribution coverage may fall this much on a re-collection before it counts as the source losing data.
COVERAGE_TOLERANCE = 0.01
# Test seam: called inside the write transaction between deleting and re-inserting a day's rollups.
after_day_delete: Callable[[Cluster, date], None] | None = None


class LeaseLost(Exception):
    """Another worker took the bucket over (our lease expired): our write is abandoned."""


# ---- Leases and retries ----

def claim_bucket(cluster: Cluster, hour: datetime, owner: str, lease_seconds: int | None = None) -> bool:
    """Take the bucket's lease unless someone else holds a live one (a conditional UPDATE)."""
    Bucket.objects.get_or_create(cluster=cluster, hour=hour)
    now = timezone.now()
    lease = lease_seconds if lease_seconds is not None else settings.GPUFINOPS_BUCKET_LEASE_SECONDS
    free = Q(lease_expires__isnull=True) | Q(lease_expires__lt=now) | Q(lease_owner=owner)
    claimed = Bucket.objects.filter(free, cluster=cluster, hour=hour).update(
        lease_owner=owner, lease_expires=now + timedelta(seconds=lease), attempts=F("attempts") + 1
    )
    return claimed == 1


def retry_plan(hour: datetime, attempts: int, status: str, now: datetime) -> tuple[str, datetime | None]:
    """When a bucket that did not come out OK is tried again: capped exponential backoff by consecutive
    attempts, and never again once its hour is older than `GPUFINOPS_ABANDON_AFTER_DAYS` (a failing bucket
    is then `abandoned`; a degraded one keeps its stored rows and its status)."""
    if now - hour > timedelta(days=settings.GPUFINOPS_ABANDON_AFTER_DAYS):
        return (status if status == Bucket.Status.DEGRADED_SOURCE else Bucket.Status.ABANDONED), None
    backoff = min(60 * 2 ** max(attempts - 1, 0), settings.GPUFINOPS_MAX_RETRY_BACKOFF_SECONDS)
    return status, now + timedelta(seconds=backoff)


def mark_failed(
    cluster: Cluster, hour: datetime, owner: str, error: str, *, status: str = "failed", now: datetime | None = None
) -> None:
    """Record the failure and when to try again (exponential backoff, capped; abandoned when too old)."""
    now = now or timezone.now()
    error = cluster.scrub(error)  # finance reads last_error (/data-status/): never a part of a Prometheus URL
    bucket = Bucket.objects.get(cluster=cluster, hour=hour)
    status, next_attempt = retry_plan(hour, bucket.attempts, status, now)
    Bucket.objects.filter(pk=bucket.pk).update(
        status=status, last_error=error[:2000], next_attempt_at=next_attempt, lease_owner="", lease_expires=None
    )
    log.warning("bucket %s %s %s: %s", cluster.name, hour.isoformat(), status, error,
                extra={"cluster": cluster.name, "bucket": hour.isoformat()})


# ---- Writing ----

def _held_resources(holds: tuple[Hold, ...]) -> list[str]:
    """What a pod holds outside the device plugin, for its row's `resources`: devices per claim
    (`claim/<name>=2`) and HAMi fractions (`hami=0.5`, shares of GPUs added up, before scaling)."""
    claims: dict[str, int] = defaultdict(int)
    fraction = 0.0
    for h in holds:
        if h.mode == AllocationMode.DRA:
            claims[h.claim_name] += 1
        else:
            fraction += h.share
    out = [f"claim/{name}={n}" for name, n in sorted(claims.items())]
    return out + ([f"hami={fraction:.3g}"] if fraction else [])


def _pod_tuples(cluster: Cluster, hour: datetime, result: BucketResult) -> tuple[list[tuple], dict[str, Decimal]]:
    """PodHour rows with their money, and what the pods on each node are charged (for the node's identity)."""
    rows: list[tuple] = []
    charged: dict[str, Decimal] = defaultdict(lambda: money.ZERO)
    for r in result.pods:
        f = r.fact
        cost = money.cost(r.allocated, r.price)
        idle_costs = [money.cost(r.idle[s], r.price) or money.ZERO for s in SIGNALS]
        signal_values = [v for s in SIGNALS for v in (r.working[s], r.idle[s], r.unmeasured[s])]
        resources = ",".join([*(f"{k}={v:g}" for k, v in sorted(f.requests.items())), *_held_resources(f.holds)])
        rows.append((
            cluster.pk, hour, f.namespace, f.name, f.uid, f.workload, f.team, f.node, r.node_group, r.gpu_model,
            f.cluster_queue, f.local_queue, resources[:500], r.gpus, f.held_seconds, r.price, r.allocated,
            r.allocated if cost is None else 0.0, *signal_values, cost or money.ZERO, *idle_costs, r.allocation_mode,
        ))
        charged[f.node] += cost or money.ZERO
    return rows, charged


def _node_tuples(cluster: Cluster, hour: datetime, result: BucketResult, charged: Mapping[str, Decimal]) -> list[tuple]:
    """NodeHour rows. capacity cost = what the node's pods are charged + the unallocated cost, exactly."""
    rows = []
    for r in result.nodes:
        f = r.fact
        unallocated_cost = money.cost(r.unallocated, f.price)
        capacity_cost = charged.get(f.name, money.ZERO) + unallocated_cost if unallocated_cost is not None else None
        rows.append((
            cluster.pk, hour, f.name, f.node_group, f.gpu_model, f.physical_gpus, r.capacity, r.allocated,
            r.unallocated, r.unavailable, r.capacity if f.price is None else 0.0, capacity_cost or money.ZERO,
            unallocated_cost or money.ZERO, f.price, r.inconsistent, r.allocation_mode,
        ))
    return rows


def ledger_rows(cluster: Cluster, hour: datetime, result: BucketResult) -> tuple[list[tuple], list[tuple]]:
    """The bucket's PodHour and NodeHour rows (POD_COLUMNS, NODE_COLUMNS), as `replace_rows` writes them."""
    pod_rows, charged = _pod_tuples(cluster, hour, result)
    return pod_rows, _node_tuples(cluster, hour, result, charged)


def replace_rows(cluster: Cluster, hour: datetime, pod_rows: list[tuple], node_rows: list[tuple]) -> None:
    """The hour's ledger rows replaced whole: delete, then COPY. Idempotent, so a re-collect converges.
    This is the write path bench/collect measures against a raw COPY; call it in the bucket's transaction."""
    for model in (PodHour, NodeHour):
        model.objects.filter(cluster=cluster, hour=hour).delete()
    _bulk_insert(PodHour, POD_COLUMNS, pod_rows)
    _bulk_insert(NodeHour, NODE_COLUMNS, node_rows)


def _bulk_insert(model: type[Model], columns: list[str], rows: list[tuple]) -> None:
    """COPY on PostgreSQL (the write path benchmarked in bench/collect), bulk_create elsewhere."""
    if not rows:
        return
    table = model._meta.db_table
    if connection.vendor == "postgresql":
        with connection.cursor() as cur, cur.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
            for row in rows:
                cp.write_row(row)
        return
    # Elsewhere (the SQLite embedded default) let the ORM adapt values (e.g. aware datetimes).
    model._default_manager.bulk_create([model(**dict(zip(columns, row, strict=True))) for row in rows], batch_size=500)


def _column_sum(values: tuple) -> float | Decimal:
    """Money sums exactly as decimals; GPU-hours with fsum, correctly rounded whatever the order."""
    if values and isinstance(values[0], Decimal):
        return sum(values, money.ZERO)
    return math.fsum(values)


def _grouped_sums(rows: list[tuple], nkeys: int) -> list[tuple]:
    """Group rows by their first `nkeys` fields and sum the rest.

    Neither sum depends on the order of the rows (which changes whenever a bucket is rewritten), so
    re-collecting converges to identical rollups, bit for bit.
    """
    groups: dict[tuple, list[tuple]] = defaultdict(list)
    for row in rows:
        groups[row[:nkeys]].append(row[nkeys:])
    return [key + tuple(_column_sum(col) for col in zip(*vals, strict=True)) for key, vals in sorted(groups.items())]


def rollup_hour(cluster: Cluster, hour: datetime) -> None:
    """Rebuild the hour's rollups (UsageHour, CapacityHour) from its ledger rows."""
    UsageHour.objects.filter(cluster=cluster, hour=hour).delete()
    CapacityHour.objects.filter(cluster=cluster, hour=hour).delete()
    pods = PodHour.objects.filter(cluster=cluster, hour=hour).values_list(*USAGE_KEYS, *SUM_COLUMNS)
    _bulk_insert(UsageHour, ["cluster_id", "hour", *USAGE_KEYS, *SUM_COLUMNS],
                 [(cluster.pk, hour, *r) for r in _grouped_sums(list(pods), len(USAGE_KEYS))])
    nodes = NodeHour.objects.filter(cluster=cluster, hour=hour).values_list(*CAPACITY_KEYS, *CAPACITY_SUMS)
    _bulk_insert(CapacityHour, ["cluster_id", "hour", *CAPACITY_KEYS, *CAPACITY_SUMS],
                 [(cluster.pk, hour, *r) for r in _grouped_sums(list(nodes), len(CAPACITY_KEYS))])


def rollup_day(cluster: Cluster, day: date) -> None:
    """Rebuild the day's rollups (UsageDay and CapacityDay from the hourly rollups, WorkloadDay from the pod
    rows, and the WorkloadWeek rows of the workloads the day has, from their week's WorkloadDay rows). Call under
    the cluster lock."""
    start, end = day_bounds(day)
    in_day = {"cluster": cluster, "hour__gte": start, "hour__lt": end}
    UsageDay.objects.filter(cluster=cluster, day=day).delete()
    week = _forget_week_keys(cluster, day)
    WorkloadDay.objects.filter(cluster=cluster, day=day).delete()
    CapacityDay.objects.filter(cluster=cluster, day=day).delete()
    if after_day_delete is not None:
        after_day_delete(cluster, day)
    hours = UsageHour.objects.filter(**in_day).values_list(*USAGE_KEYS, *SUM_COLUMNS)
    _bulk_insert(UsageDay, ["cluster_id", "day", *USAGE_KEYS, *SUM_COLUMNS],
                 [(cluster.pk, day, *r) for r in _grouped_sums(list(hours), len(USAGE_KEYS))])
    pods = PodHour.objects.filter(**in_day).values_list(*WORKLOAD_KEYS, *SUM_COLUMNS)
    _bulk_insert(WorkloadDay, ["cluster_id", "day", *WORKLOAD_KEYS, *SUM_COLUMNS],
                 [(cluster.pk, day, *r) for r in _grouped_sums(list(pods), len(WORKLOAD_KEYS))])
    _forget_week_keys(cluster, day)
    _rebuild_week_keys(cluster, week)
    caps = CapacityHour.objects.filter(**in_day).values_list(*CAPACITY_KEYS, *CAPACITY_SUMS)
    _bulk_insert(CapacityDay, ["cluster_id", "day", *CAPACITY_KEYS, *CAPACITY_SUMS],
                 [(cluster.pk, day, *r) for r in _grouped_sums(list(caps), len(CAPACITY_KEYS))])


def _forget_week_keys(cluster: Cluster, day: date) -> date:
    """Delete the week rollup rows of the workload keys the day has now; returns the week's Monday. Called before
    the day's rows are replaced (the keys it had) and after (the keys it has), then `_rebuild_week_keys`: only
    the keys the day touches are summed again."""
    week = iso_week_start(midnight(day)).date()
    # Matched here, not by a correlated EXISTS: on tables whose statistics lag their writes (a new cluster, a
    # catch-up) PostgreSQL planned that as a nested loop over every pair of the week's and the day's rows, 2-13 s
    # per call at 10,000 GPUs (bench/README.md, 2026-12-02); a set lookup per row is linear whatever the plan.
    on_day = set(WorkloadDay.objects.filter(cluster=cluster, day=day).values_list(*WORKLOAD_KEYS))
    stale = [pk for pk, *key in WorkloadWeek.objects.filter(cluster=cluster, week=week)
             .values_list("pk", *WORKLOAD_KEYS) if tuple(key) in on_day]
    for batch in in_batches(stale):
        WorkloadWeek.objects.filter(pk__in=batch).delete()
    return week


def _rebuild_week_keys(cluster: Cluster, week: date) -> None:
    """Sum again (exactly, as every rollup: `_grouped_sums`) the week's WorkloadDay rows of every workload key
    that has no week row: the keys `_forget_week_keys` deleted and the day's new ones. A key gone from the whole
    week gets no row; keys the day does not touch keep theirs. So the week rollup always equals the sum of its
    days, and re-collecting a day converges to the same rows."""
    days = {"cluster": cluster, "day__gte": week, "day__lt": week + timedelta(days=7)}
    kept = set(WorkloadWeek.objects.filter(cluster=cluster, week=week).values_list(*WORKLOAD_KEYS))  # as above
    n = len(WORKLOAD_KEYS)
    rows = [r for r in WorkloadDay.objects.filter(**days).values_list(*WORKLOAD_KEYS, *SUM_COLUMNS)
            if r[:n] not in kept]
    _bulk_insert(WorkloadWeek, ["cluster_id", "week", *WORKLOAD_KEYS, *SUM_COLUMNS],
                 [(cluster.pk, week, *r) for r in _grouped_sums(rows, n)])


def rebuild_workload_week(cluster: Cluster, week: date) -> None:
    """Rebuild every WorkloadWeek row of the ISO week starting on Monday `week` from its WorkloadDay rows (for rows
    written outside `rollup_day`, e.g. bench/rankings.py's SQL copies). Call under the cluster lock."""
    WorkloadWeek.objects.filter(cluster=cluster, week=week).delete()
    _rebuild_week_keys(cluster, week)


def lock_cluster(cluster: Cluster) -> None:
    """The per-cluster serialization of ledger writes (a row lock; SQLite serializes writers anyway)."""
    Cluster.objects.select_for_update().filter(pk=cluster.pk).first()


def measured(result: BucketResult) -> tuple[int, list[str], dict[str, float | None]]:
    """What a bucket's rows are measured with: DCGM series, the signals seen, coverage per signal."""
    allocated = math.fsum(r.allocated for r in result.pods)
    coverage: dict[str, float | None] = {}
    for s in SIGNALS:
        unmeasured = math.fsum(r.unmeasured[s] for r in result.pods)
        coverage[s] = round(1.0 - unmeasured / allocated, 9) if allocated > 0 else None
    return result.series, sorted(result.signals), coverage


def loss_reason(bucket: Bucket, series: int, coverage: Mapping[str, float | None]) -> str | None:
    """Why writing these rows would replace measured data with less, or None (ledger.md "Time")."""
    if bucket.state != Bucket.State.FINAL or bucket.status not in (Bucket.Status.OK, Bucket.Status.DEGRADED_SOURCE):
        return None
    if bucket.series and not series:
        return f"no DCGM series where the stored bucket had {bucket.series}"
    for signal, stored in sorted((bucket.coverage or {}).items()):
        new = coverage.get(signal)
        if stored is not None and (new is None or new < stored - COVERAGE_TOLERANCE):
            return f"{signal} attribution coverage would fall from {stored:.1%} to {0 if new is None else new:.1%}"
    return None


def write_bucket(
    cluster: Cluster,
    hour: datetime,
    result: BucketResult,
    *,
    owner: str,
    covered_until: datetime,
    status: str = Bucket.Status.OK,
    extra_warnings: list[str] | None = None,
    accept_loss: bool = False,
) -> str:
    """Replace the bucket's ledger rows and rollups in one transaction, if we still hold its lease.

    Returns the bucket's status: `status` as given, or `degraded_source` when the new rows would bring less
    than the stored ones (then the stored rows stay, unless `accept_loss`).
    """
    now = timezone.now()
    final = covered_until >= hour + HOUR
    pod_rows, node_rows = ledger_rows(cluster, hour, result)
    series, signals, coverage = measured(result)
    with transaction.atomic():
        lock_cluster(cluster)
        bucket = Bucket.objects.select_for_update().get(cluster=cluster, hour=hour)
        if bucket.lease_owner != owner:
            raise LeaseLost(f"bucket {cluster.name} {hour.isoformat()} is now held by {bucket.lease_owner!r}")
        loss = None if accept_loss else loss_reason(bucket, series, coverage)
        if loss is not None:
            degraded = Bucket.Status.DEGRADED_SOURCE
            bucket.status, bucket.next_attempt_at = retry_plan(hour, bucket.attempts, degraded, now)
            bucket.last_error = f"stored rows kept: {loss}"
            bucket.lease_owner, bucket.lease_expires = "", None
            bucket.save(update_fields=["status", "next_attempt_at", "last_error", "lease_owner", "lease_expires"])
            log.warning("bucket %s %s degraded source: %s", cluster.name, hour.isoformat(), loss,
                        extra={"cluster": cluster.name, "bucket": hour.isoformat()})
            return Bucket.Status.DEGRADED_SOURCE
        replace_rows(cluster, hour, pod_rows, node_rows)
        rollup_hour(cluster, hour)
        rollup_day(cluster, hour.date())
        bucket.state = Bucket.State.FINAL if final else Bucket.State.PROVISIONAL
        bucket.status = status
        bucket.last_error = "" if status == Bucket.Status.OK else bucket.last_error
        bucket.inconsistent = result.inconsistent
        bucket.warnings = (result.warnings + (extra_warnings or []))[:200]
        bucket.collected_at = now
        bucket.covered_until = covered_until
        bucket.pod_rows, bucket.node_rows = len(pod_rows), len(node_rows)
        bucket.series, bucket.signals, bucket.coverage = series, signals, coverage
        bucket.lease_owner, bucket.lease_expires = "", None
        if status == Bucket.Status.OK:
            bucket.attempts, bucket.next_attempt_at = 0, None
        else:
            bucket.status, bucket.next_attempt_at = retry_plan(hour, bucket.attempts, status, now)
        bucket.save()
        return bucket.status


# ---- Pod observations (the allocation intervals the Kubernetes API shows) ----

OBSERVATION_FIELDS = ["namespace", "pod", "node", "phase", "labels", "workload", "requests", "started", "finished",
                      "last_seen", "gone", "allocation_mode", "holds"]
CLAIM_FIELDS = ["namespace", "name", "labels", "node", "devices", "consumers", "allocated_until", "last_seen"]


def _kept_holds(previous: list[dict], now: tuple[Hold, ...], claims: tuple[str, ...]) -> list[dict]:
    """The pod's holds as stored: what it holds now; a claim's devices seen before stay held while the pod
    names the claim, after the claim is gone (a template's claim is deleted with its pod: ledger.md)."""
    held = [h.as_json() for h in now]
    if claims and not any(h.mode == AllocationMode.DRA for h in now):
        held += [h for h in previous if h.get("mode") == AllocationMode.DRA]
    return held


@transaction.atomic
def record_pod_observations(cluster: Cluster, snap: ClusterSnapshot) -> None:
    """Each GPU pod's allocation interval updated from one snapshot; pods that vanished end at last sight.

    Two workers observing the same cluster at once would race on the same rows: the cluster row's lock
    serializes them (a no-op on SQLite, which serializes writers anyway).
    """
    Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
    uids = [p.uid for p in snap.pods]
    hand = hand_out(snap)
    if hand.warnings:  # tenant-written HAMi annotations, claims naming unpublished devices: refused, said once
        log.info("cluster %s: %d DRA/HAMi objects not counted as written: %s", cluster.name, len(hand.warnings),
                 "; ".join(hand.warnings[:20]), extra={"cluster": cluster.name})
    # Pods not gone, plus any of this snapshot's pods seen before (a pod can come back after a blip).
    # (Those seen before are asked by uid apart: in a steady state only the few new pods, not a parameter per pod.)
    known = {o.uid: o for o in PodObservation.objects.filter(cluster=cluster, gone=False)}
    missing = [uid for uid in uids if uid not in known]
    if missing:
        known.update((o.uid, o) for o in PodObservation.objects.filter(cluster=cluster, uid__in=missing))
    compared = [f for f in OBSERVATION_FIELDS if f != "last_seen"]
    to_write, unchanged = [], []
    for pod in snap.pods:
        obs = known.get(pod.uid)
        before = None
        if obs is None:
            obs = PodObservation(cluster=cluster, uid=pod.uid, first_seen=snap.taken_at)
        else:
            before = field_values(obs, compared)
        obs.namespace, obs.pod, obs.node, obs.phase = pod.namespace, pod.name, pod.node, pod.phase
        obs.labels = pod.labels
        obs.workload = snap.workload_of(pod)[:320]
        obs.requests = hand.requests.get(pod.uid, {})
        obs.holds = _kept_holds(obs.holds or [], hand.holds.get(pod.uid, ()), pod.claims)
        obs.allocation_mode = str(hand.modes.get(pod.uid, AllocationMode.DEVICE_PLUGIN))
        if obs.holds and not hand.holds.get(pod.uid):
            obs.allocation_mode = str(allocation_mode(UNKNOWN_NODE, obs.requests,
                                                      [Hold.from_json(h) for h in obs.holds]))
        obs.started = pod.started
        # A pod seen with a deletion timestamp ends there at the latest (ledger.md "Allocation").
        obs.finished = pod.finished or (pod.deletion if pod.phase == "Running" and pod.deletion else None)
        obs.last_seen = snap.taken_at
        obs.gone = False
        if before is not None and field_values(obs, compared) == before:
            unchanged.append(obs.pk)  # seen again as it was: only its last_seen moves
        else:
            to_write.append(obs)
    seen = set(uids)
    for uid, obs in known.items():
        if uid not in seen and not obs.gone:
            obs.gone = True
            if obs.finished is None and obs.started is not None:
                obs.finished = obs.last_seen  # disappeared while running: ends at its last observation
            to_write.append(obs)
    # One upsert (INSERT ... ON CONFLICT DO UPDATE) for new and changed pods: a 10,000-GPU cluster has thousands
    # of GPU pods, and Django's bulk_update spent 16 s building its CASE expressions for 3,860 of them
    # (bench/collect's steady state), the upsert 0.9 s; pods seen again unchanged (most of them, every 5 minutes)
    # only move their last_seen, in one UPDATE. first_seen is not among the updated fields.
    upsert_observed(PodObservation, to_write, unchanged, unique_fields=["cluster", "uid"],
                    update_fields=OBSERVATION_FIELDS, seen_field="last_seen", seen_at=snap.taken_at)
    record_claim_observations(cluster, snap)


def record_claim_observations(cluster: Cluster, snap: ClusterSnapshot) -> None:
    """Each allocated claim holding GPU devices: its open stretch extended to this read, or a new one from it;
    an open stretch whose claim is now released or gone ends at this read (the API keeps no history)."""
    open_rows = {o.uid: o for o in ClaimObservation.objects.filter(cluster=cluster, allocated_until__isnull=True)}
    rows: list[ClaimObservation] = []
    for claim in snap.dra.claims if snap.dra is not None else ():
        if not (claim.allocated and claim.devices):
            continue  # pending, or only admin access (holds nothing)
        row = open_rows.pop(claim.uid, None) or ClaimObservation(
            cluster=cluster, uid=claim.uid, allocated_from=snap.taken_at, consumers=[])
        row.namespace, row.name, row.labels, row.node = claim.namespace, claim.name, claim.labels, claim.node
        row.devices = [h.as_json() for h in claim_holds(claim.uid, claim.name, claim.devices)]
        row.consumers = sorted({*row.consumers, *(c.uid for c in claim.consumers)})
        row.last_seen, row.allocated_until = snap.taken_at, None
        rows.append(row)
    for row in open_rows.values():
        row.allocated_until = snap.taken_at
        rows.append(row)
    ClaimObservation.objects.bulk_create(rows, batch_size=1000, update_conflicts=True,
                                         unique_fields=["cluster", "uid", "allocated_from"],
                                         update_fields=CLAIM_FIELDS)


# ---- Collecting one bucket ----


@dataclass(frozen=True)
class BucketOutcome:
    """What became of one bucket."""

    hour: datetime
    state: str  # "written" | "degraded" (stored rows kept) | "failed" | "skipped" (another worker holds it)
    error: str = ""
    # A written bucket's assembled inputs and computed rows, for what is derived from the same data (findings).
    assembled: AssembledBucket | None = None
    result: BucketResult | None = None


def bucket_end(hour: datetime, now: datetime) -> datetime:
    """The end of the window a collection at `now` reads of the bucket starting at `hour` (the current hour: so far)."""
    return min(hour + HOUR, now)


def collect_bucket(
    cluster: Cluster,
    hour: datetime,
    *,
    now: datetime,
    source: MetricsSource,
    namespace_labels: Mapping[str, Mapping[str, str]],
    owner: str,
    accept_loss: bool = False,
) -> BucketOutcome:
    """Claim the bucket, assemble its inputs from the source, compute its rows and replace it whole."""
    if not claim_bucket(cluster, hour, owner):
        return BucketOutcome(hour, "skipped")  # another worker holds it: a duplicate tick is harmless
    end = bucket_end(hour, now)
    try:
        assembled = assemble_bucket(cluster, hour, end, source, namespace_labels)
        result = compute_bucket(assembled.inputs)
        status = Bucket.Status.OK
        if not assembled.has_dcgm and result.pods:
            status = Bucket.Status.SOURCE_MISSING  # written with everything unmeasured; retried later
        record_teams(cluster, {p.fact.team for p in result.pods}, hour)
        written = write_bucket(
            cluster, hour, result, owner=owner, covered_until=end, status=status, accept_loss=accept_loss,
            extra_warnings=[*assembled.warnings, *source.warnings],
        )
        source.warnings.clear()
        if written == Bucket.Status.DEGRADED_SOURCE:
            return BucketOutcome(hour, "degraded", Bucket.objects.get(cluster=cluster, hour=hour).last_error)
        return BucketOutcome(hour, "written", assembled=assembled, result=result)
    except LeaseLost as exc:
        return BucketOutcome(hour, "skipped", str(exc))
    except SourceError as exc:
        mark_failed(cluster, hour, owner, str(exc), now=now)
        return BucketOutcome(hour, "failed", str(exc))
    except Exception as exc:
        log.exception("bucket %s %s crashed", cluster.name, hour,
                      extra={"cluster": cluster.name, "bucket": hour.isoformat()})
        mark_failed(cluster, hour, owner, f"{type(exc).__name__}: {exc}", now=now)
        return BucketOutcome(hour, "failed", f"{type(exc).__name__}: {exc}")


def mark_unreachable(cluster: Cluster, hours: list[datetime], owner: str, error: str, *, status: str,
                     now: datetime) -> None:
    """A source could not be reached at all: each bucket to collect is marked, to be retried."""
    for h in hours:
        Bucket.objects.get_or_create(cluster=cluster, hour=h)
        mark_failed(cluster, h, owner, error, status=status, now=now)


# ---- Retention of pod and node rows ----


def prune_ledger(*, keep_months: int | None = None, now: datetime | None = None) -> int:
    """Drop pod and node rows older than `keep_months` whole months (`GPUFINOPS_LEDGER_KEEP_MONTHS`; 0 keeps
    everything). Rollups (hour, day, workload, capacity) stay, so totals of old periods are unchanged.

    On PostgreSQL whole monthly partitions are dropped; elsewhere rows are deleted. Returns how many
    partitions (PostgreSQL) or rows were removed.
    """
    from apps.common.timeutils import month_start
    from apps.usage.partitions import PARTITIONED, drop_before, is_partitioned

    keep = settings.GPUFINOPS_LEDGER_KEEP_MONTHS if keep_months is None else keep_months
    if keep <= 0:
        return 0
    cutoff = month_start(now or timezone.now())
    for _ in range(keep):
        cutoff = month_start(cutoff - timedelta(days=1))
    if all(is_partitioned(connection, t) for t in PARTITIONED):
        dropped = drop_before(cutoff)
        log.info("ledger retention: dropped partitions %s (before %s)", ", ".join(dropped) or "none", cutoff.date())
        return len(dropped)
    removed = 0
    for model in (PodHour, NodeHour):
        removed += model.objects.filter(hour__lt=cutoff).delete()[0]
    log.info("ledger retention: deleted %d pod and node rows before %s", removed, cutoff.date())
    return removed
