"""Reads of what the service recorded about its own work (collection runs, preflights)."""

from __future__ import annotations

from apps.monitoring.models import PreflightRun


def last_preflight(cluster_name: str) -> PreflightRun | None:
    """The newest preflight of the named cluster, or None (never run, or no such cluster)."""
    return PreflightRun.objects.filter(cluster__name=cluster_name).select_related("cluster").first()


def last_preflights() -> dict[str, PreflightRun]:
    """Cluster name -> its newest preflight, for every cluster that has one."""
    out: dict[str, PreflightRun] = {}
    for run in PreflightRun.objects.select_related("cluster").order_by("cluster__name", "-ran_at"):
        out.setdefault(run.cluster.name, run)
    return out
