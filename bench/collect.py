"""bench/collect: one hour bucket of the `large` scenario (10,000 GPUs) end to end.

    python bench/collect.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench]
                            [--keep-export] [--om FILE --end ISO-HOUR] [--prom-data DIR]

Exports one hour of `large` (that hour only: no hour before it), backfills a real Prometheus, serves
the simulator's Kubernetes API, then times one `collect_cluster` bucket. Reports: bucket time, split into
its phases (Kubernetes snapshot, ledger bucket, findings), with the Prometheus and SQL queries of each;
Prometheus queries and samples per query, ledger rows written per second next to a raw COPY ceiling
measured in the same run (same rows, same table shape, no lease/rollup), and peak RSS.
Nothing here is asserted: these are measurements (see bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class Phases:
    """Wall time, Prometheus queries and SQL statements per phase of the collection, measured by wrapping the
    product's functions from the outside (the product itself carries no timing code)."""

    def __init__(self) -> None:
        self.current = "other"
        self.wall: dict[str, float] = defaultdict(float)
        self.prom: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])  # queries, seconds, series
        self.sql: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # statements, seconds
        self.finding_queries: list[tuple[float, int, str]] = []  # seconds, series, PromQL: where findings wait

    @contextmanager
    def phase(self, name: str):
        outer, self.current = self.current, name
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.wall[name] += time.perf_counter() - t0
            self.current = outer

    def wrap(self, owner, attr: str, name: str) -> None:
        original = getattr(owner, attr)

        def timed(*args, **kwargs):
            with self.phase(name):
                return original(*args, **kwargs)

        setattr(owner, attr, timed)

    def wrap_query(self, cls) -> None:
        original = cls.query

        def timed(source, promql, at):
            t0 = time.perf_counter()
            result = original(source, promql, at)
            entry = self.prom[self.current]
            entry[0] += 1
            entry[1] += time.perf_counter() - t0
            entry[2] += len(result)
            if self.current.startswith("findings"):
                self.finding_queries.append((time.perf_counter() - t0, len(result), promql))
            return result

        cls.query = timed

    def sql_wrapper(self, execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            entry = self.sql[self.current]
            entry[0] += 1
            entry[1] += time.perf_counter() - t0


def _copy_rate(table: str, like: str, rows: list[tuple], *, drop: bool = False) -> float:
    """Rows/s of one COPY of `rows` into a new `table` ("TEMP TABLE x" or "TABLE x") shaped like the pod-hour
    table (`like`: which of its defaults, indexes, constraints), committed; a non-temp table is dropped after."""
    from django.db import connection, transaction

    from apps.usage.services import POD_COLUMNS

    name = table.split()[-1]
    with connection.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {name}")
        cur.execute(f"CREATE {table} (LIKE usage_podhour {like})")
    t0 = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cur, cur.cursor.copy(
        f"COPY {name} ({', '.join(POD_COLUMNS)}) FROM STDIN"
    ) as cp:
        for row in rows:
            cp.write_row(row)
    rate = len(rows) / (time.perf_counter() - t0)
    if drop:
        with connection.cursor() as cur:
            cur.execute(f"DROP TABLE {name}")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_bench")
    parser.add_argument("--step", type=int, default=30)
    parser.add_argument("--om", type=Path, help="reuse this export (from --keep-export) instead of exporting again")
    parser.add_argument("--end", help="end of the bucket (ISO, whole hour): the one the --om export covers")
    parser.add_argument("--keep-export", action="store_true", help="keep the OpenMetrics file (several GB)")
    parser.add_argument("--prom-data", type=Path,
                        help="Prometheus data dir kept between runs: backfilled only when empty (same --end!)")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.db
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    from common import ensure_db  # bench/common.py (the script's folder is on sys.path)

    ensure_db(args.db)

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from apps.findings import services as findings_services
    from apps.findings.models import FindingHour
    from apps.ingest import services as ingest_services
    from apps.ingest.collectors.prometheus import PrometheusSource
    from apps.ingest.services import collect_cluster
    from apps.inventory.models import Cluster
    from apps.usage import services as usage_services
    from apps.usage.models import PodHour
    from apps.usage.services import POD_COLUMNS
    from tests.harness.prometheus import PrometheusServer
    from tests.harness.services import free_port, tcp_reachable

    call_command("migrate", verbosity=0)
    end = datetime.fromisoformat(args.end) if args.end else datetime.now(UTC).replace(minute=0, second=0,
                                                                                       microsecond=0)
    hour = end - timedelta(hours=1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-collect-"))
    om = args.om or tmp / "large.om"
    if not args.om:
        t0 = time.perf_counter()
        # The simulator runs in its own processes so the peak RSS below is the collector's alone.
        subprocess.run([sys.executable, str(ROOT / "manage.py"), "simulate", "export-openmetrics", "--scenario",
                        "large", "--since", hour.isoformat(), "--until", end.isoformat(), "--step", str(args.step),
                        "--out", str(om)], check=True)
        print(f"export: {time.perf_counter() - t0:.1f}s, {om.stat().st_size / 1e6:.0f} MB to {om}", flush=True)
    t0 = time.perf_counter()
    # promtool is run here rather than by the test harness's backfill, whose 300 s timeout an 8.7 GB export
    # overruns on a loaded 2-core machine (bench set-up, not collection).
    data_dir = args.prom_data or Path(tempfile.mkdtemp(prefix="gpufinops-prometheus-")) / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    prom = PrometheusServer(data_dir, port=free_port())
    try:
        if not any(data_dir.iterdir()):
            subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(data_dir)],
                           check=True, stdout=subprocess.DEVNULL)
        if not (args.om or args.keep_export):
            om.unlink()  # several GB of /tmp per run otherwise
        prom.start(timeout=300)
    except BaseException:
        if args.prom_data:
            prom.stop()
        else:
            prom.close()
        raise
    print(f"promtool backfill + Prometheus ready: {time.perf_counter() - t0:.1f}s", flush=True)
    kubeconfig = tmp / "kubeconfig"
    port = free_port()
    server = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "simulate", "serve", "--scenario", "large",
                               "--at", end.isoformat(), "--port", str(port), "--kubeconfig-out", str(kubeconfig)])
    deadline = time.monotonic() + 300
    while not (kubeconfig.exists() and tcp_reachable("127.0.0.1", port)):
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("simulator did not start")
        time.sleep(0.5)
    try:
        Cluster.objects.filter(name="bench-large").delete()
        cluster = Cluster.objects.create(name="bench-large", prometheus_url=prom.url, kubeconfig_path=str(kubeconfig))
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        # Phases, by the names collect_cluster calls them through (module attributes looked up at call time).
        phases = Phases()
        phases.wrap(ingest_services, "read_snapshot", "k8s read")
        phases.wrap(ingest_services, "record_snapshot", "k8s record")
        phases.wrap(usage_services, "collect_bucket", "ledger bucket")
        phases.wrap(ingest_services, "record_findings", "findings")
        # Inside findings: the writes apart from computing them (Prometheus queries are counted on their own).
        phases.wrap(findings_services, "replace_hour", "findings: replace_hour")
        phases.wrap(findings_services, "refresh_snapshot_kinds", "findings: snapshot kinds")
        phases.wrap_query(PrometheusSource)
        load_before = os.getloadavg()
        t0 = time.perf_counter()
        with connection.execute_wrapper(phases.sql_wrapper):
            report = collect_cluster(cluster, [hour], now=end)
        bucket_seconds = time.perf_counter() - t0
        load_after = os.getloadavg()
        if not report.ok or report.findings_failed:
            print(f"collection not clean: failed={report.failed} degraded={report.degraded} "
                  f"not_attempted={report.not_attempted} findings_failed={report.findings_failed}")
        n_findings = FindingHour.objects.filter(cluster=cluster, hour=hour).count()
        rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        # Write path alone: replace the bucket again from already-computed rows, vs raw COPY of them.
        rows = list(PodHour.objects.filter(cluster=cluster).values_list(*POD_COLUMNS))
        n = len(rows)
        from apps.usage import services as ledger

        copy_rps = _copy_rate("TEMP TABLE copy_ceiling", "INCLUDING DEFAULTS INCLUDING IDENTITY", rows)
        # The same COPY into a table with the ledger table's indexes and constraints (the unique key of issue 10
        # and the query indexes): what any write of these rows into the ledger must pay at least.
        indexed_rps = _copy_rate("TEMP TABLE copy_ceiling_indexed", "INCLUDING ALL", rows)
        # Temp tables skip the write-ahead log; the ledger cannot. The same COPY into an ordinary (logged) table
        # with the ledger's indexes, committed, is the ceiling of a durable write of these rows.
        logged_rps = _copy_rate("TABLE bench_copy_ceiling_logged", "INCLUDING ALL", rows, drop=True)
        t0 = time.perf_counter()
        from django.db import transaction

        with transaction.atomic():
            PodHour.objects.filter(cluster=cluster, hour=hour).delete()
            ledger._bulk_insert(PodHour, POD_COLUMNS, rows)
        write_rps = n / (time.perf_counter() - t0)
    finally:
        server.terminate()
        server.wait()
        if args.prom_data:
            prom.stop()  # a kept data dir serves the next run
        else:
            prom.close()
    print()
    print(f"bucket (1 h of {cluster.name}, 10,000 GPUs): {bucket_seconds:.2f} s end to end")
    # Nested phases (findings: ...) are inside "findings"; "other" is collect_cluster's own glue.
    print(f"{'phase':<26}{'wall s':>8}{'prom q':>8}{'prom s':>8}{'series':>9}{'sql q':>8}{'sql s':>8}")
    accounted = sum(v for k, v in phases.wall.items() if ":" not in k)
    phases.wall["other"] = bucket_seconds - accounted
    for name in ["k8s read", "k8s record", "ledger bucket", "findings", "findings: replace_hour",
                 "findings: snapshot kinds", "other"]:
        pq, ps, pn = phases.prom.get(name, [0, 0.0, 0])
        sq, ss = phases.sql.get(name, [0, 0.0])
        print(f"{name:<26}{phases.wall.get(name, 0.0):>8.2f}{pq:>8}{ps:>8.2f}{pn:>9}{sq:>8}{ss:>8.2f}")
    f_wall = phases.wall.get("findings", 0.0)
    print(f"findings: {f_wall:.2f} s of the bucket ({f_wall / bucket_seconds:.0%}), {n_findings} finding rows "
          f"for the hour; bucket without findings {bucket_seconds - f_wall:.2f} s")
    print("findings' Prometheus queries, slowest first (s, series, PromQL):")
    for seconds, series, promql in sorted(phases.finding_queries, reverse=True):
        print(f"  {seconds:6.2f} {series:>6}  {promql[:150]}")
    print(f"Prometheus: {report.queries} queries, {report.samples} series returned, "
          f"{report.samples / max(report.queries, 1):.0f} per query")
    print(f"pod rows: {n}; write path (delete + COPY in a transaction): {write_rps:,.0f} rows/s; "
          f"raw COPY ceiling: {copy_rps:,.0f} rows/s; ratio {write_rps / copy_rps:.0%}; raw COPY into a table "
          f"with the ledger's indexes: {indexed_rps:,.0f} rows/s; ratio {write_rps / indexed_rps:.0%}; the same into "
          f"a logged table, committed: {logged_rps:,.0f} rows/s; ratio {write_rps / logged_rps:.0%}")
    print(f"peak RSS: {rss_peak:.0f} MB (before collection {rss_before:.0f} MB)")
    print("load average before / after the bucket: " + " ".join(f"{v:.2f}" for v in load_before) + " / "
          + " ".join(f"{v:.2f}" for v in load_after) + f" ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
