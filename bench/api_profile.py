"""bench/api_profile: where an uncached usage request's time goes, in-process, against bench/api.py's week.

    python bench/api_profile.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench] [--iterations 40]
                                [--trivial-path /api/v1/teams/] [--top 25] [--sort tottime]

Sends bench/api.py's usage mix and the trivial endpoint through Django's test client (the whole stack below
gunicorn: middleware, DRF, the selectors, PostgreSQL over a socket), answer cache off, and prints for each:
process CPU and wall time per request (CPU is this process's alone, but a busy machine still moves it by tens of per
cent; wall adds the waits on PostgreSQL), queries per request, Python function calls per request (a count, which the
load does not move), then a cProfile of the usage mix: the cumulative share of named parts and the top functions.
Fills the week first when it is missing (bench/api.py's `fill`). Nothing is asserted (bench/README.md).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (label, what cProfile's function key must match: (file suffix, function name)); the parts overlap.
PARTS: list[tuple[str, str, str]] = [
    ("token authentication", "apps/accounts/authentication.py", "authenticate_credentials"),
    ("throttle", "apps/common/throttling.py", "allow_request"),
    ("content negotiation", "rest_framework/views.py", "perform_content_negotiation"),
    ("parameters and period", "apps/common/api.py", "request_window"),
    ("usage_report", "apps/usage/selectors/report.py", "usage_report"),
    ("  compute_usage_report", "apps/usage/selectors/report.py", "compute_usage_report"),
    ("    grouped rollup sum", "apps/usage/selectors/report.py", "_grouped_rows"),
    ("    capacity + provisional (staff)", "apps/usage/selectors/capacity.py", "capacity_and_provisional"),
    ("    provisional check (member)", "apps/usage/selectors/capacity.py", "has_provisional_buckets"),
    ("SQL compilation (as_sql)", "django/db/models/sql/compiler.py", "as_sql"),
    ("cursor.execute (send and wait)", "django/db/backends/utils.py", "execute"),
    ("response rendering", "rest_framework/response.py", "rendered_content"),
    ("as_dict", "apps/usage/selectors/report.py", "as_dict"),
]


def _client_for(token: str):
    from django.test import Client

    return Client(HTTP_AUTHORIZATION=f"Token {token}", SERVER_NAME="127.0.0.1")


def _timed(requests: list[tuple[object, str]], iterations: int) -> tuple[float, float]:
    """Median CPU and wall milliseconds per request over `iterations` passes of `requests`."""
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(iterations):
        c0, w0 = time.process_time(), time.perf_counter()
        for client, path in requests:
            response = client.get(path)
            if response.status_code != 200:
                raise RuntimeError(f"{path} -> {response.status_code}: {response.content[:300]!r}")
        cpu.append((time.process_time() - c0) * 1000 / len(requests))
        wall.append((time.perf_counter() - w0) * 1000 / len(requests))
    return statistics.median(cpu), statistics.median(wall)


def _queries(requests: list[tuple[object, str]]) -> list[int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    out = []
    for client, path in requests:
        with CaptureQueriesContext(connection) as ctx:
            client.get(path)
        out.append(len(ctx.captured_queries))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_bench")
    parser.add_argument("--iterations", type=int, default=40, help="passes over the mix (and the trivial endpoint)")
    parser.add_argument("--trivial-path", default="/api/v1/teams/")
    parser.add_argument("--top", type=int, default=25, help="functions listed")
    parser.add_argument("--sort", default="tottime", help="pstats order of the list: tottime (own time), cumulative")
    args = parser.parse_args()
    os.environ.update({"GPUFINOPS_API_CACHE_SECONDS": "0", "DEBUG": "0",
                       "SECRET_KEY": "bench-api-" + "x" * 50, "ALLOWED_HOSTS": "127.0.0.1",
                       "SECURE_SSL_REDIRECT": "0", "DB_CONN_MAX_AGE": "60", "LOG_LEVEL": "WARNING"})
    from api import prepare, query_mix  # bench/api.py (the script's folder is on sys.path)

    start, end, tokens = prepare(args.db, 1)
    clients = {who: _client_for(token) for who, token in tokens.items()}
    mix = [(clients[who], path) for who, path in query_mix(start, end)]
    trivial = [(clients["staff"], args.trivial_path)]

    _timed(mix + trivial, 3)  # warm: imports, connections, the per-process caches
    load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    t_cpu, t_wall = _timed(trivial, args.iterations * len(mix))
    u_cpu, u_wall = _timed(mix, args.iterations)
    print(f"load average before: {load}; {args.iterations} passes over the mix of {len(mix)}, "
          f"{args.iterations * len(mix)} trivial requests")
    print(f"trivial {args.trivial_path}: CPU {t_cpu:.2f} ms, wall {t_wall:.2f} ms a request, "
          f"queries {_queries(trivial)}")
    print(f"usage mix, uncached:  CPU {u_cpu:.2f} ms, wall {u_wall:.2f} ms a request, queries {_queries(mix)}")
    print(f"trivial / usage: CPU {t_cpu / u_cpu:.1%}, wall {t_wall / u_wall:.1%} "
          "(the in-process analogue of wrk's usage / trivial requests/s)")

    # Python function calls per request: a count, so unlike CPU and wall time it does not move with the load.
    calls = {}
    for label, requests in (("trivial", trivial * len(mix)), ("usage", mix)):
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.iterations):
            for client, path in requests:
                client.get(path)
        profile.disable()
        stats = pstats.Stats(profile)
        calls[label] = stats.total_calls / (args.iterations * len(requests))  # type: ignore[attr-defined]
    print(f"Python function calls a request: trivial {calls['trivial']:,.0f}, usage {calls['usage']:,.0f} "
          f"(trivial / usage {calls['trivial'] / calls['usage']:.1%})")
    total = stats.total_tt  # type: ignore[attr-defined]
    print(f"\ncProfile of the usage mix, {args.iterations} passes: {total:.2f} s in all "
          f"({total * 1000 / (args.iterations * len(mix)):.2f} ms a request with the profiler's overhead)")
    raw = stats.stats  # type: ignore[attr-defined]
    for label, suffix, name in PARTS:
        # cumulative time of every function of that name in that file (a recursive one counted once per key)
        cum = sum(ct for (file, _line, fn), (_cc, _nc, _tt, ct, _callers) in raw.items()
                  if fn == name and file.endswith(suffix))
        print(f"  {label:36} {cum:7.2f} s  {cum / total:6.1%}")
    print()
    stats.sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
