"""The ledger invariants of docs/numbers.md ("Invariants the tests hold the ledger to"), checked in
SQL aggregates so they run as fast on a week of 10,000 GPUs (bench/invariants.py) as on the demo (the collection
tests). Each check counts the rows or groups that break it: all zeros means the ledger holds.

1. per pod and bucket, for every signal: allocated = working + idle + unmeasured (1e-9);
2. per node and bucket: allocated <= capacity and allocated + unallocated = capacity;
3. team totals add up to the cluster total: per (cluster, hour) the pod rows, the node rows and the team rollup
   hold the same allocated GPU-hours, and per (cluster, day) the day rollup holds the sum of its hours;
5. no bucket counted twice (one Bucket per cluster and hour, and no ledger row without its bucket).
Invariant 4 (re-collecting changes nothing) is a comparison of two states: the collection tests do it.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection

from apps.usage.activity import SIGNALS

EPS = 1e-9
# Sums of many float rows: the rollups add in another order than the rows, so allow a relative rounding slack.
SUM_EPS = 1e-6


def _count(sql: str, params: Iterable[object] = ()) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        return int(cursor.fetchone()[0] or 0)


def _cluster_filter(cluster_ids: list[int] | None, column: str = "cluster_id") -> tuple[str, list[object]]:
    if cluster_ids is None:
        return "1=1", []
    return f"{column} IN ({', '.join(['%s'] * len(cluster_ids))})", list(cluster_ids)


def ledger_violations(cluster_ids: list[int] | None = None) -> dict[str, int]:
    """How many rows (or groups) break each invariant, for the given clusters (every cluster when None)."""
    where, params = _cluster_filter(cluster_ids)
    out: dict[str, int] = {}
    for s in SIGNALS:
        out[f"pod allocated = working + idle + unmeasured ({s})"] = _count(
            f"SELECT COUNT(*) FROM usage_podhour WHERE {where} AND "
            f"ABS(allocated_gpu_hours - (working_{s} + idle_{s} + unmeasured_{s})) > {EPS}", params)
    out["node allocated <= capacity"] = _count(
        f"SELECT COUNT(*) FROM usage_nodehour WHERE {where} AND allocated_gpu_hours > capacity_gpu_hours + {EPS}",
        params)
    out["node allocated + unallocated = capacity"] = _count(
        f"SELECT COUNT(*) FROM usage_nodehour WHERE {where} AND "
        f"ABS(allocated_gpu_hours + unallocated_gpu_hours - capacity_gpu_hours) > {EPS}", params)
    # Per (cluster, hour): pods, nodes and the team rollup agree (a full outer join of the three sums).
    out["pods = nodes = teams per cluster and hour"] = _count(
        f"""
        WITH p AS (SELECT cluster_id, hour, SUM(allocated_gpu_hours) a FROM usage_podhour WHERE {where}
                   GROUP BY cluster_id, hour),
             n AS (SELECT cluster_id, hour, SUM(allocated_gpu_hours) a FROM usage_nodehour WHERE {where}
                   GROUP BY cluster_id, hour),
             t AS (SELECT cluster_id, hour, SUM(allocated_gpu_hours) a FROM usage_usagehour WHERE {where}
                   GROUP BY cluster_id, hour),
             k AS (SELECT cluster_id, hour FROM p UNION SELECT cluster_id, hour FROM n
                   UNION SELECT cluster_id, hour FROM t)
        SELECT COUNT(*) FROM k
          LEFT JOIN p ON p.cluster_id = k.cluster_id AND p.hour = k.hour
          LEFT JOIN n ON n.cluster_id = k.cluster_id AND n.hour = k.hour
          LEFT JOIN t ON t.cluster_id = k.cluster_id AND t.hour = k.hour
         WHERE ABS(COALESCE(p.a, 0) - COALESCE(n.a, 0)) > {SUM_EPS} * (1 + ABS(COALESCE(p.a, 0)))
            OR ABS(COALESCE(p.a, 0) - COALESCE(t.a, 0)) > {SUM_EPS} * (1 + ABS(COALESCE(p.a, 0)))
        """, params * 3)
    # Per (cluster, day): the day rollup is the sum of its hours (UTC days; the ledger stores UTC).
    day_of = "DATE(hour)" if connection.vendor == "sqlite" else "CAST(hour AT TIME ZONE 'UTC' AS DATE)"
    day_col = "day" if connection.vendor != "sqlite" else "DATE(day)"
    out["day rollup = sum of its hours"] = _count(
        f"""
        WITH h AS (SELECT cluster_id, {day_of} d, SUM(allocated_gpu_hours) a FROM usage_usagehour WHERE {where}
                   GROUP BY cluster_id, {day_of}),
             d AS (SELECT cluster_id, {day_col} d, SUM(allocated_gpu_hours) a FROM usage_usageday WHERE {where}
                   GROUP BY cluster_id, {day_col}),
             k AS (SELECT cluster_id, d FROM h UNION SELECT cluster_id, d FROM d)
        SELECT COUNT(*) FROM k
          LEFT JOIN h ON h.cluster_id = k.cluster_id AND h.d = k.d
          LEFT JOIN d ON d.cluster_id = k.cluster_id AND d.d = k.d
         WHERE ABS(COALESCE(h.a, 0) - COALESCE(d.a, 0)) > {SUM_EPS} * (1 + ABS(COALESCE(h.a, 0)))
        """, params * 2)
    out["one bucket per cluster and hour"] = _count(
        f"SELECT COUNT(*) FROM (SELECT cluster_id, hour FROM usage_bucket WHERE {where} "
        "GROUP BY cluster_id, hour HAVING COUNT(*) > 1) x", params)
    out["no ledger hour without its bucket"] = _count(
        f"""SELECT COUNT(*) FROM (SELECT DISTINCT cluster_id, hour FROM usage_podhour WHERE {where}) p
             WHERE NOT EXISTS (SELECT 1 FROM usage_bucket b WHERE b.cluster_id = p.cluster_id AND b.hour = p.hour)
        """, params)
    return out


def ledger_size(cluster_ids: list[int] | None = None) -> dict[str, int]:
    """Rows checked, to print beside the violations."""
    where, params = _cluster_filter(cluster_ids)
    return {table: _count(f"SELECT COUNT(*) FROM {table} WHERE {where}", params)
            for table in ("usage_bucket", "usage_podhour", "usage_nodehour", "usage_usagehour", "usage_usageday")}
