"""bench/pages: server time of every dashboard page, for a team lead and for staff, on the demo or a week of `large`.

    python bench/pages.py --dataset demo  [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench_pages_demo]
    python bench/pages.py --dataset large [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench_pages_large]
                          [-n 5] [--users lead,staff,finance] [--reuse] [--only PAGES] [--profile PAGES]

Data:
- demo: a fresh database (dropped and created again unless --reuse), migrated, then `python manage.py demo`
  (the default demo scenario, a week collected through the production path, with findings, capacity and queue
  history).
- large: bench/api.py's fill of the last 7 whole UTC days of a 10,000-GPU fleet through the ledger write path
  (reused when already there), then findings rebuilt from that ledger (`rebuild_from_ledger`: idle allocations and
  missing signals; the fill writes no Prometheus-only findings, capacity or queue snapshots, so those pages show
  little). Pages are asked for that week (`?start=..&end=..`).

Each page is requested in-process through Django's test Client with DEBUG off: one warm-up (its SQL statements are
counted with CaptureQueriesContext), then N requests each after clearing the cache (what the first viewer of a
period waits: the usage reports behind the pages are cached), then N requests on a warm cache. Server time is the
time the Client takes to produce the response (middleware, view, template) on this process; no network, no browser.
/livez is the trivial reference in the same run. The workload detail page is the most expensive workload the user
may see. Nothing here is asserted: these are measurements (see bench/README.md, "bench/pages").
"""

from __future__ import annotations

import argparse
import cProfile
import io
import logging
import os
import pstats
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOALS_MS = {"demo": 300, "large": 1000}
PAGES = [  # (name, path, takes the period in its query string)
    ("livez (reference)", "/livez", False),
    ("overview", "/", True),
    ("workloads", "/workloads/", True),
    ("workload detail", None, True),
    ("teams", "/teams/", True),
    ("fleet", "/fleet/", True),
    ("queues", "/queues/", True),
    ("capacity", "/capacity/", True),
    ("data status", "/data-status/", False),
    ("findings", "/findings/", False),
    ("reports", "/reports/", False),
    ("glossary", "/glossary/", False),
]


