"""bench/collect: one hour bucket of the `large` scenario (10,000 GPUs) end to end.

    python bench/collect.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench]

Exports one hour of `large` (plus the hour before, for history), backfills a real Prometheus, serves
the simulator's Kubernetes API, then times one `collect_cluster` bucket. Reports: bucket time,
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_bench")
    parser.add_argument("--step", type=int, default=30)
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.db
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    from common import ensure_db  # bench/common.py (the script's folder is on sys.path)

    ensure_db(args.db)

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from apps.ingest.services import collect_cluster
    from apps.inventory.models import Cluster
    from apps.usage.models import PodHour
    from apps.usage.services import POD_COLUMNS
    from tests.harness.prometheus import start_prometheus
    from tests.harness.services import free_port, tcp_reachable

    call_command("migrate", verbosity=0)
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    hour = end - timedelta(hours=1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-collect-"))
    om = tmp / "large.om"
    t0 = time.perf_counter()
    # The simulator runs in its own processes so the peak RSS below is the collector's alone.
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "simulate", "export-openmetrics", "--scenario", "large",
                    "--since", hour.isoformat(), "--until", end.isoformat(), "--step", str(args.step),
                    "--out", str(om)], check=True)
    print(f"export: {time.perf_counter() - t0:.1f}s, {om.stat().st_size / 1e6:.0f} MB", flush=True)
    t0 = time.perf_counter()
    prom = start_prometheus(om)
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
        t0 = time.perf_counter()
        report = collect_cluster(cluster, [hour], now=end)
        bucket_seconds = time.perf_counter() - t0
        assert report.ok, report.failed
        rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        # Write path alone: replace the bucket again from already-computed rows, vs raw COPY of them.
        rows = list(PodHour.objects.filter(cluster=cluster).values_list(*POD_COLUMNS))
        n = len(rows)
        from apps.usage import services as ledger

        with connection.cursor() as cur:
            cur.execute("CREATE TEMP TABLE copy_ceiling (LIKE usage_podhour INCLUDING DEFAULTS INCLUDING IDENTITY)")
        t0 = time.perf_counter()
        with connection.cursor() as cur, cur.cursor.copy(
            f"COPY copy_ceiling ({', '.join(POD_COLUMNS)}) FROM STDIN"
        ) as cp:
            for row in rows:
                cp.write_row(row)
        copy_rps = n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        from django.db import transaction

        with transaction.atomic():
            PodHour.objects.filter(cluster=cluster, hour=hour).delete()
            ledger._bulk_insert(PodHour, POD_COLUMNS, rows)
        write_rps = n / (time.perf_counter() - t0)
    finally:
        server.terminate()
        server.wait()
        prom.close()
    print()
    print(f"bucket (1 h of {cluster.name}, 10,000 GPUs): {bucket_seconds:.2f} s end to end")
    print(f"Prometheus: {report.queries} queries, {report.samples} series returned, "
          f"{report.samples / max(report.queries, 1):.0f} per query")
    print(f"pod rows: {n}; write path (delete + COPY in a transaction): {write_rps:,.0f} rows/s; "
          f"raw COPY ceiling: {copy_rps:,.0f} rows/s; ratio {write_rps / copy_rps:.0%}")
    print(f"peak RSS: {rss_peak:.0f} MB (before collection {rss_before:.0f} MB)")


if __name__ == "__main__":
    main()
