"""The API's throttle: at most `GPUFINOPS_API_RATE` requests per user in each window of the rate's period.

Why not DRF's `UserRateThrottle`: it keeps the timestamp of every request of the last period in the cache, one list
per user read, trimmed and written back whole on every request. Under the default `100000/hour` a busy user's
every request unpickled and pickled up to 100,000 floats (about 1.9 ms a request at 20,000, on this 2-core machine:
bench/README.md, 2026-12-02 "a throttle that costs the same at every request"), a cost that grew with use through
the hour, and concurrent requests wrote over each other's lists. Here a counter per user and window costs one small
cache operation whatever came before (two for a window's first request), and `incr` is atomic in Redis and under the
in-process cache's lock.

Windows are aligned to the epoch (an hour's rate: each clock hour, UTC), so a client may spend one window's
allowance at its end and the next one's at the start; `Retry-After` says when the current window ends.
"""

from __future__ import annotations

from rest_framework.throttling import UserRateThrottle


class UserWindowRateThrottle(UserRateThrottle):
    """DRF's per-user scope and rate (`DEFAULT_THROTTLE_RATES["user"]`), counted per fixed window."""

    # Set by DRF's __init__ from the rate (parse_rate); read only when a rate is set.
    num_requests: int
    duration: int
    window_end: float

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        self.now = self.timer()
        window = int(self.now // self.duration)
        self.window_end = float((window + 1) * self.duration)
        key = f"{key}_{window}"
        try:
            count = self.cache.incr(key)
        except ValueError:  # the window's first request; add() does nothing when a concurrent one came first
            count = 1 if self.cache.add(key, 1, self.duration) else self.cache.incr(key)
        return count <= self.num_requests

    def wait(self) -> float:
        """Seconds until the window ends (the 429's `Retry-After`)."""
        return max(0.0, self.window_end - self.timer())
