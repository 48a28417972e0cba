"""bench/partitions: a year of a 10,000-GPU fleet in the monthly-partitioned ledger; usage reads over a year vs a week.

    python bench/partitions.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench_year] [--weeks 52]
                               [--repeat 5]

1. Creates and migrates the database, then writes the last 7 whole UTC days of ``bench-api-large`` through the
   real write path (``bench/api.py``'s ``fill``: 582,336 pod-hour rows, ~100 s on 2 quiet cores, 457 s loaded).
2. Calls the product's ``ensure_partitions`` from the oldest week on, then copies that week ``--weeks`` times
   further back in SQL (``INSERT ... SELECT`` shifting ``hour``/``day`` by k weeks), one transaction per week,
   for every table a written bucket has: pod and node hours, the hour and day rollups (usage, workload,
   capacity) and the ``Bucket`` rows (ok, final: the ledger takes those hours as collected). Then ``ANALYZE``,
   as autovacuum would eventually. Prints row counts and fill times. A second run reuses the weeks it finds.
3. Times ``compute_usage_report`` (the usage API's selector, uncached: what a never-seen request costs), as a
   caller who sees every team (so capacity totals are computed too), over the last 365 days and over the last
   week, interleaved in the same run, ``--repeat`` times each; prints medians and the ratio year/week.
   Hour- and pod-level answers are bounded (``GPUFINOPS_API_MAX_HOURLY_DAYS``, ``GPUFINOPS_API_MAX_ROWS``):
   those run over a calendar month instead of the year, and the bounded requests are shown being refused.
4. ``EXPLAIN (ANALYZE, BUFFERS)`` of the pod-hour SQL the selector runs for one calendar month: partitions
   scanned vs the table's partitions (partition pruning).

Nothing is asserted: these are measurements (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Tables copied per week: (model label, time column, is the time column a date).
COPIED = [
    ("usage.PodHour", "hour", False),
    ("usage.NodeHour", "hour", False),
    ("usage.UsageHour", "hour", False),
    ("usage.CapacityHour", "hour", False),
    ("usage.UsageDay", "day", True),
    ("usage.WorkloadDay", "day", True),
    ("usage.CapacityDay", "day", True),
    ("usage.Bucket", "hour", False),
]
# Bucket timestamps that move with the hour (so a copied bucket is as complete as the one written).
BUCKET_SHIFTED = ("covered_until", "collected_at")


def _copy_week(cluster_id: int, week_start: datetime, k: int) -> dict[str, int]:
    """Copy the week starting at `week_start` k weeks back, every table in one transaction; rows per table."""
    from django.apps import apps
    from django.db import connection, transaction

    week_end = week_start + timedelta(days=7)
    rows: dict[str, int] = {}
    with transaction.atomic(), connection.cursor() as cur:
        for label, key, is_date in COPIED:
            model = apps.get_model(label)
            table = model._meta.db_table
            columns = [f.column for f in model._meta.concrete_fields if f.column != "id"]
            shifted = {key, *(BUCKET_SHIFTED if label == "usage.Bucket" else ())}
            select = [
                (f'"{c}" - {7 * k}' if is_date and c == key else f"\"{c}\" - interval '{7 * k} days'")
                if c in shifted else f'"{c}"'
                for c in columns
            ]
            bounds = [week_start.date(), week_end.date()] if is_date else [week_start, week_end]
            quoted = ", ".join(f'"{c}"' for c in columns)
            cur.execute(
                f'INSERT INTO "{table}" ({quoted}) '
                f'SELECT {", ".join(select)} FROM "{table}" WHERE cluster_id = %s AND "{key}" >= %s AND "{key}" < %s',
                [cluster_id, *bounds],
            )
            rows[table] = cur.rowcount
    return rows


def fill_year(end: datetime, weeks: int) -> tuple[int, dict[str, float]]:
    """The newest week through the write path, then `weeks` SQL copies of it further back. Returns the cluster id
    and the seconds each phase took (0 for a phase whose rows were already there)."""
    from api import CLUSTER, fill  # bench/api.py: the real write path

    from apps.inventory.models import Cluster
    from apps.usage.models import Bucket
    from apps.usage.partitions import ensure_partitions

    week_start = end - timedelta(days=7)
    times = {}
    t = time.perf_counter()
    fill(week_start, end, 1)
    times["write path, 1 week"] = time.perf_counter() - t
    cluster = Cluster.objects.get(name=CLUSTER)
    oldest = week_start - timedelta(days=7 * weeks)
    t = time.perf_counter()
    created = ensure_partitions(since=oldest)
    times["ensure_partitions"] = time.perf_counter() - t
    print(f"ensure_partitions(since={oldest:%Y-%m-%d}): created {len(created)} partitions", flush=True)
    t = time.perf_counter()
    copied = 0
    for k in range(1, weeks + 1):
        start = week_start - timedelta(days=7 * k)
        if Bucket.objects.filter(cluster=cluster, hour__gte=start, hour__lt=start + timedelta(days=7)).count() == 168:
            continue  # copied by an earlier run (each week is one transaction: all or nothing)
        rows = _copy_week(cluster.pk, week_start, k)
        copied += 1
        print(f"copy: week -{k} ({start:%Y-%m-%d}) {rows['usage_podhour']} pod rows, "
              f"{time.perf_counter() - t:.0f}s", flush=True)
    times[f"SQL copies, {copied} weeks"] = time.perf_counter() - t
    if copied:
        t = time.perf_counter()
        from django.db import connection

        with connection.cursor() as cur:
            for label, _, _ in COPIED:
                cur.execute(f'ANALYZE "{label.split(".")[0]}_{label.split(".")[1].lower()}"')
        times["ANALYZE"] = time.perf_counter() - t
    return cluster.pk, times


def _counts() -> dict[str, int]:
    from django.db import connection

    out = {}
    with connection.cursor() as cur:
        for label, _, _ in COPIED:
            table = f'{label.split(".")[0]}_{label.split(".")[1].lower()}'
            cur.execute(f'SELECT count(*) FROM "{table}"')
            out[table] = cur.fetchone()[0]
    return out


def _time(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def _report(start: datetime, end: datetime, group_by: list[str], **filters: list[str]) -> Callable[[], Any]:
    """One uncached usage answer as a caller who sees every team (capacity included)."""
    from apps.usage.selectors import compute_usage_report

    return lambda: compute_usage_report(start=start, end=end, group_by=group_by, visible_teams=None,
                                        filters=filters or None)


def _refused(start: datetime, end: datetime, group_by: list[str]) -> str:
    """What the selector says about a request beyond its bounds (the API answers it with a 400)."""
    from apps.usage.selectors import TooLarge

    try:
        seconds, report = _time(_report(start, end, group_by))
    except TooLarge as exc:
        return f"refused (400 on {exc.param}): {exc}"
    return f"answered in {seconds * 1000:.0f} ms, {len(report.results)} rows (not refused)"


def _explain(month: datetime, next_month: datetime) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of the pod-hour SQL the selector runs for one calendar month of group_by=pod."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.usage.partitions import partitions

    with CaptureQueriesContext(connection) as ctx:
        _report(month, next_month, ["pod"], team=["team-03"])()
    sql = next(q["sql"] for q in ctx.captured_queries if "usage_podhour" in q["sql"])
    with connection.cursor() as cur:
        cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql)
        plan = cur.fetchone()[0]
        plan = json.loads(plan) if isinstance(plan, str) else plan
        cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        text = [r[0] for r in cur.fetchall()]
    scanned: set[str] = set()

    def walk(node: dict) -> None:
        if node.get("Relation Name", "").startswith("usage_podhour"):
            scanned.add(node["Relation Name"])
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    total = len(partitions(connection, "usage_podhour")) + 1  # + the DEFAULT partition
    print(f"\nEXPLAIN (ANALYZE, BUFFERS), group_by=pod&team=team-03, {month:%Y-%m-%d}..{next_month:%Y-%m-%d}:")
    print(f"  partitions of usage_podhour scanned: {len(scanned)} of {total} ({', '.join(sorted(scanned))})")
    print(f"  execution time {plan[0]['Execution Time']:.1f} ms, planning {plan[0]['Planning Time']:.1f} ms")
    for line in text:
        print("  | " + line)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_bench_year")
    parser.add_argument("--weeks", type=int, default=52, help="SQL copies of the written week, further back")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.db
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    from common import ensure_db

    ensure_db(args.db)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from apps.common.timeutils import month_start

    print(f"load average before the run: {' / '.join(f'{v:.2f}' for v in os.getloadavg())}, {os.cpu_count()} CPUs")
    call_command("migrate", verbosity=0)
    end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    _, times = fill_year(end, args.weeks)
    print("fill: " + ", ".join(f"{name} {s:.1f}s" for name, s in times.items()))
    counts = _counts()
    print("rows: " + ", ".join(f"{t} {n:,}" for t, n in counts.items()))

    year, week = end - timedelta(days=365), end - timedelta(days=7)
    month = month_start(end - timedelta(days=1))  # the last whole calendar month: one partition
    print(f"\nranges: year {year:%Y-%m-%d}..{end:%Y-%m-%d}, week {week:%Y-%m-%d}..{end:%Y-%m-%d}, "
          f"month {month:%Y-%m-%d}..{end:%Y-%m-%d}; bounds: hour/pod level <= {settings.GPUFINOPS_API_MAX_HOURLY_DAYS}"
          f" days, <= {settings.GPUFINOPS_API_MAX_ROWS} rows, range <= {settings.GPUFINOPS_API_MAX_RANGE_DAYS} days")
    # (label, long range, reference week): each pair runs alternately so the machine's load hits both alike.
    cases = [
        ("group_by=team", _report(year, end, ["team"]), _report(week, end, ["team"])),
        ("group_by=team,day", _report(year, end, ["team", "day"]), _report(week, end, ["team", "day"])),
        ("group_by=team,namespace,gpu_model", _report(year, end, ["team", "namespace", "gpu_model"]),
         _report(week, end, ["team", "namespace", "gpu_model"])),
        ("group_by=team,cluster", _report(year, end, ["team", "cluster"]),
         _report(week, end, ["team", "cluster"])),
        ("group_by=workload&team=team-03 (workload-day rollup)", _report(year, end, ["workload"], team=["team-03"]),
         _report(week, end, ["workload"], team=["team-03"])),
        ("MONTH group_by=pod&team=team-03 (pod rows)", _report(month, end, ["pod"], team=["team-03"]),
         _report(week, end, ["pod"], team=["team-03"])),
        ("MONTH group_by=team,hour (hour rollup)", _report(month, end, ["team", "hour"]),
         _report(week, end, ["team", "hour"])),
    ]
    print(f"\nload average before timing: {' / '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{'query':55} {'long p50':>10} {'week p50':>10} {'ratio':>7}  rows long/week  (all runs, ms)")
    for label, long_fn, week_fn in cases:
        long_s, week_s = [], []
        long_fn()  # warm-up: connection, plan and page caches
        week_fn()
        for _ in range(args.repeat):
            s, long_report = _time(long_fn)
            long_s.append(s)
            s, week_report = _time(week_fn)
            week_s.append(s)
        lm, wm = statistics.median(long_s) * 1000, statistics.median(week_s) * 1000
        runs = " ".join(f"{s * 1000:.0f}" for s in long_s) + " | " + " ".join(f"{s * 1000:.0f}" for s in week_s)
        print(f"{label:55} {lm:8.1f}ms {wm:8.1f}ms {lm / wm:6.2f}x  {len(long_report.results)}/"
              f"{len(week_report.results)} {long_report.source}  ({runs})", flush=True)

    print("\nbounded requests:")
    print(f"  year group_by=team,hour: {_refused(year, end, ['team', 'hour'])}")
    print(f"  year group_by=pod: {_refused(year, end, ['pod'])}")
    print(f"  month group_by=pod (every team): {_refused(month, end, ['pod'])}")
    _explain(month, end)
    print(f"\nload average after the run: {' / '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
