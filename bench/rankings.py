"""bench/rankings: the fleet-wide workload ranking over a week and a month of `large` (10,000 GPUs), first and
10th page, on the workloads page, the overview and `/api/v1/rankings/` (issue 24).

    python bench/rankings.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench_rank] [--weeks 5] [-n 3]
                             [--reuse]

1. Creates and migrates the database, writes the last 7 whole UTC days of ``bench-api-large`` through the real write
   path (``bench/api.py``'s ``fill``: 582,336 pod-hours, the hour and day rollups, ``WorkloadDay``), then copies
   that week ``--weeks - 1`` times further back in SQL (every table a bucket writes, one transaction per week, as
   ``bench/partitions.py`` does) with the workload, pod and pod uid names suffixed ``~k``: a real month has new
   jobs every week, so the month's ranking has ~4x the week's workloads (a copy under the same names would not).
   The ISO-week rollup (``WorkloadWeek``) of the copied days is rebuilt from them, then ``ANALYZE``. A second run
   reuses the weeks it finds; ``--reuse`` skips the fill altogether and times the data as it is (the periods end
   at the last whole day in the database, so it re-runs on kept data another day).
2. Server time (in-process, Django's test Client, DEBUG off, persistent connection, the cache cleared before each
   request, as bench/pages.py) of, as staff (every team, no filter), for the last 7 days, the last 30 days, and
   30 days starting and ending inside a day (partial days from the hour rows): the workloads page sorted by idle
   cost (page 1 and page 10), the overview (its top idle workloads), ``/api/v1/rankings/`` with ``limit=50``
   (``offset=0`` and ``offset=450``, token auth) and the selector alone (``rank``). Medians of ``-n`` after one
   warm-up; the load average before and after each window.

Nothing is asserted: these are measurements (bench/README.md).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

RENAMED = {"usage.PodHour": ("workload", "pod", "pod_uid"), "usage.WorkloadDay": ("workload",)}


def load() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def _copy_week(cluster_id: int, week_start: datetime, k: int) -> int:
    """The week at `week_start` copied k weeks back (names of workloads and pods suffixed); pod rows copied."""
    from django.apps import apps
    from django.db import connection, transaction
    from partitions import BUCKET_SHIFTED, COPIED  # bench/partitions.py

    week_end = week_start + timedelta(days=7)
    pods = 0
    with transaction.atomic(), connection.cursor() as cur:
        for label, key, is_date in COPIED:
            model = apps.get_model(label)
            columns = [f.column for f in model._meta.concrete_fields if f.column != "id"]
            shifted = {key, *(BUCKET_SHIFTED if label == "usage.Bucket" else ())}
            renamed = RENAMED.get(label, ())
            select = []
            for c in columns:
                if c in shifted:
                    select.append(f'"{c}" - {7 * k}' if is_date and c == key else f"\"{c}\" - interval '{7 * k} days'")
                elif c in renamed:
                    select.append(f"\"{c}\" || '~{k}'")
                else:
                    select.append(f'"{c}"')
            bounds = [week_start.date(), week_end.date()] if is_date else [week_start, week_end]
            table = model._meta.db_table
            cur.execute(
                f'INSERT INTO "{table}" ({", ".join(f"{chr(34)}{c}{chr(34)}" for c in columns)}) '
                f'SELECT {", ".join(select)} FROM "{table}" WHERE cluster_id = %s AND "{key}" >= %s AND "{key}" < %s',
                [cluster_id, *bounds],
            )
            if label == "usage.PodHour":
                pods = cur.rowcount
    return pods


def fill_weeks(end: datetime, weeks: int) -> None:
    from api import CLUSTER, fill  # bench/api.py: the real write path
    from django.db import connection, transaction
    from partitions import COPIED

    from apps.common.timeutils import iso_week_start
    from apps.inventory.models import Cluster
    from apps.usage.models import Bucket, WorkloadWeek
    from apps.usage.partitions import ensure_partitions
    from apps.usage.services import lock_cluster, rebuild_workload_week

    week_start = end - timedelta(days=7)
    t = time.perf_counter()
    fill(week_start, end, 1)
    print(f"write path, 1 week: {time.perf_counter() - t:.0f}s (load {load()})", flush=True)
    cluster = Cluster.objects.get(name=CLUSTER)
    ensure_partitions(since=week_start - timedelta(days=7 * weeks))
    copied = 0
    for k in range(1, weeks):
        start = week_start - timedelta(days=7 * k)
        if Bucket.objects.filter(cluster=cluster, hour__gte=start, hour__lt=start + timedelta(days=7)).count() == 168:
            continue
        t = time.perf_counter()
        pods = _copy_week(cluster.pk, week_start, k)
        copied += 1
        print(f"copy: week -{k} ({start:%Y-%m-%d}) {pods:,} pod rows, {time.perf_counter() - t:.0f}s (load {load()})",
              flush=True)
    if copied:
        t = time.perf_counter()
        # The copies are Tuesday-to-Monday weeks of days: the ISO-week rollup is summed again from them.
        monday = iso_week_start(week_start - timedelta(days=7 * (weeks - 1)))
        while monday < end:
            with transaction.atomic():
                lock_cluster(cluster)
                rebuild_workload_week(cluster, monday.date())
            monday += timedelta(days=7)
        print(f"WorkloadWeek rebuilt from the copied days: {time.perf_counter() - t:.0f}s", flush=True)
        t = time.perf_counter()
        with connection.cursor() as cur:
            for table in [*(f'{label.split(".")[0]}_{label.split(".")[1].lower()}' for label, _, _ in COPIED),
                          WorkloadWeek._meta.db_table]:
                cur.execute(f'ANALYZE "{table}"')
        print(f"ANALYZE {time.perf_counter() - t:.0f}s", flush=True)


def timed(fn: Callable[[], object], n: int) -> tuple[float, float, object]:
    """Median and max milliseconds of n calls after one warm-up (the cache cleared before each), the last result."""
    from django.core.cache import cache

    cache.clear()
    result = fn()
    samples = []
    for _ in range(n):
        cache.clear()
        t = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples), max(samples), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_bench_rank")
    parser.add_argument("--weeks", type=int, default=5, help="weeks of data: one written, the rest SQL copies")
    parser.add_argument("-n", type=int, default=3, help="timed requests per case")
    parser.add_argument("--reuse", action="store_true",
                        help="time only, on the data already in --db (its last whole day is the period's end)")
    args = parser.parse_args()
    os.environ.update({
        "DATABASE_URL": args.db, "DEBUG": "0", "SECRET_KEY": "bench-rankings-" + "x" * 50,
        "ALLOWED_HOSTS": "testserver", "SECURE_SSL_REDIRECT": "0", "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0", "DB_CONN_MAX_AGE": "60", "LOG_LEVEL": "WARNING",
    })
    os.environ.pop("CACHE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    from common import ensure_db  # bench/common.py

    ensure_db(args.db)
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from apps.accounts.services import create_api_token
    from apps.usage.selectors import rank

    logging.getLogger("django.request").setLevel(logging.ERROR)
    print(f"load average before the run: {load()}, {os.cpu_count()} CPUs", flush=True)
    call_command("migrate", verbosity=0)
    if args.reuse:  # the timing alone, re-runnable on the kept data whatever the day
        from django.db.models import Max

        from apps.usage.models import Bucket

        latest = Bucket.objects.aggregate(h=Max("hour"))["h"]
        if latest is None:
            sys.exit(f"--reuse: no data in {args.db}; run without --reuse first")
        end = (latest + timedelta(hours=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        print(f"reusing the data in {args.db}: periods end {end:%Y-%m-%d}", flush=True)
    else:
        end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        fill_weeks(end, args.weeks)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM usage_podhour")
        pods = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM usage_workloadday")
        wdays = cur.fetchone()[0]
    print(f"rows: usage_podhour {pods:,}, usage_workloadday {wdays:,}", flush=True)

    staff = User.objects.filter(username="bench-staff").first() or User.objects.create_user(
        "bench-staff", password="x", is_staff=True)
    page_client = Client(raise_request_exception=False)
    page_client.force_login(staff)
    api_client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {create_api_token(staff, 1)}")

    def fmt(t: datetime) -> str:
        return t.strftime("%Y-%m-%dT%H:%MZ")

    windows = [("week (7 days)", end - timedelta(days=7), end), ("month (30 days)", end - timedelta(days=30), end),
               ("month, partial edges", end - timedelta(days=30, hours=-7), end - timedelta(hours=5))]
    print("\n| window | case | median ms | max ms | status / rows |\n|---|---|---|---|---|")
    for label, start, stop in windows:
        q = f"start={fmt(start)}&end={fmt(stop)}"
        before = load()
        first = rank(level="workload", start=start, end=stop, visible_teams=None, limit=1)
        cases: list[tuple[str, Callable[[], object]]] = [
            ("selector `rank`, page 1", lambda s=start, e=stop: rank(level="workload", start=s, end=e,
                                                                     visible_teams=None, limit=50)),
            ("selector `rank`, page 10", lambda s=start, e=stop: rank(level="workload", start=s, end=e,
                                                                      visible_teams=None, limit=50, offset=450)),
            ("/workloads/ page 1", lambda q=q: page_client.get(f"/workloads/?{q}")),
            ("/workloads/ page 10", lambda q=q: page_client.get(f"/workloads/?{q}&page=10")),
            ("/ (overview)", lambda q=q: page_client.get(f"/?{q}")),
            ("/api/v1/rankings/ offset 0", lambda q=q: api_client.get(f"/api/v1/rankings/?{q}&limit=50")),
            ("/api/v1/rankings/ offset 450", lambda q=q: api_client.get(f"/api/v1/rankings/?{q}&limit=50&offset=450")),
        ]
        for name, fn in cases:
            median, worst, result = timed(fn, args.n)
            status = getattr(result, "status_code", None)
            what = f"{status}" if status is not None else f"{len(result.rows)} of {result.count:,}"  # type: ignore[attr-defined]
            print(f"| {label} | {name} | {median:.0f} | {worst:.0f} | {what} |", flush=True)
        print(f"| {label} | ({first.count:,} workloads; load {before} before, {load()} after) | | | |", flush=True)


if __name__ == "__main__":
    main()
