"""bench/api: the usage endpoint over a week of a 10,000-GPU fleet, under gunicorn on loopback.

    python bench/api.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench]
                        [--clients 32] [--requests 3000] [--workers 2] [--threads 4] [--refill]
                        [--compare-trivial [--trivial-path /api/v1/teams/] [--rounds 3] [--warmup 5] [--duration 20]]

1. Fills one cluster, ``bench-api-large``, with the last 7 whole UTC days (168 hourly buckets)
   through the real ledger write path (``apps.usage.services.claim_bucket`` + ``write_bucket``:
   COPY of pod and node rows, then the hour and day rollups). The fleet mirrors the simulator's
   ``large`` scenario: 1,250 nodes x 8 GPUs in node groups h100-a (500 nodes), h100-b (250),
   a100 (300), L40S (200); each node split into GPU blocks (8 | 4+4 | 4+2+2 | 2+2+2+1+1 | 8x1),
   each block running back-to-back jobs of 1.5-30 h with 0-4 h gaps (15 % add 4-24 h), from 24
   teams (one namespace each; ``--namespaces-per-team`` raises the cardinality). Activity per job
   kind (train, batch, infer, eval, notebook, idle notebook); 1 % of blocks have no DCGM identity
   (unmeasured). Seeded, so every run writes the same rows. Skipped when the week is already there.
2. Starts gunicorn (``-w 2 --threads 4`` by default, gthread, ``--worker-connections`` clients / workers so the
   keep-alive connections are split evenly) on a free loopback port.
3. 32 client threads (stdlib ``http.client``, keep-alive) send ``--requests`` GETs of a query mix
   over that week; prints p50/p95/max latency, errors and requests/s, overall and per query.
   ``--compare-trivial`` instead runs ``wrk`` against the same gunicorn, answer cache off
   (``GPUFINOPS_API_CACHE_SECONDS=0``): a warm-up run of a trivial authenticated endpoint and of the usage mix, then
   ``--rounds`` of each in ABBA order, and prints every round (with the CPU the server, PostgreSQL, wrk and every
   other process spent in it, and how the connections were split between the workers: bench/api_compare.py), both
   medians and usage/trivial (issue 15: at least 60 %).

Nothing is asserted: these are measurements (see bench/README.md).
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from api_compare import compare_trivial, run_wrk  # bench/api_compare.py (the script's folder is on sys.path)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLUSTER = "bench-api-large"
POOLS = [("h100-a", "NVIDIA-H100-80GB-HBM3", 500), ("h100-b", "NVIDIA-H100-80GB-HBM3", 250)]
POOLS += [("a100", "NVIDIA-A100-SXM4-80GB", 300), ("NVIDIA-L40S", "NVIDIA-L40S", 200)]
PRICES = {"NVIDIA-H100-80GB-HBM3": Decimal("4.00"), "NVIDIA-A100-SXM4-80GB": Decimal("2.50"),
          "NVIDIA-L40S": Decimal("1.50")}
SHAPES = [[8], [8], [4, 4], [4, 2, 2], [2, 2, 2, 1, 1], [1] * 8]
# Job kind -> sm_active range.
KINDS = {
    "train": (0.6, 0.9),
    "batch": (0.3, 0.7),
    "infer": (0.1, 0.4),
    "eval": (0.2, 0.5),
    "notebook": (0.01, 0.1),
    "notebook-idle": (0.0, 0.004),
}
KIND_CHOICES = ["train", "train", "batch", "batch", "infer", "infer", "eval", "notebook", "notebook-idle"]


def _jobs(rng: random.Random, start: datetime, end: datetime, teams: list[str], ns_per_team: int):
    """Per node: (name, node group, model, [(uid, pod, team, namespace, gpus, kind, t0, t1, measured)])."""
    nodes = []
    index = 0
    for group, model, count in POOLS:
        for _ in range(count):
            name = f"gpu-{group.lower()}-{index:04d}"
            jobs = []
            for b, width in enumerate(rng.choice(SHAPES)):
                measured = rng.random() >= 0.01
                t = start - timedelta(hours=rng.uniform(0, 12))
                n = 0
                while t < end:
                    dur = timedelta(hours=rng.uniform(1.5, 30))
                    team = rng.choice(teams)
                    namespace = team if ns_per_team == 1 else f"{team}-{rng.randrange(ns_per_team)}"
                    kind = rng.choice(KIND_CHOICES)
                    pod = f"{kind}-{index:04d}-{b}-{n:03d}"
                    jobs.append((f"{name}-{b}-{n}", pod, team, namespace, width, kind, t, t + dur, measured))
                    n += 1
                    t = t + dur + timedelta(hours=rng.uniform(0, 4))
                    if rng.random() < 0.15:
                        t += timedelta(hours=rng.uniform(4, 24))
            nodes.append((name, group, model, jobs))
            index += 1
    return nodes


def fill(start: datetime, end: datetime, ns_per_team: int, seed: int = 7) -> dict:
    """Writes every hour of [start, end) for CLUSTER through the ledger write path."""
    from apps.inventory.gpus import GpuNode
    from apps.inventory.models import Cluster
    from apps.usage.activity import SIGNALS
    from apps.usage.ledger import BucketResult, NodeFact, NodeRow, PodFact, PodRow
    from apps.usage.models import Bucket, PodHour, UsageDay, UsageHour
    from apps.usage.services import claim_bucket, write_bucket

    hours = int((end - start).total_seconds() // 3600)
    cluster = Cluster.objects.filter(name=CLUSTER).first()
    if (
        cluster is not None
        and Bucket.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end, status="ok").count() == hours
        and cluster.kube_context == f"bench-v2-{ns_per_team}"  # marks how the rows were generated
    ):
        print(f"fill: reusing the {hours} buckets already written for {CLUSTER}", flush=True)
        _maintain("VACUUM ANALYZE")
    else:
        if cluster is not None:
            cluster.delete()
        cluster = Cluster.objects.create(name=CLUSTER, source="simulator", kube_context=f"bench-v2-{ns_per_team}")
        rng = random.Random(seed)
        teams = [f"team-{i:02d}" for i in range(24)]
        nodes = _jobs(rng, start, end, teams, ns_per_team)
        activity = {}
        t0 = time.perf_counter()
        for h in range(hours):
            hour = start + timedelta(hours=h)
            hour_end = hour + timedelta(hours=1)
            pods, node_rows = [], []
            for name, group, model, jobs in nodes:
                price = PRICES[model]
                fact = NodeFact(name, group, GpuNode(model, 8, "none", 7), 3600.0, False, price)
                allocated = 0.0
                for uid, pod, team, namespace, width, kind, j0, j1, measured in jobs:
                    held = (min(j1, hour_end) - max(j0, hour)).total_seconds()
                    if held <= 0:
                        continue
                    a = activity.setdefault(uid, rng.uniform(*KINDS[kind]))
                    gpu_hours = width * held / 3600
                    allocated += gpu_hours
                    values = {"sm_active": a, "gr_engine_active": min(1.0, a * 1.1)}
                    values.update({"tensor_active": a * 0.5, "gpu_util": min(1.0, a * 1.6)})
                    working = {s: gpu_hours * values[s] if measured else 0.0 for s in SIGNALS}
                    idle = {s: gpu_hours * (1 - values[s]) if measured else 0.0 for s in SIGNALS}
                    unmeasured = dict.fromkeys(SIGNALS, 0.0 if measured else gpu_hours)
                    pfact = PodFact(uid, namespace, pod, name, team, {"nvidia.com/gpu": width}, held,
                                    workload=f"Job/{pod.rsplit('-', 1)[0]}")
                    pods.append(PodRow(pfact, group, model, width, price, gpu_hours, working, idle, unmeasured))
                node_rows.append(NodeRow(fact, 8.0, allocated, 8.0 - allocated, 0.0, False))
            owner = f"bench-api-{os.getpid()}"
            claim_bucket(cluster, hour, owner)
            write_bucket(cluster, hour, BucketResult(pods, node_rows), owner=owner, covered_until=hour_end)
            if h % 24 == 23:
                _maintain("ANALYZE")
                print(f"fill: {h + 1}/{hours} buckets, {time.perf_counter() - t0:.0f}s", flush=True)
        # Compacted, as autovacuum would keep it and the same for every run: each answer reads only live rows.
        _maintain("VACUUM (FULL, ANALYZE)")
    counts = {
        "pod_hours": PodHour.objects.filter(cluster=cluster).count(),
        "usage_hour_rows": UsageHour.objects.filter(cluster=cluster).count(),
        "usage_day_rows": UsageDay.objects.filter(cluster=cluster).count(),
    }
    print(f"fill: {counts}", flush=True)
    return counts


def _maintain(statement: str) -> None:
    """Run VACUUM or ANALYZE (PostgreSQL only, outside a transaction). Autovacuum is off on this machine's server, so
    without it the planner has no statistics (the week rollup's rebuild ran as a nested loop, 25-50 s a bucket
    instead of ~2.5 s) and every rollup rebuilt 168 times keeps its dead rows (`usage_usageday`: 672 live rows in
    4.9 MB), which each usage answer then scans: up to 0.8 ms more PostgreSQL time a request."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(statement)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(conn: http.client.HTTPConnection, path: str, token: str) -> tuple[int, bytes]:
    conn.request("GET", path, headers={"Authorization": f"Token {token}"})
    response = conn.getresponse()
    return response.status, response.read()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def prepare(db: str, ns_per_team: int) -> tuple[datetime, datetime, dict[str, str]]:
    """Migrates `db` (created if needed), fills the last 7 whole days when missing, and gives the week's bounds and
    a fresh token for the staff user and for the member of team-03 (also bench/api_profile.py's set-up)."""
    os.environ["DATABASE_URL"] = db
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    from common import ensure_db  # bench/common.py (the script's folder is on sys.path)

    ensure_db(db)
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from apps.accounts.services import add_team_member, create_api_token

    call_command("migrate", verbosity=0)
    end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = end - timedelta(days=7)
    fill(start, end, ns_per_team)
    staff = User.objects.get_or_create(username="bench-api-staff", defaults={"is_staff": True})[0]
    member = User.objects.get_or_create(username="bench-api-member")[0]
    # The fill writes ledger rows only; the collector would have recorded the team from its labels.
    add_team_member("team-03", member.username, create=True)
    return start, end, {"staff": create_api_token(staff, 1), "member": create_api_token(member, 1)}


