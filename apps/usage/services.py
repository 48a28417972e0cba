"""Ledger writes: claim a bucket under a lease, replace it whole in one transaction, roll it up.

Recovery is driven by `Bucket` state (failed buckets carry `next_attempt_at`), never by broker
redelivery: a redelivered or duplicated task finds the lease taken or the bucket already final.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.common.timeutils import HOUR, day_bounds
from apps.inventory.gpus import effective_request
from apps.inventory.models import Cluster
from apps.inventory.observations import ClusterSnapshot
from apps.inventory.services import record_teams
from apps.usage.activity import SIGNALS
from apps.usage.inputs import assemble_bucket
from apps.usage.ledger import BucketResult, compute_bucket
from apps.usage.models import (
    Bucket,
    CapacityDay,
    CapacityHour,
    NodeHour,
    PodHour,
    PodObservation,
    UsageDay,
    UsageHour,
)
from apps.usage.sources import MetricsSource, SourceError

log = logging.getLogger(__name__)

SIGNAL_COLUMNS = [f"{kind}_{s}" for s in SIGNALS for kind in ("working", "idle", "unmeasured")]
MONEY_COLUMNS = ["cost"] + [f"idle_cost_{s}" for s in SIGNALS]
SUM_COLUMNS = ["allocated_gpu_hours", *SIGNAL_COLUMNS, *MONEY_COLUMNS]
POD_COLUMNS = [
    "cluster_id", "hour", "namespace", "pod", "pod_uid", "team", "node", "node_group", "gpu_model",
    "cluster_queue", "local_queue", "resources", "gpus", "held_seconds", "price", *SUM_COLUMNS,
]
NODE_COLUMNS = [
    "cluster_id", "hour", "node", "node_group", "gpu_model", "physical_gpus", "capacity_gpu_hours",
    "allocated_gpu_hours", "unallocated_gpu_hours", "unavailable_gpu_hours", "unallocated_cost", "price",
    "inconsistent",
]
CAPACITY_SUMS = [
    "capacity_gpu_hours", "allocated_gpu_hours", "unallocated_gpu_hours", "unavailable_gpu_hours",
    "unallocated_cost",
]


class LeaseLost(Exception):
    """Another worker took the bucket over (our lease expired): our write is abandoned."""


# ---- Leases ----

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


def mark_failed(
    cluster: Cluster, hour: datetime, owner: str, error: str, *, status: str = "failed", now: datetime | None = None
) -> None:
    """Record the failure and when to try again (exponential backoff, capped)."""
    bucket = Bucket.objects.get(cluster=cluster, hour=hour)
    backoff = min(60 * 2 ** max(bucket.attempts - 1, 0), settings.GPUFINOPS_MAX_RETRY_BACKOFF_SECONDS)
    Bucket.objects.filter(pk=bucket.pk).update(
        status=status,
        last_error=error[:2000],
        next_attempt_at=(now or timezone.now()) + timedelta(seconds=backoff),
        lease_owner="",
        lease_expires=None,
    )
    log.warning("bucket %s %s %s: %s", cluster.name, hour.isoformat(), status, error)


# ---- Writing ----

def _pod_tuples(cluster: Cluster, hour: datetime, result: BucketResult) -> list[tuple]:
    rows = []
    for r in result.pods:
        f = r.fact
        price = r.price
        idle_costs = [r.idle[s] * price if price is not None else 0.0 for s in SIGNALS]
        signal_values = [v for s in SIGNALS for v in (r.working[s], r.idle[s], r.unmeasured[s])]
        resources = ",".join(f"{k}={v:g}" for k, v in sorted(f.requests.items()))
        rows.append((
            cluster.pk, hour, f.namespace, f.name, f.uid, f.team, f.node, r.node_group, r.gpu_model,
            f.cluster_queue, f.local_queue, resources[:500], r.gpus, f.held_seconds, price, r.allocated,
            *signal_values, r.allocated * price if price is not None else 0.0, *idle_costs,
        ))
    return rows


def _node_tuples(cluster: Cluster, hour: datetime, result: BucketResult) -> list[tuple]:
    rows = []
    for r in result.nodes:
        f = r.fact
        cost = r.unallocated * f.price if f.price is not None else 0.0
        rows.append((
            cluster.pk, hour, f.name, f.node_group, f.gpu_model, f.physical_gpus, r.capacity, r.allocated,
            r.unallocated, r.unavailable, cost, f.price, r.inconsistent,
        ))
    return rows


def _bulk_insert(model: type, columns: list[str], rows: list[tuple]) -> None:
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
    model.objects.bulk_create([model(**dict(zip(columns, row, strict=True))) for row in rows], batch_size=500)


def _grouped_sums(rows: list[tuple], nkeys: int) -> list[tuple]:
    """Group rows by their first `nkeys` fields and sum the rest with math.fsum.

    fsum is correctly rounded whatever the order of its inputs, so a rollup does not depend on the
    physical order of rows (which changes whenever a bucket is rewritten): re-collecting converges
    to identical rollups, bit for bit.
    """
    groups: dict[tuple, list[tuple]] = defaultdict(list)
    for row in rows:
        groups[row[:nkeys]].append(row[nkeys:])
    return [key + tuple(math.fsum(col) for col in zip(*vals, strict=True)) for key, vals in sorted(groups.items())]


USAGE_KEYS = ["team", "namespace", "node_group", "gpu_model"]
CAPACITY_KEYS = ["node_group", "gpu_model"]


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
    """Rebuild the day's rollups (UsageDay, CapacityDay) from its hourly rollups."""
    start, end = day_bounds(day)
    in_day = {"cluster": cluster, "hour__gte": start, "hour__lt": end}
    UsageDay.objects.filter(cluster=cluster, day=day).delete()
    CapacityDay.objects.filter(cluster=cluster, day=day).delete()
    hours = UsageHour.objects.filter(**in_day).values_list(*USAGE_KEYS, *SUM_COLUMNS)
    _bulk_insert(UsageDay, ["cluster_id", "day", *USAGE_KEYS, *SUM_COLUMNS],
                 [(cluster.pk, day, *r) for r in _grouped_sums(list(hours), len(USAGE_KEYS))])
    caps = CapacityHour.objects.filter(**in_day).values_list(*CAPACITY_KEYS, *CAPACITY_SUMS)
    _bulk_insert(CapacityDay, ["cluster_id", "day", *CAPACITY_KEYS, *CAPACITY_SUMS],
                 [(cluster.pk, day, *r) for r in _grouped_sums(list(caps), len(CAPACITY_KEYS))])


