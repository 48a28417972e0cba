"""bench/api_bounds: bounded work per request (issue 11). Heavy and hostile usage requests against one gunicorn
worker over a week of a 10,000-GPU fleet; prints each answer's status, time and size and the worker's RSS.

    python bench/api_bounds.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench]

1. Reuses (or writes) the week of ``bench/api.py`` (``bench-api-large``: 1,250 nodes x 8 GPUs, 168 buckets
   through the real write path).
2. Starts gunicorn with ONE sync worker (so its RSS is the figure), the answer cache ON (in-process, capped).
3. Sends, as finance (sees every team): the 400-day hour-level request that used to take 24 s and 162 MB,
   then 20 distinct heavy requests (every grouping over the week, pod and workload level, CSV), each once.
4. Prints, per request: HTTP status, seconds, bytes; and the worker's RSS before, after each, and at the end.

Nothing is asserted: these are measurements (bench/README.md). The goals: the 400-day request answers
within 2 s with a 400, and the worker stays within 300 MB over the 20 requests.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _worker_pid(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return int(children[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_bench")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.db
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    from common import ensure_db

    ensure_db(args.db)
    import django

    django.setup()
    from api import CLUSTER, _free_port, fill  # bench/api.py
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command

    from apps.accounts.selectors import FINANCE_GROUP
    from apps.accounts.services import create_api_token

    call_command("migrate", verbosity=0)
    end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = end - timedelta(days=7)
    fill(start, end, 1)
    finance = User.objects.get_or_create(username="bench-bounds-finance")[0]
    finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    token = create_api_token(finance, 1)

    week = f"start={start:%Y-%m-%d}&end={end:%Y-%m-%d}"
    day = f"start={(end - timedelta(days=1)):%Y-%m-%d}&end={end:%Y-%m-%d}"
    long = f"start={(end - timedelta(days=400)):%Y-%m-%d}&end={end:%Y-%m-%d}"
    hostile = f"/api/v1/usage/?{long}&group_by=team,hour"
    heavy = [
        f"/api/v1/usage/?{week}&group_by=team,namespace,node_group,gpu_model,day",
        f"/api/v1/usage/?{week}&group_by=team,cluster,node_group,gpu_model",
        f"/api/v1/usage/?{week}&group_by=team,day&signal=gpu_util",
        f"/api/v1/usage/?{week}&group_by=team,day&signal=gr_engine_active",
        f"/api/v1/usage/?{week}&group_by=team,day&signal=tensor_active",
        f"/api/v1/usage/?{week}&group_by=team,namespace,day&format=csv",
        f"/api/v1/usage/?{week}&group_by=workload",
        f"/api/v1/usage/?{week}&group_by=team,workload,day",
        f"/api/v1/usage/?{week}&group_by=workload&format=csv",
        f"/api/v1/usage/?{day}&group_by=pod",
        f"/api/v1/usage/?{day}&group_by=pod&format=csv",
        f"/api/v1/usage/?{day}&group_by=team,hour",
        f"/api/v1/usage/?{day}&group_by=node_group,gpu_model,hour",
        f"/api/v1/usage/?start={(end - timedelta(days=31)):%Y-%m-%d}&end={end:%Y-%m-%d}&group_by=team,hour",
        f"/api/v1/usage/?start={(end - timedelta(days=93)):%Y-%m-%d}&end={end:%Y-%m-%d}&group_by=team,day",
        f"/api/v1/usage/?start={(end - timedelta(days=400)):%Y-%m-%d}&end={end:%Y-%m-%d}&group_by=team,namespace",
        f"/api/v1/idle-allocations/?page_size=1000&cluster={CLUSTER}",
        f"/api/v1/fragmentation/?start={(end - timedelta(days=93)):%Y-%m-%d}&end={end:%Y-%m-%d}",
        f"/api/v1/data-status/?start={(end - timedelta(days=93)):%Y-%m-%d}&end={end:%Y-%m-%d}",
        f"/api/v1/usage/?{week}&group_by=pod",
    ]
    port = _free_port()
    env = {**os.environ, "DEBUG": "0", "SECRET_KEY": "bench-bounds-" + "x" * 50, "ALLOWED_HOSTS": "127.0.0.1",
           "SECURE_SSL_REDIRECT": "0", "LOG_LEVEL": "WARNING", "GPUFINOPS_SECRETS_KEY": "",
           "GPUFINOPS_API_RATE": "1000000/hour"}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "gpufinops.wsgi:application", "-b", f"127.0.0.1:{port}", "-w", "1",
         "--timeout", "120", "--log-level", "warning"],
        cwd=ROOT, env=env, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        worker = _worker_pid(server.pid)
        print(f"worker pid {worker}: RSS at start {_rss_mb(worker):.0f} MB")
        rows = []
        for path in [hostile, *heavy]:
            t = time.perf_counter()
            conn.request("GET", path, headers={"Authorization": f"Token {token}"})
            response = conn.getresponse()
            body = response.read()
            rows.append((response.status, time.perf_counter() - t, len(body), _rss_mb(worker), path))
        peak = max(r[3] for r in rows)
        for status, seconds, size, rss, path in rows:
            print(f"{status}  {seconds:6.2f} s  {size / 1e6:7.2f} MB  RSS {rss:5.0f} MB  {path[:110]}")
        print(f"\n400-day hour-level request: HTTP {rows[0][0]} in {rows[0][1]:.2f} s ({rows[0][2]} bytes)")
        print(f"worker RSS over the 20 heavy requests: peak {peak:.0f} MB, end {_rss_mb(worker):.0f} MB")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
