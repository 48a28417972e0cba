"""Paging and timeouts shared by the Kubernetes and Kueue collectors."""

from __future__ import annotations

from django.conf import settings

# Objects per LIST page: large clusters are read in pages instead of one huge answer.
PAGE_SIZE = 500


def request_timeout() -> tuple[float, float]:
    """(connect, read) seconds for one API call: `GPUFINOPS_KUBERNETES_TIMEOUT`, connecting within 10 s."""
    t = float(settings.GPUFINOPS_KUBERNETES_TIMEOUT)
    return (min(t, 10.0), t)
