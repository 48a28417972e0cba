"""bench/api_throttle: the cost of one throttle check after N earlier requests of the same user, DRF's
`UserRateThrottle` (a list of every request's time in the last period) against the API's `UserWindowRateThrottle`
(one counter per window), on the configured cache (in-process unless CACHE_URL is set).

    python bench/api_throttle.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_api_bench] [--prior 0 5000 20000]

Uses bench/api.py's database and staff user (`prepare`). Nothing is asserted (bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_api_bench")
    parser.add_argument("--prior", type=int, nargs="+", default=[0, 5000, 20000])
    args = parser.parse_args()
    from api import prepare  # bench/api.py (the script's folder is on sys.path)

    prepare(args.db, 1)
    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.http import HttpRequest
    from rest_framework.throttling import UserRateThrottle

    from apps.common.throttling import UserWindowRateThrottle

    request = HttpRequest()
    request.user = User.objects.get(username="bench-api-staff")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for prior in args.prior:
        for throttle in (UserRateThrottle, UserWindowRateThrottle):
            cache.clear()
            for _ in range(prior):
                throttle().allow_request(request, None)
            samples = []
            for _ in range(5):
                t = time.process_time_ns()
                for _ in range(200):
                    throttle().allow_request(request, None)
                samples.append((time.process_time_ns() - t) / 200 / 1e6)
            print(f"{throttle.__name__:24} after {prior:6} requests: {statistics.median(samples):.3f} ms CPU a check")
    cache.clear()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
