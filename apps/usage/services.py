"""Ledger writes: claim a bucket under a lease, replace it whole in one transaction, roll it up.

Recovery is driven by `Bucket` state (failed buckets carry `next_attempt_at`), never by broker
redelivery: a redelivered or duplicated task finds the lease taken or the bucket already final.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.inventory.models import Cluster
from apps.usage.ledger import BucketResult
from apps.usage.models import (
    Bucket,
    CapacityDay,
    CapacityHour,
    NodeHour,
    PodHour,
    UsageDay,
    UsageHour,
)
from apps.usage.signals import SIGNALS

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


def release_bucket(cluster: Cluster, hour: datetime, owner: str) -> None:
    Bucket.objects.filter(cluster=cluster, hour=hour, lease_owner=owner).update(lease_owner="", lease_expires=None)


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
    """COPY on PostgreSQL (the write path benchmarked in bench/collect), executemany elsewhere."""
    if not rows:
        return
    table = model._meta.db_table
    if connection.vendor == "postgresql":
        with connection.cursor() as cur, cur.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
            for row in rows:
                cp.write_row(row)
        return
    placeholders = ", ".join(["%s"] * len(columns))
    with connection.cursor() as cur:
        cur.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})", rows)


def _rollup(cluster: Cluster, hour: datetime) -> None:
    """Rebuild the hour's rollups from its ledger rows, then the day's from its hours (INSERT ... SELECT)."""
    day = hour.date()
    day_start = datetime(day.year, day.month, day.day, tzinfo=hour.tzinfo)
    sums = ", ".join(f"SUM({c})" for c in SUM_COLUMNS)
    cols = ", ".join(SUM_COLUMNS)
    caps = ", ".join(f"SUM({c})" for c in CAPACITY_SUMS)
    capcols = ", ".join(CAPACITY_SUMS)
    keys = "team, namespace, node_group, gpu_model"
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {UsageHour._meta.db_table} (cluster_id, hour, {keys}, {cols}) "
            f"SELECT cluster_id, hour, {keys}, {sums} FROM {PodHour._meta.db_table} "
            f"WHERE cluster_id = %s AND hour = %s GROUP BY cluster_id, hour, {keys}",
            [cluster.pk, hour],
        )
        cur.execute(
            f"INSERT INTO {CapacityHour._meta.db_table} (cluster_id, hour, node_group, gpu_model, {capcols}) "
            f"SELECT cluster_id, hour, node_group, gpu_model, {caps} FROM {NodeHour._meta.db_table} "
            f"WHERE cluster_id = %s AND hour = %s GROUP BY cluster_id, hour, node_group, gpu_model",
            [cluster.pk, hour],
        )
        UsageDay.objects.filter(cluster=cluster, day=day).delete()
        CapacityDay.objects.filter(cluster=cluster, day=day).delete()
        span = [cluster.pk, day, cluster.pk, day_start, day_start + timedelta(days=1)]
        cur.execute(
            f"INSERT INTO {UsageDay._meta.db_table} (cluster_id, day, {keys}, {cols}) "
            f"SELECT %s, %s, {keys}, {sums} FROM {UsageHour._meta.db_table} "
            f"WHERE cluster_id = %s AND hour >= %s AND hour < %s GROUP BY {keys}",
            span,
        )
        cur.execute(
            f"INSERT INTO {CapacityDay._meta.db_table} (cluster_id, day, node_group, gpu_model, {capcols}) "
            f"SELECT %s, %s, node_group, gpu_model, {caps} FROM {CapacityHour._meta.db_table} "
            f"WHERE cluster_id = %s AND hour >= %s AND hour < %s GROUP BY node_group, gpu_model",
            span,
        )


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
    final = covered_until >= hour + timedelta(hours=1)
    pod_rows = _pod_tuples(cluster, hour, result)
    node_rows = _node_tuples(cluster, hour, result)
    with transaction.atomic():
        bucket = Bucket.objects.select_for_update().get(cluster=cluster, hour=hour)
        if bucket.lease_owner != owner:
            raise LeaseLost(f"bucket {cluster.name} {hour.isoformat()} is now held by {bucket.lease_owner!r}")
        for model in (PodHour, NodeHour, UsageHour, CapacityHour):
            model.objects.filter(cluster=cluster, hour=hour).delete()
        _bulk_insert(PodHour, POD_COLUMNS, pod_rows)
        _bulk_insert(NodeHour, NODE_COLUMNS, node_rows)
        _rollup(cluster, hour)
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