def query_mix(start: datetime, end: datetime, *, with_hourly: bool = False) -> list[tuple[str, str]]:
    """The usage queries the benchmark sends (who, path): six as staff, two as a member of team-03 (also what
    bench/api_profile.py profiles in-process)."""
    week = f"start={start:%Y-%m-%d}&end={end:%Y-%m-%d}"
    mix = [
        ("staff", "/api/v1/usage/"),  # default: last 7 whole days by team
        ("staff", f"/api/v1/usage/?{week}&group_by=team,namespace"),
        ("staff", f"/api/v1/usage/?{week}&group_by=cluster,node_group,gpu_model"),
        ("staff", f"/api/v1/usage/?{week}&group_by=team,day"),
        ("staff", f"/api/v1/usage/?{week}&group_by=team&signal=gpu_util"),
        ("staff", f"/api/v1/usage/?{week}&group_by=team,namespace,gpu_model&format=csv"),
        ("member", f"/api/v1/usage/?{week}&group_by=namespace,day"),
        ("member", "/api/v1/usage/"),
    ]
    if with_hourly:
        mix.append(("staff", f"/api/v1/usage/?{week}&group_by=team,hour"))
    return mix


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_bench")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument(
        "--client", choices=["python", "wrk"], default="python",
        help="load generator: Python threads (default), or wrk (Debian `wrk`), which leaves the cores to the server",
    )
    parser.add_argument("--duration", type=int, default=20, help="seconds of load with --client wrk")
    parser.add_argument(
        "--worker-connections", type=int, default=0,
        help="connections each gunicorn worker holds at most (default: clients / workers, so the clients' keep-alive "
             "connections are split evenly: gunicorn otherwise lets one worker take most or all of them)",
    )
    parser.add_argument("--namespaces-per-team", type=int, default=1)
    parser.add_argument("--with-hourly", action="store_true", help="add group_by=team,hour (hour rollup) to the mix")
    parser.add_argument(
        "--compare-trivial", action="store_true",
        help="with wrk and the answer cache off: a trivial authenticated endpoint vs the usage mix, and the ratio",
    )
    parser.add_argument("--trivial-path", default="/api/v1/teams/",
                        help="the trivial endpoint for --compare-trivial (token auth, a tiny JSON answer)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of each with --compare-trivial, in ABBA order (trivial-usage, usage-trivial, ...)")
    parser.add_argument("--warmup", type=float, default=5,
                        help="seconds of each endpoint before the rounds with --compare-trivial, not counted")
    args = parser.parse_args()
    if args.compare_trivial:
        os.environ["GPUFINOPS_API_CACHE_SECONDS"] = "0"  # uncached usage: gunicorn inherits the environment
        print(f"load average before the run: {' / '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)

    start, end, tokens = prepare(args.db, args.namespaces_per_team)
    mix = query_mix(start, end, with_hourly=args.with_hourly)

    port = _free_port()
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "bench-api-" + "x" * 50,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        # Longer than a run: each thread keeps its PostgreSQL backend, so a round's backend CPU is all counted.
        "DB_CONN_MAX_AGE": "900",
        "LOG_LEVEL": "WARNING",
    }
    per_worker = args.worker_connections or -(-args.clients // args.workers)
    command = [
        sys.executable, "-m", "gunicorn", "gpufinops.wsgi:application", "-b", f"127.0.0.1:{port}",
        "-w", str(args.workers), "-k", "gthread", "--threads", str(args.threads), "--log-level", "warning",
        "--worker-connections", str(per_worker),
    ]  # fmt: skip
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                status, body = _get(conn, mix[0][1], tokens["staff"])
                if status == 200:
                    break
                raise RuntimeError(f"warm-up got {status}: {body[:300]!r}")
            except (ConnectionRefusedError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        for who, path in mix * 3:  # warm one worker's imports and compiled statements (wrk's warm-up: both)
            status, body = _get(conn, path, tokens[who])
            if status != 200:
                raise RuntimeError(f"{path} -> {status}: {body[:300]!r}")

        if args.compare_trivial:
            status, body = _get(conn, args.trivial_path, tokens["staff"])
            if status != 200:
                raise RuntimeError(f"{args.trivial_path} -> {status}: {body[:300]!r}")
            print(f"trivial endpoint {args.trivial_path}: {len(body)} bytes: {body[:200]!r}")
        conn.close()  # its place in a worker's --worker-connections is the clients'
        if args.compare_trivial:
            print(f"{args.clients} wrk connections, {args.duration} s a round, gunicorn -w {args.workers} --threads "
                  f"{args.threads} --worker-connections {per_worker}, {os.cpu_count()} CPUs", flush=True)
            compare_trivial(port, server.pid, args.db, mix, tokens, args.trivial_path, clients=args.clients,
                            duration=args.duration, rounds=args.rounds, warmup=args.warmup)
            return
        if args.client == "wrk":
            run = run_wrk(port, mix, tokens, args.clients, args.duration)
            print(f"{args.clients} connections for {args.duration}s, gunicorn on the same {os.cpu_count()} CPUs\n"
                  f"{run.summary}")
            return

        latencies: list[tuple[int, float, int]] = []  # (mix index, seconds, status)
        lock = threading.Lock()
        counter = iter(range(args.requests))

        def client(n: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            local = []
            for i in counter:
                k = (i + n) % len(mix)
                who, path = mix[k]
                t = time.perf_counter()
                try:
                    status, _ = _get(conn, path, tokens[who])
                except (OSError, http.client.HTTPException):
                    status = 0
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                local.append((k, time.perf_counter() - t, status))
            with lock:
                latencies.extend(local)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)

    ms = [s * 1000 for _, s, _ in latencies]
    load = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    errors = sum(1 for _, _, status in latencies if status != 200)
    print(
        f"\nusage API, {CLUSTER}, week {start:%Y-%m-%d}..{end:%Y-%m-%d}, gunicorn -w {args.workers} "
        f"--threads {args.threads}, {args.clients} clients, {len(ms)} requests, {os.cpu_count()} CPUs, "
        f"load average after the run {load}"
    )
    print(
        f"overall: p50 {statistics.median(ms):.1f} ms, p95 {_percentile(ms, 0.95):.1f} ms, max {max(ms):.1f} ms, "
        f"errors {errors}, {len(ms) / elapsed:.0f} requests/s"
    )
    for k, (who, path) in enumerate(mix):
        sub = [s * 1000 for i, s, _ in latencies if i == k]
        print(
            f"  {who:6} {path[:90]:90} p50 {statistics.median(sub):6.1f}  p95 {_percentile(sub, 0.95):6.1f}  "
            f"max {max(sub):6.1f} ms"
        )


if __name__ == "__main__":
    main()
