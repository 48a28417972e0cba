"""bench/fanout: ten simulated clusters of 1,000 GPUs collected by two Celery workers in one 5-minute cycle.

    python bench/fanout.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench_fanout]
                           [--broker redis://127.0.0.1:6379/7] [--clusters 10] [--nodes 125] [--cycles 2]

Starts one `simulate serve` process per cluster (`large` cut to --nodes 8-GPU nodes, a distinct seed each:
its Kubernetes API and its own simulated Prometheus), adds the clusters to a dedicated database, starts two
`celery -A gpufinops worker -c 1` processes on a dedicated Redis db, then sends what beat sends every 5 minutes
(`apps.ingest.tasks.collect_all_clusters_task`, by name) and waits until every cluster's collection run has
been recorded. Reports per cycle: wall time against the 300 s budget, per-cluster run time, which worker ran
which cluster, Prometheus queries, worker CPU and peak RSS, and the CPU the simulators spent answering.
Nothing here is asserted: these are measurements (see bench/README.md).

Why the simulator's Prometheus and not one real Prometheus: the collector's queries carry no cluster matcher
(each cluster has its own Prometheus URL), so ten clusters backfilled into one real Prometheus would be read
as one fleet by every cluster. Ten real Prometheus servers would need ten promtool backfills; the simulator's
query API answers the same queries with the same results (tests/devtools/test_prometheus_against_real.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from common import children, cpu_seconds  # bench/common.py (the script's folder is on sys.path)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUDGET = 300.0  # seconds: beat sends the collection every 5 minutes
SUCCEEDED = re.compile(r"Task apps\.ingest\.tasks\.collect_cluster_task\[([0-9a-f-]+)\] succeeded in ([\d.]+)s")


# ---- /proc readings (no psutil on the machine) ----

def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_bench_fanout")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/7", help="broker and result backend (flushed)")
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=125, help="8-GPU nodes per cluster (125 = 1,000 GPUs)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes, concurrency 1 each")
    parser.add_argument("--cycles", type=int, default=2, help="cycles sent back to back (the first is first contact)")
    parser.add_argument("--scrape-seconds", type=int, default=30, help="the simulated Prometheus' scrape interval")
    parser.add_argument(
        "--first-run-hours", type=int, default=1,
        help="GPUFINOPS_FIRST_RUN_HOURS of the workers: 1 makes cycle 1 the last ended hour + the current one "
             "(the product default, 24, makes it a day's catch-up instead)",
    )
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.db
    os.environ["CELERY_BROKER_URL"] = os.environ["CELERY_RESULT_BACKEND"] = args.broker
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    from common import ensure_db  # bench/common.py (the script's folder is on sys.path)

    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC, {os.cpu_count()} cores; {_load()} (start)", flush=True)
    ensure_db(args.db)

    import django

    django.setup()
    import redis
    from django.core.management import call_command
    from django.utils import timezone

    from apps.inventory.models import Cluster
    from apps.monitoring.models import CollectionRun
    from apps.usage.models import Bucket
    from gpufinops.celery import app
    from tests.harness.services import free_port, tcp_reachable
    from tests.harness.worker import CeleryWorker

    call_command("migrate", verbosity=0)
    names = [f"fanout-{i:02d}" for i in range(args.clusters)]
    # The periodic task collects every cluster of the database, so this dedicated one holds only this run's:
    # a previous run's clusters (their simulators gone) would be collected, and fail, alongside.
    Cluster.objects.all().delete()
    broker = redis.Redis.from_url(args.broker)
    broker.flushdb()  # a dedicated db: leftover tasks of an interrupted run would otherwise run first

    tmp = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    now = datetime.now(UTC)
    # The simulators follow the wall clock; their scenarios end 2 hours ahead so a run crossing the hour
    # still finds data, and start 2 days back (enough history for the hours collected here).
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=2)
    sims: list[subprocess.Popen] = []
    workers: list[CeleryWorker] = []
    try:
        t0 = time.perf_counter()
        endpoints = []
        for i, _name in enumerate(names):
            port, prom_port = free_port(), free_port()
            kubeconfig = tmp / f"kubeconfig-{i}"
            sims.append(subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "simulate", "serve", "--scenario", "large",
                 "--large-nodes", str(args.nodes), "--seed", str(i + 1), "--days", "2", "--end", end.isoformat(),
                 "--port", str(port), "--prometheus-port", str(prom_port), "--kubeconfig-out", str(kubeconfig),
                 "--scrape-seconds", str(args.scrape_seconds)],
                cwd=ROOT, stdout=subprocess.DEVNULL, start_new_session=True,
            ))
            endpoints.append((port, prom_port, kubeconfig))
        deadline = time.monotonic() + 300
        for sim, (port, prom_port, kubeconfig) in zip(sims, endpoints, strict=True):
            while not (kubeconfig.exists() and tcp_reachable("127.0.0.1", port) and tcp_reachable("127.0.0.1",
                                                                                                    prom_port)):
                if sim.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("a simulator did not start")
                time.sleep(0.2)
        print(f"{args.clusters} simulators ({args.nodes * 8} GPUs each) up in {time.perf_counter() - t0:.1f}s",
              flush=True)
        clusters = [
            Cluster.objects.create(name=name, prometheus_url=f"http://127.0.0.1:{prom_port}",
                                   kubeconfig_path=str(kubeconfig))
            for name, (_port, prom_port, kubeconfig) in zip(names, endpoints, strict=True)
        ]
        by_id = {c.pk: c.name for c in clusters}

        worker_env = {
            "DEBUG": "0",  # production settings: DEBUG would keep every SQL query in the worker's memory
            "SECRET_KEY": "bench-fanout-" + "x" * 50,
            "LOG_FORMAT": "plain",
            "LOG_LEVEL": "INFO",  # Celery's "Task ... succeeded" lines say which worker ran which cluster
            "GPUFINOPS_FIRST_RUN_HOURS": str(args.first_run_hours),
        }
        for i in range(args.workers):
            worker = CeleryWorker(broker_url=args.broker, database_url=args.db, log_path=tmp / f"worker-{i + 1}.log",
                                  concurrency=1, extra_env=worker_env)
            worker.hostname = f"fanout-w{i + 1}@localhost"
            workers.append(worker.start())
        print(f"{args.workers} workers up (logs in {tmp})", flush=True)

        seen: set[bytes] = set()
        for cycle in range(1, args.cycles + 1):
            _cycle(cycle, app, broker, seen, workers, sims, by_id, timezone, CollectionRun, Bucket)
    finally:
        for worker in workers:
            worker.stop()
        for sim in sims:
            sim.terminate()
        for sim in sims:
            try:
                sim.wait(timeout=20)
            except subprocess.TimeoutExpired:
                sim.kill()
                sim.wait()
        broker.flushdb()
    print(f"\nall processes stopped; {_load()} (end)")


def _cycle(cycle, app, broker, seen, workers, sims, by_id, timezone, CollectionRun, Bucket) -> None:  # noqa: N803
    """Send the periodic task once and wait until every cluster has a collection run recorded after it."""
    pool = {w.hostname: [w.pid, *children(w.pid)] for w in workers}
    cpu_before = {p: cpu_seconds(p) for pids in pool.values() for p in pids}
    sim_before = sum(cpu_seconds(s.pid) for s in sims)
    print(f"\n== cycle {cycle}: {_load()} (before)", flush=True)
    sent_at = timezone.now()
    t0 = time.perf_counter()
    app.send_task("apps.ingest.tasks.collect_all_clusters_task")  # exactly what beat sends every 5 minutes
    peak_load = 0.0
    while True:
        runs = list(CollectionRun.objects.filter(cluster_id__in=by_id, started_at__gte=sent_at))
        peak_load = max(peak_load, os.getloadavg()[0])
        if len({r.cluster_id for r in runs}) == len(by_id):
            break
        if time.perf_counter() - t0 > 900:
            raise SystemExit(f"cycle {cycle}: only {len(runs)} of {len(by_id)} clusters collected after 900 s")
        time.sleep(0.25)
    polled = time.perf_counter() - t0
    print(f"   {_load()} (after); highest 1-minute load seen during the cycle {peak_load:.2f}")
    wall = (max(r.finished_at for r in runs) - sent_at).total_seconds()
    pool = {w.hostname: [w.pid, *children(w.pid)] for w in workers}
    # Per process, main and pool child apart: the child collects, the main process consumes and acks.
    cpu = {p: cpu_seconds(p) - cpu_before.get(p, 0.0) for pids in pool.values() for p in pids}
    sim_cpu = sum(cpu_seconds(s.pid) for s in sims) - sim_before

    # Results of this cycle's tasks, from the result backend; the worker that ran each, from its log.
    time.sleep(0.5)  # the result is stored just after the run is recorded
    results = {}
    for key in broker.scan_iter("celery-task-meta-*"):
        if key in seen:
            continue
        seen.add(key)
        meta = json.loads(broker.get(key))
        if isinstance(meta.get("result"), dict) and "cluster" in meta["result"]:
            results[meta["task_id"]] = meta["result"]
    ran_by = {}
    for w in workers:
        for task_id, _runtime in SUCCEEDED.findall(w.log_path.read_text(errors="replace")):
            ran_by[task_id] = w.hostname.split("@")[0]
    worker_of = {r["cluster"]: ran_by.get(tid, "?") for tid, r in results.items()}
    result_of = {r["cluster"]: r for r in results.values()}

    durations = sorted(r.duration_seconds for r in runs)
    waits = sorted((r.started_at - sent_at).total_seconds() for r in runs)
    buckets = Bucket.objects.filter(cluster_id__in=by_id, collected_at__gte=sent_at)
    print(f"   all {len(by_id)} clusters collected {wall:.1f} s after the send ({polled:.1f} s polled): "
          f"{wall / BUDGET:.0%} of the {BUDGET:.0f} s cycle")
    print(f"   per-cluster collect_cluster time: min {durations[0]:.1f} s, median {statistics.median(durations):.1f} s,"
          f" max {durations[-1]:.1f} s (sum {sum(durations):.1f} s)")
    print(f"   start after the send (queued behind the workers): min {waits[0]:.1f} s, "
          f"max {waits[-1]:.1f} s")
    print(f"   buckets written: {buckets.count()} ({buckets.filter(status='ok').count()} ok), "
          f"{sum(b.pod_rows for b in buckets)} pod rows; outcomes "
          f"{sorted({r.outcome for r in runs})}")
    queries = [result_of[n]["queries"] for n in by_id.values() if n in result_of]
    samples = [result_of[n]["samples"] for n in by_id.values() if n in result_of]
    if queries:
        print(f"   Prometheus: {sum(queries)} queries in all ({min(queries)}-{max(queries)} per cluster), "
              f"{sum(samples)} series returned")
    for run in sorted(runs, key=lambda r: r.started_at):
        name = by_id[run.cluster_id]
        print(f"     {name}: {worker_of.get(name, '?'):>10}  start +{(run.started_at - sent_at).total_seconds():5.1f} s"
              f"  {run.duration_seconds:5.1f} s  {run.outcome}, {run.written} written"
              f"  {result_of.get(name, {}).get('queries', '?')} queries")
    for w in workers:
        short = w.hostname.split("@")[0]
        mine = sorted(n for n, h in worker_of.items() if h == short)
        child = [p for p in pool[w.hostname] if p != w.pid]
        hwm = ", ".join(f"pool child {_status_kb(p, 'VmHWM') / 1024:.0f} MB" for p in child)
        child_cpu = ", ".join(f"pool child {cpu[p]:.1f} s" for p in child)
        print(f"   {short}: {len(mine)} clusters; CPU main {cpu[w.pid]:.1f} s, {child_cpu}; peak RSS main "
              f"{_status_kb(w.pid, 'VmHWM') / 1024:.0f} MB, {hwm} (peaks since start)")
    print(f"   simulators ({len(sims)} processes: Kubernetes API + Prometheus) CPU during the cycle: {sim_cpu:.1f} s")


if __name__ == "__main__":
    main()
