"""Idle allocations (ledger.md, "Idle allocations"): the ledger's read, answered by the findings app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

# Idle allocations are findings now (apps/findings, docs/findings.md): computed at collection with the other
# kinds and kept with their start and end. That app sits above the ledger, so it registers its reader here when
# Django starts (FindingsConfig.ready); this name stays for the callers of the ledger's read.
IdleAllocationReader = Callable[..., list[dict[str, Any]]]
_idle_allocation_reader: IdleAllocationReader | None = None


def register_idle_allocation_reader(reader: IdleAllocationReader) -> None:
    global _idle_allocation_reader
    _idle_allocation_reader = reader


def idle_allocation_list(
    *,
    visible_teams: set[str] | None,
    cluster: str | None = None,
    team: str | None = None,
    signal: str | None = None,
) -> list[dict[str, Any]]:
    """Pods holding GPUs that have done (almost) nothing for at least ``GPUFINOPS_IDLE_MIN_HOURS`` consecutive
    hours (activity below ``GPUFINOPS_IDLE_THRESHOLD``) up to their cluster's latest bucket, largest idle
    GPU-hours first: the idle-allocation findings (``apps.findings.selectors.idle_allocation_list``). An hour
    without any measurement never counts as idle. A ``signal`` other than the default raises ValueError."""
    if _idle_allocation_reader is None:
        raise ImproperlyConfigured("idle allocations are findings: add apps.findings to INSTALLED_APPS")
    return _idle_allocation_reader(visible_teams=visible_teams, cluster=cluster, team=team, signal=signal)