def write_bucket(
    cluster: Cluster,
    hour: datetime,
    result: BucketResult,
    *,
    owner: str,
    covered_until: datetime,
    status: str = Bucket.Status.OK,
    extra_warnings: list[str] | None = None,
) -> None:
    """Replace the bucket's ledger rows and rollups in one transaction, if we still hold its lease."""
    now = timezone.now()
    final = covered_until >= hour + HOUR
    pod_rows = _pod_tuples(cluster, hour, result)
    node_rows = _node_tuples(cluster, hour, result)
    with transaction.atomic():
        bucket = Bucket.objects.select_for_update().get(cluster=cluster, hour=hour)
        if bucket.lease_owner != owner:
            raise LeaseLost(f"bucket {cluster.name} {hour.isoformat()} is now held by {bucket.lease_owner!r}")
        for model in (PodHour, NodeHour):
            model.objects.filter(cluster=cluster, hour=hour).delete()
        _bulk_insert(PodHour, POD_COLUMNS, pod_rows)
        _bulk_insert(NodeHour, NODE_COLUMNS, node_rows)
        rollup_hour(cluster, hour)
        rollup_day(cluster, hour.date())
        warnings = (result.warnings + (extra_warnings or []))[:200]
        bucket.state = Bucket.State.FINAL if final else Bucket.State.PROVISIONAL
        bucket.status = status
        bucket.last_error = "" if status == Bucket.Status.OK else bucket.last_error
        bucket.inconsistent = result.inconsistent
        bucket.warnings = warnings
        bucket.collected_at = now
        bucket.covered_until = covered_until
        bucket.pod_rows = len(pod_rows)
        bucket.node_rows = len(node_rows)
        bucket.lease_owner = ""
        bucket.lease_expires = None
        bucket.next_attempt_at = None if status == Bucket.Status.OK else now + timedelta(minutes=15)
        bucket.save()


# ---- Pod observations (the allocation intervals the Kubernetes API shows) ----

OBSERVATION_FIELDS = ["namespace", "pod", "node", "phase", "labels", "requests", "started", "finished", "last_seen",
                      "gone"]


