"""Benchmark: export one hour of the `large` scenario (10,000 GPUs) and load it into Prometheus.

    python bench/simulator_export.py [--step 30] [--keep] [--no-ksm]

Prints: export time, file size, samples, series count (count({__name__=~".+"}) in Prometheus),
promtool backfill time and Prometheus start time. A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--step", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-ksm", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the OpenMetrics file and TSDB")
    args = ap.parse_args()

    from devtools.simulator.exposition import dcgm_samples, export_openmetrics, stderr_progress
    from devtools.simulator.model import floor_hour
    from devtools.simulator.scenarios import build_scenario
    from tests.harness.prometheus import PrometheusServer
    from tests.harness.services import free_port

    end = floor_hour(datetime.now(UTC))
    since = end - timedelta(hours=1)
    work = Path(tempfile.mkdtemp(prefix="bench-simexport-"))
    om = work / "large-1h.om"
    try:
        t = time.perf_counter()
        sc = build_scenario("large", seed=args.seed, end=end)
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        one = dcgm_samples(sc, since + timedelta(minutes=7))
        instant_s = time.perf_counter() - t
        print(
            f"build large: {build_s:.2f}s ({len(sc.nodes)} nodes, {sum(n.gpus for n in sc.nodes)} GPUs, "
            f"{len(sc.pods)} pods over 7 days); one dcgm_samples instant: {instant_s:.2f}s, {len(one):,} samples"
        )
        stats = export_openmetrics(
            sc,
            since.timestamp(),
            end.timestamp(),
            om,
            step=args.step,
            include_ksm=not args.no_ksm,
            progress=stderr_progress,
        )
        print(
            f"export 1h @ {args.step}s: {stats['seconds']:.1f}s, {stats['bytes'] / 1e9:.2f} GB, "
            f"{stats['samples']:,} samples, {stats['series']:,} series written"
        )
        data = work / "data"
        data.mkdir()
        server = PrometheusServer(data, port=free_port())
        t = time.perf_counter()
        server.backfill(om)
        backfill_s = time.perf_counter() - t
        tsdb_bytes = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
        t = time.perf_counter()
        server.start(timeout=300)
        start_s = time.perf_counter() - t
        try:
            n = server.wait_for('count({__name__=~".+"})', at=end.timestamp() - 30, timeout=120)
            count = int(float(n[0]["value"][1]))
            dcgm = server.query('count({__name__=~"DCGM_.+"})', at=end.timestamp() - 30)
            t = time.perf_counter()
            q = server.query('avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod!=""}[1h])', at=end.timestamp())
            q_s = time.perf_counter() - t
        finally:
            server.stop()
        print(
            f"promtool backfill: {backfill_s:.1f}s (TSDB {tsdb_bytes / 1e6:.0f} MB); prometheus ready in {start_s:.1f}s"
        )
        print(
            f"series in Prometheus: {count:,} (DCGM {int(float(dcgm[0]['value'][1])):,}); "
            f'avg_over_time(SM_ACTIVE{{pod!=""}}[1h]): {len(q):,} series in {q_s:.2f}s'
        )
        if args.keep:
            print(f"kept in {work}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