def load() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def recreate_db(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", choices=["demo", "large"], required=True)
    parser.add_argument("--db", default=None)
    parser.add_argument("-n", type=int, default=5, help="timed requests per page and cache state")
    parser.add_argument("--users", default="lead,staff", help="comma-separated: lead, staff, finance")
    parser.add_argument("--reuse", action="store_true", help="demo: keep an already seeded database")
    parser.add_argument("--profile", default="", help="comma-separated page names to profile (cProfile, cold "
                        "cache, staff or the first user)")
    parser.add_argument("--only", default="", help="comma-separated page names to time (default: every page)")
    args = parser.parse_args()
    db = args.db or f"postgres://postgres@127.0.0.1:5432/gpufinops_bench_pages_{args.dataset}"

    # Production-like settings: DEBUG off (no debug cursor, cached template loader), persistent DB connection
    # like the deployed server (DB_CONN_MAX_AGE), in-process cache (the default without CACHE_URL).
    os.environ.update({
        "DATABASE_URL": db, "DEBUG": "0", "SECRET_KEY": "bench-pages-" + "x" * 50, "ALLOWED_HOSTS": "testserver",
        "SECURE_SSL_REDIRECT": "0", "SESSION_COOKIE_SECURE": "0", "CSRF_COOKIE_SECURE": "0",
        "DB_CONN_MAX_AGE": "60", "LOG_LEVEL": "WARNING",
    })
    os.environ.pop("CACHE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    from common import ensure_db  # bench/common.py (the script's folder is on sys.path)

    t0 = time.perf_counter()
    if args.dataset == "demo" and not args.reuse:
        recreate_db(db)
    ensure_db(db)
    import django

    django.setup()
    from django.core.management import call_command

    # The lead's 403 on /fleet/ is expected: its warning per request would bury the table.
    logging.getLogger("django.request").setLevel(logging.ERROR)
    call_command("migrate", verbosity=0)
    window = ""
    if args.dataset == "demo":
        from apps.inventory.models import Cluster

        if not (args.reuse and Cluster.objects.exists()):
            # Its own process: the demo command forks workers and serves the simulator (as `manage.py demo` does).
            subprocess.run([sys.executable, str(ROOT / "manage.py"), "demo"], check=True, env=os.environ)
    else:
        from api import fill  # bench/api.py

        from apps.findings.services import rebuild_from_ledger
        from apps.inventory.models import Cluster

        end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        start = end - timedelta(days=7)
        fill(start, end, 1)
        cluster = Cluster.objects.get(name="bench-api-large")
        from apps.findings.models import FindingHour

        if not FindingHour.objects.filter(cluster=cluster).exists():
            t1 = time.perf_counter()
            flagged = rebuild_from_ledger(cluster, [start + timedelta(hours=h) for h in range(168)])
            print(f"findings rebuilt from the ledger: {flagged} subjects flagged, {time.perf_counter() - t1:.0f}s",
                  flush=True)
        window = f"start={start:%Y-%m-%d}&end={end:%Y-%m-%d}"
    print(f"data ready: {time.perf_counter() - t0:.0f}s", flush=True)
    measure(args, window)


def users_and_targets(wanted: list[str], window_start, window_end) -> list[tuple[str, object, str]]:
    """(label, user, workload detail path) per user kind; the lead leads the team that spent most in the window."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db.models import Sum
    from django.urls import reverse

    from apps.accounts.selectors import FINANCE_GROUP
    from apps.accounts.services import add_team_member
    from apps.dashboard.selectors.shared import NO_WORKLOAD
    from apps.usage.models import PodHour

    users = get_user_model()
    rows = PodHour.objects.filter(hour__gte=window_start, hour__lt=window_end)
    by_team = rows.values("team").annotate(c=Sum("cost")).order_by("-c")
    team = by_team[0]["team"]

    def most_expensive(qs) -> str:
        top = (qs.values("cluster__name", "namespace", "workload").annotate(c=Sum("cost")).order_by("-c").first())
        return reverse("dashboard:workload", args=[top["cluster__name"], top["namespace"],
                                                   top["workload"] or NO_WORKLOAD])

    out = []
    for kind in wanted:
        user = users.objects.get_or_create(username=f"bench-pages-{kind}")[0]
        if kind == "staff":
            user.is_staff = True
            user.save()
            out.append((kind, user, most_expensive(rows)))
        elif kind == "finance":
            user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
            out.append((kind, user, most_expensive(rows)))
        else:
            add_team_member(team, user.username, create=True)  # the large fill writes rows, not Team entries
            out.append((f"lead ({team})", user, most_expensive(rows.filter(team=team))))
    return out


def measure(args: argparse.Namespace, window: str) -> None:
    from django.conf import settings
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from apps.dashboard.scope import parse_window

    w, _ = parse_window(dict(p.split("=") for p in window.split("&") if p))
    goal = GOALS_MS[args.dataset]
    targets = users_and_targets([u.strip() for u in args.users.split(",") if u.strip()], w.start, w.end)
    print(f"\npages, dataset {args.dataset}, period {w.start:%Y-%m-%d %H:%M}..{w.end:%Y-%m-%d %H:%M}, "
          f"DEBUG={settings.DEBUG}, {os.cpu_count()} CPUs, n={args.n}, goal {goal} ms")
    print(f"load average before: {load()}", flush=True)
    header = (f"{'user':<22}{'page':<20}{'status':>7}{'cold p50':>10}{'cold max':>10}{'warm p50':>10}{'SQL q':>7}"
              f"{'SQL ms':>8}")
    results = []
    for label, user, detail in targets:
        client = Client(raise_request_exception=False)  # a page that fails is a 500 in the table, not the end
        client.force_login(user)
        print("\n" + header)
        for name, path, scoped in PAGES:
            if args.only and name not in args.only.split(",") and not name.startswith("livez"):
                continue
            path = path or detail
            url = f"{path}?{window}" if scoped and window else path
            cache.clear()
            with CaptureQueriesContext(connection) as ctx:  # the warm-up, cold: its statements are counted
                status = client.get(url).status_code
            queries = len(ctx.captured_queries)
            sql_ms = sum(float(q["time"]) for q in ctx.captured_queries) * 1000  # database share of the warm-up
            cold, warm = [], []
            for _ in range(args.n):
                cache.clear()
                t = time.perf_counter()
                client.get(url)
                cold.append((time.perf_counter() - t) * 1000)
            for _ in range(args.n):
                t = time.perf_counter()
                client.get(url)
                warm.append((time.perf_counter() - t) * 1000)
            mark = "  MISSES GOAL" if statistics.median(cold) > goal else ""
            print(f"{label:<22}{name:<20}{status:>7}{statistics.median(cold):>10.1f}{max(cold):>10.1f}"
                  f"{statistics.median(warm):>10.1f}{queries:>7}{sql_ms:>8.1f}{mark}", flush=True)
            results.append((label, name, url, statistics.median(cold)))
    print(f"\nload average after: {load()}")
    over = [r for r in results if r[3] > goal]
    print(f"pages over {goal} ms (cold median): " + (", ".join(f"{r[0]} {r[1]} {r[3]:.0f} ms" for r in over) or "none"))
    for page in [p for p in args.profile.split(",") if p]:
        label, user, detail = next((t for t in targets if t[0] == "staff"), targets[0])
        path = {n: p for n, p, _ in PAGES}.get(page) or detail
        scoped = {n: s for n, _, s in PAGES}.get(page, True)
        url = f"{path}?{window}" if scoped and window else path
        client = Client(raise_request_exception=False)  # a page that fails is a 500 in the table, not the end
        client.force_login(user)
        client.get(url)
        cache.clear()
        prof = cProfile.Profile()
        prof.enable()
        client.get(url)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(60)
        print(f"\ncProfile of {label} {url} (cold cache):\n{out.getvalue()}")

if __name__ == "__main__":
    main()