@transaction.atomic
def record_pod_observations(cluster: Cluster, snap: ClusterSnapshot) -> None:
    """Each GPU pod's allocation interval updated from one snapshot; pods that vanished end at last sight.

    Two workers observing the same cluster at once would race on the same rows: the cluster row's lock
    serializes them (a no-op on SQLite, which serializes writers anyway).
    """
    Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
    uids = [p.uid for p in snap.pods]
    # Pods not gone, plus any of this snapshot's pods seen before (a pod can come back after a blip).
    known = {o.uid: o for o in PodObservation.objects.filter(cluster=cluster).filter(Q(gone=False) | Q(uid__in=uids))}
    to_create, to_update = [], []
    for pod in snap.pods:
        obs = known.get(pod.uid)
        if obs is None:
            obs = PodObservation(cluster=cluster, uid=pod.uid, first_seen=snap.taken_at)
            to_create.append(obs)
        else:
            to_update.append(obs)
        obs.namespace, obs.pod, obs.node, obs.phase = pod.namespace, pod.name, pod.node, pod.phase
        obs.labels = pod.labels
        obs.requests = effective_request(pod.containers)
        obs.started = pod.started
        # A pod seen with a deletion timestamp ends there at the latest (ledger.md "Allocation").
        obs.finished = pod.finished or (pod.deletion if pod.phase == "Running" and pod.deletion else None)
        obs.last_seen = snap.taken_at
        obs.gone = False
    seen = set(uids)
    for uid, obs in known.items():
        if uid not in seen and not obs.gone:
            obs.gone = True
            if obs.finished is None and obs.started is not None:
                obs.finished = obs.last_seen  # disappeared while running: ends at its last observation
            to_update.append(obs)
    # Bulk writes: a 10,000-GPU cluster has thousands of GPU pods; one UPDATE each dominated the bucket.
    PodObservation.objects.bulk_create(to_create, batch_size=1000)
    PodObservation.objects.bulk_update(to_update, OBSERVATION_FIELDS, batch_size=1000)


# ---- Collecting one bucket ----


@dataclass(frozen=True)
class BucketOutcome:
    """What became of one bucket: written, failed (with the reason) or skipped (another worker holds it)."""

    hour: datetime
    state: str  # "written" | "failed" | "skipped"
    error: str = ""


def collect_bucket(
    cluster: Cluster,
    hour: datetime,
    *,
    now: datetime,
    source: MetricsSource,
    namespace_labels: Mapping[str, Mapping[str, str]],
    owner: str,
) -> BucketOutcome:
    """Claim the bucket, assemble its inputs from the source, compute its rows and replace it whole."""
    if not claim_bucket(cluster, hour, owner):
        return BucketOutcome(hour, "skipped")  # another worker holds it: a duplicate tick is harmless
    end = min(hour + HOUR, now)
    try:
        assembled = assemble_bucket(cluster, hour, end, source, namespace_labels)
        result = compute_bucket(assembled.inputs)
        status = Bucket.Status.OK
        if not assembled.has_dcgm and result.pods:
            status = Bucket.Status.SOURCE_MISSING  # written with everything unmeasured; retried later
        record_teams(cluster, {p.fact.team for p in result.pods}, hour)
        rejected = [
            f"pod {pod.namespace}/{pod.name}: team label {choice.rejected[:80]!r} not obeyed ({choice.reason}); "
            f"charged to {choice.team}"
            for pod, choice in assembled.rejected_teams
        ]
        write_bucket(cluster, hour, result, owner=owner, covered_until=end, status=status,
                     extra_warnings=rejected + list(source.warnings))
        source.warnings.clear()
        return BucketOutcome(hour, "written")
    except (SourceError, LeaseLost) as exc:
        mark_failed(cluster, hour, owner, str(exc), now=now)
        return BucketOutcome(hour, "failed", str(exc))
    except Exception as exc:
        log.exception("bucket %s %s crashed", cluster.name, hour)
        mark_failed(cluster, hour, owner, f"{type(exc).__name__}: {exc}", now=now)
        return BucketOutcome(hour, "failed", f"{type(exc).__name__}: {exc}")


def mark_unreachable(cluster: Cluster, hours: list[datetime], owner: str, error: str, *, status: str,
                     now: datetime) -> None:
    """A source could not be reached at all: each bucket to collect is marked, to be retried."""
    for h in hours:
        Bucket.objects.get_or_create(cluster=cluster, hour=h)
        mark_failed(cluster, h, owner, error, status=status, now=now)
