"""bench/collect: one hour bucket of the `large` scenario (10,000 GPUs) end to end.

    python bench/collect.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench]
                            [--keep-export] [--om FILE --end ISO-HOUR] [--prom-data DIR] [--rounds N] [--hours N]
                            [--dra-fraction F]
    python bench/collect.py --compare-dra F [--om DP.om --om-dra DRA.om --end ISO-HOUR]
                            [--prom-data DIR --prom-data-dra DIR] [--rounds N] [--large-nodes N]

Exports one hour of `large` (that hour only: no hour before it), backfills a real Prometheus, serves
the simulator's Kubernetes API, then times one `collect_cluster` bucket. Reports: bucket time, split into
its phases (Kubernetes snapshot, ledger bucket, findings), with the Prometheus and SQL queries of each;
Prometheus queries and samples per query, peak RSS, and the write path against a raw COPY ceiling measured
in the same run (the write-path goal, at least 50 % of that ceiling: build the ledger rows from the
computed bucket, delete + COPY, committed; vs the same rows pre-encoded, COPY'd into the same tables with their
real indexes; --hours hours of the bucket per measurement, median of --rounds interleaved rounds).
Nothing here is asserted: these are measurements (see bench/README.md).

--compare-dra F measures, in one run, the bucket of the device-plugin-only fleet against the same fleet with the
share F of its nodes on NVIDIA's DRA driver (issue 19: within 15 %): both fleets are exported and backfilled into
their own Prometheus, served by their own simulator, then collected in --rounds interleaved rounds (the order
alternating), each round a cluster's first collection (a fresh Cluster row), through the product's own
collect_cluster (which reads the DRA objects beside the core LISTs); it prints each round's bucket, its phases and
the load average before it, the medians and their ratio.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import resource
import statistics
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
        self.queries: list[tuple[float, int, str, str]] = []  # seconds, series, phase, PromQL: where we wait

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
        """Time every query sent (`ask`: the ones a bucket asks ahead, `prefetch`, in the phase that asked them)."""
        original = cls.ask

        def timed(source, promql, at):
            t0 = time.perf_counter()
            result = original(source, promql, at)
            entry = self.prom[self.current]
            entry[0] += 1
            entry[1] += time.perf_counter() - t0
            entry[2] += len(result)
            self.queries.append((time.perf_counter() - t0, len(result), self.current, promql))
            return result

        cls.ask = timed

    def sql_wrapper(self, execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            entry = self.sql[self.current]
            entry[0] += 1
            entry[1] += time.perf_counter() - t0


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (user + system) used so far by this process (its threads included), or by process `pid`: a
    round's CPU is less at the mercy of the other work on the machine than its wall time."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ledger_rows(cluster, hour: datetime) -> dict[str, list[tuple]]:
    """The hour's pod-hour, node-hour, finding-hour and pod framebuffer rows of the cluster (without ids), to compare
    two collections."""
    from apps.findings.models import FindingHour
    from apps.savings.models import PodMemoryHour
    from apps.usage.models import NodeHour, PodHour

    out = {}
    for model in (PodHour, NodeHour, FindingHour, PodMemoryHour):
        fields = [f.attname for f in model._meta.fields if f.attname not in ("id", "created_at")]
        out[model.__name__] = sorted(model.objects.filter(cluster=cluster, hour=hour).values_list(*fields), key=repr)
    return out


def _copy_rate(rows: list[tuple]) -> float:
    """Rows/s of one COPY (write_row) of `rows` into an unlogged temp table shaped like the pod-hour table, no
    indexes: the ceiling this bench used before it followed G1; printed for comparison with older figures."""
    from django.db import connection, transaction

    from apps.usage.services import POD_COLUMNS

    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS copy_ceiling")
        cur.execute("CREATE TEMP TABLE copy_ceiling (LIKE usage_podhour INCLUDING DEFAULTS INCLUDING IDENTITY)")
    t0 = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cur, cur.cursor.copy(
        f"COPY copy_ceiling ({', '.join(POD_COLUMNS)}) FROM STDIN"
    ) as cp:
        for row in rows:
            cp.write_row(row)
    return len(rows) / (time.perf_counter() - t0)


def write_path_vs_copy(cluster, hour: datetime, result, *, hours: int, rounds: int) -> dict[str, list[float]]:
    """The write-path goal (>= 50 % of a raw COPY), in `rounds` interleaved rounds (seconds each).

    The computed bucket is written for `hours` consecutive hours from `hour` (a catch-up: one transaction per
    hour, as the collector writes them), so each measurement moves ~100,000 rows rather than one hour's few
    thousand, whose 0.1-0.2 s are mostly noise and fixed costs.
    - write path: what the collector does with a computed bucket: build the pod- and node-hour rows from the
      parsed result (`ledger_rows`), then `replace_rows` (delete the hour's rows, COPY with write_row), committed.
      Timed twice per round: replacing the hours' rows (a re-collect, a provisional hour made final) and writing
      hours that hold none (their first collection).
    - ceiling: the same rows pre-encoded (COPY text, read back from the tables beforehand), COPY'd into the same
      partitioned tables with their real indexes, one committed transaction per hour; for the replace, the same
      after a plain DELETE of the hour's rows in that transaction.
    Before each timed step the hours are set to the state the step needs and the tables are vacuumed, so dead
    rows of the previous step do not weigh on the next. Afterwards only `hour` holds rows, as collected.
    """
    from django.db import connection, transaction

    from apps.usage import services as ledger
    from apps.usage.models import NodeHour, PodHour

    tables = [(PodHour._meta.db_table, ledger.POD_COLUMNS), (NodeHour._meta.db_table, ledger.NODE_COLUMNS)]
    span = [hour + timedelta(hours=i) for i in range(hours)]
    times: dict[str, list[float]] = defaultdict(list)

    def write_path() -> float:
        t0 = time.perf_counter()
        built = 0.0
        for h in span:
            t1 = time.perf_counter()
            pod_rows, node_rows = ledger.ledger_rows(cluster, h, result)
            built += time.perf_counter() - t1
            with transaction.atomic():
                ledger.replace_rows(cluster, h, pod_rows, node_rows)
        times["building the rows"].append(built)
        return time.perf_counter() - t0

    def clean(*, keep: list[datetime]) -> None:
        with transaction.atomic():
            for model in (PodHour, NodeHour):
                model.objects.filter(cluster=cluster, hour__gte=span[0], hour__lte=span[-1]).exclude(
                    hour__in=keep).delete()
        with connection.cursor() as cur:
            for table, _columns in tables:
                cur.execute(f"VACUUM {table}")

    write_path()  # the rows of every hour, to encode
    encoded: dict[datetime, list[tuple[str, list[str], bytes]]] = defaultdict(list)
    with connection.cursor() as cur:
        for h in span:
            for table, columns in tables:
                data = bytearray()
                with cur.cursor.copy(f"COPY (SELECT {', '.join(columns)} FROM {table} WHERE cluster_id = %s "
                                     f"AND hour = %s) TO STDOUT", (cluster.pk, h)) as cp:
                    for chunk in cp:
                        data += chunk
                encoded[h].append((table, columns, bytes(data)))

    def ceiling(*, replace: bool) -> float:
        t0 = time.perf_counter()
        for h in span:
            with transaction.atomic(), connection.cursor() as cur:
                for table, columns, data in encoded[h]:
                    if replace:
                        cur.execute(f"DELETE FROM {table} WHERE cluster_id = %s AND hour = %s", (cluster.pk, h))
                    with cur.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
                        cp.write(data)
        return time.perf_counter() - t0

    for _ in range(rounds):
        clean(keep=[])
        times["ceiling"].append(ceiling(replace=False))
        clean(keep=span)
        times["ceiling, replacing"].append(ceiling(replace=True))
        clean(keep=span)
        times["replace"].append(write_path())
        clean(keep=[])
        times["first"].append(write_path())
    clean(keep=[hour])
    return times


def start_fleet(args, label: str, dra_fraction: float | None, om_given: Path | None, prom_data: Path | None,
                hour: datetime, end: datetime, tmp: Path):
    """Export one hour of the fleet (unless `om_given` exists; to `om_given` when given, kept), backfill a
    Prometheus with it (unless `prom_data` already holds it), start it, and serve the same fleet's Kubernetes API:
    (PrometheusServer, simulator process, kubeconfig path)."""
    from tests.harness.prometheus import PrometheusServer
    from tests.harness.services import free_port, tcp_reachable

    om = om_given or tmp / f"{label}.om"
    # The same scenario for the export and the server: built from the same options.
    scenario = ["--scenario", "large", *(["--dra-fraction", str(dra_fraction)] if dra_fraction else []),
                *(["--recording-rules"] if getattr(args, "recording_rules", False) else []),
                *(["--large-nodes", str(args.large_nodes)] if args.large_nodes else [])]
    if not (om_given and om_given.exists()):
        t0 = time.perf_counter()
        # The simulator runs in its own processes so the peak RSS below is the collector's alone.
        subprocess.run([sys.executable, str(ROOT / "manage.py"), "simulate", "export-openmetrics", *scenario,
                        "--since", hour.isoformat(), "--until", end.isoformat(), "--step", str(args.step),
                        "--out", str(om)], check=True)
        print(f"{label} export: {time.perf_counter() - t0:.1f}s, {om.stat().st_size / 1e6:.0f} MB to {om}",
              flush=True)
    t0 = time.perf_counter()
    # promtool is run here rather than by the test harness's backfill, whose 300 s timeout an 8.7 GB export
    # overruns on a loaded 2-core machine (bench set-up, not collection).
    data_dir = prom_data or Path(tempfile.mkdtemp(prefix="gpufinops-prometheus-")) / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    prom = PrometheusServer(data_dir, port=free_port())
    try:
        if not any(data_dir.iterdir()):
            subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(data_dir)],
                           check=True, stdout=subprocess.DEVNULL)
        if not (om_given or args.keep_export):
            om.unlink()  # several GB of /tmp per run otherwise
        prom.start(timeout=300)
    except BaseException:
        if prom_data:
            prom.stop()
        else:
            prom.close()
        raise
    print(f"{label} promtool backfill + Prometheus ready: {time.perf_counter() - t0:.1f}s", flush=True)
    kubeconfig = tmp / f"{label}.kubeconfig"
    port = free_port()
    server = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "simulate", "serve", *scenario,
                               "--at", end.isoformat(), "--port", str(port), "--kubeconfig-out", str(kubeconfig)])
    deadline = time.monotonic() + 300
    while not (kubeconfig.exists() and tcp_reachable("127.0.0.1", port)):
        if server.poll() is not None or time.monotonic() > deadline:
            prom.stop() if prom_data else prom.close()
            raise SystemExit("simulator did not start")
        time.sleep(0.5)
    return prom, server, kubeconfig


def stop_fleet(prom, server, kept: bool) -> None:
    server.terminate()
    server.wait()
    if kept:
        prom.stop()  # a kept data dir serves the next run
    else:
        prom.close()


def compare_dra(args, hour: datetime, end: datetime, tmp: Path) -> None:
    """The bucket of the device-plugin-only fleet vs the same fleet with `args.compare_dra` of its nodes on DRA,
    in one run: `args.rounds` interleaved rounds (order alternating), each a first collection of a fresh cluster."""
    from django.db.models import Count, Q, Sum

    from apps.findings.models import FindingHour
    from apps.ingest import services as ingest_services
    from apps.ingest.collectors.prometheus import PrometheusSource
    from apps.ingest.services import collect_cluster
    from apps.inventory.models import Cluster
    from apps.usage import services as usage_services
    from apps.usage.models import NodeHour, PodHour

    fleets = {"device plugin only": (None, args.om, args.prom_data),
              f"{args.compare_dra:g} on DRA": (args.compare_dra, args.om_dra, args.prom_data_dra)}
    started: dict[str, tuple] = {}
    try:
        for i, (label, (fraction, om, prom_data)) in enumerate(fleets.items()):
            started[label] = start_fleet(args, f"fleet{i}", fraction, om, prom_data, hour, end, tmp)
        Cluster.objects.filter(name__startswith="bench-dra-cmp-").delete()
        phases = Phases()
        phases.wrap(ingest_services, "read_snapshot", "k8s read")
        phases.wrap(ingest_services, "record_snapshot", "k8s record")
        phases.wrap(usage_services, "collect_bucket", "ledger bucket")
        phases.wrap(ingest_services, "record_findings", "findings")
        phases.wrap_query(PrometheusSource)
        runs: dict[str, list[dict]] = defaultdict(list)
        labels = list(fleets)
        # One untimed collection of each fleet first: the run's first collection pays the imports, the client's
        # set-up and the simulator's and Prometheus's cold caches, which would weigh on whichever fleet goes first.
        for i, label in enumerate(labels):
            prom, _server, kubeconfig = started[label]
            warm = Cluster.objects.create(name=f"bench-dra-cmp-{i}-warm-up", prometheus_url=prom.url,
                                          kubeconfig_path=str(kubeconfig))
            t0 = time.perf_counter()
            collect_cluster(warm, [hour], now=end)
            print(f"warm-up {label}: {time.perf_counter() - t0:.2f} s (not counted)", flush=True)
        for r in range(args.rounds):
            for k, label in enumerate(labels if r % 2 == 0 else labels[::-1]):
                prom, _server, kubeconfig = started[label]
                cluster = Cluster.objects.create(name=f"bench-dra-cmp-{labels.index(label)}-{r}",
                                                 prometheus_url=prom.url, kubeconfig_path=str(kubeconfig))
                wall_before = dict(phases.wall)
                load = os.getloadavg()
                t0 = time.perf_counter()
                report = collect_cluster(cluster, [hour], now=end)
                seconds = time.perf_counter() - t0
                pods = PodHour.objects.filter(cluster=cluster, hour=hour).aggregate(
                    rows=Count("id"), dra_rows=Count("id", filter=Q(allocation_mode="dra")),
                    gpu_hours=Sum("allocated_gpu_hours"),
                    dra_gpu_hours=Sum("allocated_gpu_hours", filter=Q(allocation_mode="dra")))
                nodes = NodeHour.objects.filter(cluster=cluster, hour=hour).aggregate(
                    rows=Count("id"), dra_rows=Count("id", filter=Q(allocation_mode="dra")),
                    capacity=Sum("capacity_gpu_hours"), allocated=Sum("allocated_gpu_hours"))
                run = {"round": r + 1, "seconds": seconds, "load": load, "ok": report.ok and not report.findings_failed,
                       "phases": {k: phases.wall[k] - wall_before.get(k, 0.0) for k in phases.wall},
                       "pods": pods, "nodes": nodes,
                       "findings": FindingHour.objects.filter(cluster=cluster, hour=hour).count()}
                runs[label].append(run)
                print(f"round {r + 1}.{k + 1} {label:<20} bucket {seconds:6.2f} s  load before "
                      + " ".join(f"{v:.2f}" for v in load)
                      + ("" if run["ok"] else f"  NOT CLEAN: failed={report.failed} degraded={report.degraded} "
                                                f"findings_failed={report.findings_failed}"), flush=True)
    finally:
        for label, (prom, server, _kubeconfig) in started.items():
            fraction, _om, prom_data = fleets[label]
            stop_fleet(prom, server, bool(prom_data))
    gpus = 8 * (args.large_nodes or 1250)
    print()
    print(f"bucket (1 h of the large fleet, {gpus:,} GPUs), first collection of a fresh cluster per round, "
          f"{args.rounds} interleaved rounds ({os.cpu_count()} CPUs):")
    print(f"{'fleet':<22}{'median s':>9}  rounds s (load 1-min before)   "
          f"k8s read / record / ledger / findings (median s)")
    medians = {}
    for label in labels:
        rs = runs[label]
        medians[label] = statistics.median(r["seconds"] for r in rs)
        ph = " / ".join(f"{statistics.median(r['phases'].get(k, 0.0) for r in rs):.2f}"
                        for k in ["k8s read", "k8s record", "ledger bucket", "findings"])
        each = ", ".join(f"{r['seconds']:.2f} ({r['load'][0]:.1f})" for r in rs)
        print(f"{label:<22}{medians[label]:>9.2f}  {each}   {ph}")
    base, dra_label = labels
    print(f"ratio DRA / device plugin only: {medians[dra_label] / medians[base]:.3f} "
          f"({medians[dra_label] / medians[base] - 1:+.1%}; goal within 15 %); per round: "
          + " ".join(f"{d['seconds'] / b['seconds']:.3f}" for b, d in zip(runs[base], runs[dra_label], strict=True)))
    for label in labels:
        last = runs[label][-1]
        p, n = last["pods"], last["nodes"]
        print(f"{label}: pod rows {p['rows']} ({p['dra_rows']} dra), allocated {p['gpu_hours'] or 0:.1f} GPU-h "
              f"({p['dra_gpu_hours'] or 0:.1f} through DRA); node rows {n['rows']} ({n['dra_rows']} dra), capacity "
              f"{n['capacity'] or 0:.1f} GPU-h, allocated {n['allocated'] or 0:.1f}; {last['findings']} finding rows"
              + ("" if all(r["ok"] for r in runs[label]) else "; some collections NOT clean"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_bench")
    parser.add_argument("--step", type=int, default=30)
    parser.add_argument("--om", type=Path, help="reuse this export (from --keep-export) instead of exporting again; "
                        "written there (and kept) when it does not exist yet")
    parser.add_argument("--end", help="end of the bucket (ISO, whole hour): the one the --om export covers")
    parser.add_argument("--keep-export", action="store_true", help="keep the OpenMetrics file (several GB)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the write-path vs COPY measurement")
    parser.add_argument("--hours", type=int, default=24, help="hours written per write-path / COPY measurement")
    parser.add_argument("--prom-data", type=Path,
                        help="Prometheus data dir kept between runs: backfilled only when empty (same --end!)")
    parser.add_argument("--dra-fraction", type=float, default=None,
                        help="the share of the fleet's nodes on NVIDIA's DRA driver (0.333: a third; the same jobs, "
                             "held through ResourceClaims); an --om export or --prom-data must have been made with it")
    parser.add_argument("--large-nodes", type=int, default=None,
                        help="8-GPU nodes of the fleet (default 1,250 = 10,000 GPUs); the same for every export")
    parser.add_argument("--compare-dra", type=float, default=None, metavar="F",
                        help="one run, two fleets: device-plugin only vs the share F of the nodes on DRA, the bucket "
                             "of each in --rounds interleaved rounds (medians, ratio, load averages)")
    parser.add_argument("--om-dra", type=Path, help="with --compare-dra: reuse this export of the DRA fleet")
    parser.add_argument("--prom-data-dra", type=Path, help="with --compare-dra: the DRA fleet's Prometheus data dir")
    parser.add_argument("--profile", type=Path,
                        help="cProfile the last round of steady-state collections into this file (pstats)")
    parser.add_argument("--steady-rounds", type=int, default=1,
                        help="steady-state collections (per mode with --recording-rules), interleaved")
    parser.add_argument("--recording-rules", action="store_true",
                        help="the export also holds the series of deploy/monitoring/gpufinops-recording.yaml "
                             "(an --om export or --prom-data must have been made with it); the steady state is "
                             "timed reading them and not reading them")
    parser.add_argument("--compare-ahead", action="store_true",
                        help="the steady state timed with the first bucket's Prometheus round started before the "
                             "Kubernetes read (as collected) and asked in place, interleaved; recording rules as "
                             "configured")
    parser.add_argument("--show-queries", type=int, default=8, help="slowest steady-state queries listed per mode")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.db
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    from common import ensure_db  # bench/common.py (the script's folder is on sys.path)

    ensure_db(args.db)

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from apps.findings import services as findings_services
    from apps.findings.models import FindingHour
    from apps.ingest import services as ingest_services
    from apps.ingest.collectors.prometheus import PrometheusSource
    from apps.ingest.services import collect_cluster
    from apps.inventory.models import Cluster
    from apps.usage import services as usage_services
    from apps.usage.models import NodeHour, PodHour
    from apps.usage.services import POD_COLUMNS

    call_command("migrate", verbosity=0)
    end = datetime.fromisoformat(args.end) if args.end else datetime.now(UTC).replace(minute=0, second=0,
                                                                                       microsecond=0)
    hour = end - timedelta(hours=1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-collect-"))
    if args.compare_dra is not None:
        compare_dra(args, hour, end, tmp)
        return
    prom, server, kubeconfig = start_fleet(args, "large", args.dra_fraction, args.om, args.prom_data, hour, end, tmp)
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
        # The computed bucket, kept for the write-path measurement below.
        computed = {}
        write_bucket = usage_services.write_bucket

        def keep_result(cluster, hour, result, **kwargs):
            computed["result"] = result
            return write_bucket(cluster, hour, result, **kwargs)

        usage_services.write_bucket = keep_result
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
        # The steady state: the cluster's next collections of the same hour (as every 5-minute cycle re-collects
        # the current hour), whose snapshot updates nodes and pod observations instead of creating them; with
        # --recording-rules, --steady-rounds interleaved rounds with the recorded series read and not read
        # (GPUFINOPS_PROMETHEUS_RECORDING_RULES), and the ledger rows each gave compared.
        first_wall = dict(phases.wall)
        first_prom = {k: list(v) for k, v in phases.prom.items()}
        first_queries = len(phases.queries)
        # --compare-ahead: the first bucket's round of Prometheus queries started before the Kubernetes read
        # (PrometheusSource.prefetch_ahead, as collect_cluster does) or asked when the ledger reads the bucket (the
        # early start made a no-op), recording rules as configured.
        modes = (["round ahead", "round in place"] if args.compare_ahead
                 else ["with recording rules", "without"] if args.recording_rules else ["as configured"])
        prefetch_ahead = PrometheusSource.prefetch_ahead
        steady: dict[str, list[dict]] = defaultdict(list)
        ledgers: dict[str, dict] = {}
        profiler = cProfile.Profile() if args.profile else None
        for r in range(args.steady_rounds):
            for mode in modes if r % 2 == 0 else modes[::-1]:
                if args.compare_ahead:
                    PrometheusSource.prefetch_ahead = (prefetch_ahead if mode == modes[0]
                                                       else lambda source, start, end: None)
                elif args.recording_rules:
                    settings.GPUFINOPS_PROMETHEUS_RECORDING_RULES = mode == modes[0]
                wall_before, queries_before, load = dict(phases.wall), len(phases.queries), os.getloadavg()
                cpu_before = (cpu_seconds(), cpu_seconds(prom.process.pid), cpu_seconds(server.pid))
                if profiler and r == args.steady_rounds - 1:
                    profiler.enable()
                t0 = time.perf_counter()
                again = collect_cluster(cluster, [hour], now=end)
                seconds = time.perf_counter() - t0
                cpu = [after - before for after, before in zip(
                    (cpu_seconds(), cpu_seconds(prom.process.pid), cpu_seconds(server.pid)), cpu_before, strict=True)]
                if profiler:
                    profiler.disable()
                if not again.ok or again.findings_failed:
                    print(f"steady-state collection ({mode}) not clean: failed={again.failed} "
                          f"degraded={again.degraded} findings_failed={again.findings_failed}")
                steady[mode].append({"seconds": seconds, "load": load, "queries": phases.queries[queries_before:],
                                     "cpu": cpu,
                                     "phases": {k: phases.wall[k] - wall_before.get(k, 0.0) for k in phases.wall}})
                ledgers[mode] = ledger_rows(cluster, hour)
                print(f"steady state {r + 1} {mode:<22} {seconds:6.2f} s  CPU s: collector {cpu[0]:.2f}, Prometheus "
                      f"{cpu[1]:.2f}, simulator {cpu[2]:.2f}  load before " + " ".join(f"{v:.2f}" for v in load),
                      flush=True)
        PrometheusSource.prefetch_ahead = prefetch_ahead
        if profiler:
            profiler.dump_stats(args.profile)
        # The tables below are the first collection's.
        phases.wall = defaultdict(float, first_wall)
        phases.prom = defaultdict(lambda: [0, 0.0, 0], first_prom)
        del phases.queries[first_queries:]
        rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        # Write path vs raw COPY (G1), and the old ceiling for comparison with earlier figures.
        pod_rows = list(PodHour.objects.filter(cluster=cluster, hour=hour).values_list(*POD_COLUMNS))
        old_ceiling_rps = _copy_rate(pod_rows)
        n = (len(pod_rows) + NodeHour.objects.filter(cluster=cluster, hour=hour).count()) * args.hours
        times = write_path_vs_copy(cluster, hour, computed["result"], hours=args.hours, rounds=args.rounds)
    finally:
        stop_fleet(prom, server, bool(args.prom_data))
    print()
    print(f"bucket (1 h of {cluster.name}, {8 * (args.large_nodes or 1250):,} GPUs): {bucket_seconds:.2f} s end to end")
    # Nested phases (findings: ...) are inside "findings"; "other" is collect_cluster's own glue.
    print(f"{'phase':<26}{'wall s':>8}{'prom q':>8}{'prom s':>8}{'series':>9}{'sql q':>8}{'sql s':>8}")
    accounted = sum(v for k, v in phases.wall.items() if ":" not in k)
    phases.wall["other"] = bucket_seconds - accounted
    for name in ["k8s read", "k8s record", "ledger bucket", "findings", "findings: replace_hour",
                 "findings: snapshot kinds", "other"]:
        pq, ps, pn = phases.prom.get(name, [0, 0.0, 0])
        sq, ss = phases.sql.get(name, [0, 0.0])
        print(f"{name:<26}{phases.wall.get(name, 0.0):>8.2f}{pq:>8}{ps:>8.2f}{pn:>9}{sq:>8}{ss:>8.2f}")
    print(f"steady state, the cluster's next collections of the same hour ({args.steady_rounds} rounds; medians):")
    for mode in modes:
        runs = steady[mode]
        med = statistics.median(x["seconds"] for x in runs)
        ph = ", ".join(f"{k} {statistics.median(x['phases'].get(k, 0.0) for x in runs):.2f} s"
                       for k in ["k8s read", "k8s record", "ledger bucket", "findings"])
        qs = runs[-1]["queries"]
        print(f"  {mode}: {med:.2f} s (rounds: " + ", ".join(f"{x['seconds']:.2f}" for x in runs) + f"); {ph}; "
              f"{len(qs)} Prometheus queries, {sum(q[1] for q in qs)} series, {sum(q[0] for q in qs):.2f} s summed "
              f"(last round); load before the rounds " + ", ".join(f"{x['load'][0]:.2f}" for x in runs))
        print("      CPU s per round (medians): " + ", ".join(
            f"{name} {statistics.median(x['cpu'][i] for x in runs):.2f}"
            for i, name in enumerate(("collector", "Prometheus", "simulator"))))
        for seconds, series, phase, promql in sorted(qs, reverse=True)[:args.show_queries]:
            print(f"      {seconds:6.2f} {series:>6}  {phase:<14} {promql[:120]}")
    if len(modes) == 2:
        same = ledgers[modes[0]] == ledgers[modes[1]]
        counts = ", ".join(f"{k} {len(v)}" for k, v in ledgers[modes[0]].items())
        print(f"  ledger rows (pod-hour, node-hour, finding-hour, pod framebuffer) identical {modes[0]} and "
              f"{modes[1]}: {'yes' if same else 'NO'} ({counts})")
    if args.profile:
        print(f"  cProfile of the last steady-state round(s) in {args.profile}")
    f_wall = phases.wall.get("findings", 0.0)
    print(f"findings: {f_wall:.2f} s of the bucket ({f_wall / bucket_seconds:.0%}), {n_findings} finding rows "
          f"for the hour; bucket without findings {bucket_seconds - f_wall:.2f} s")
    print("Prometheus queries of the first collection, slowest first (s, series, phase, PromQL):")
    for seconds, series, phase, promql in sorted(phases.queries, reverse=True)[:15]:
        print(f"  {seconds:6.2f} {series:>6}  {phase:<14} {promql[:130]}")
    print(f"Prometheus: {report.queries} queries, {report.samples} series returned, "
          f"{report.samples / max(report.queries, 1):.0f} per query")
    print(f"write path vs raw COPY (G1), {n:,} pod- and node-hour rows ({args.hours} hours of this bucket), median of "
          f"{args.rounds} rounds (rows/s; each round's ratio in brackets):")
    for key, ceiling_key, label, ceiling_label in [
        ("first", "ceiling", "write path, hours written the first time",
         "raw COPY (pre-encoded, same tables and indexes, a transaction per hour)"),
        ("replace", "ceiling, replacing", "write path, replacing the hours' rows",
         "raw DELETE + COPY (the same, deleting the hour's rows first)"),
    ]:
        ceiling, t = statistics.median(times[ceiling_key]), statistics.median(times[key])
        rounds = " ".join(f"{c / w:.0%}" for c, w in zip(times[ceiling_key], times[key], strict=True))
        print(f"  {label}: {n / t:,.0f} = {ceiling / t:.0%} of the {ceiling_label}: {n / ceiling:,.0f} [{rounds}]")
    print(f"  of the write path, building the rows from the computed bucket: "
          f"{statistics.median(times['building the rows']):.2f} s (median)")
    print(f"  for comparison, the earlier ceiling (write_row COPY of the {len(pod_rows):,} pod rows into an "
          f"unlogged temp table without indexes): {old_ceiling_rps:,.0f}")
    print(f"peak RSS: {rss_peak:.0f} MB (before collection {rss_before:.0f} MB)")
    print("load average before / after the bucket: " + " ".join(f"{v:.2f}" for v in load_before) + " / "
          + " ".join(f"{v:.2f}" for v in load_after) + f" ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
