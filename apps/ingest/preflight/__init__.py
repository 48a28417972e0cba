"""The preflight (`manage.py check_cluster NAME`, also run by `add_cluster`): before the first bill, ask the
cluster's own APIs whether everything the ledger needs is there, and say what is missing and the exact fix.

`run_preflight` gathers the facts (`probe.py`), evaluates the checks (`checks.py`, pure), records the table
(`apps.monitoring.services.record_preflight`, shown per cluster on the staff page `/clusters/<name>/preflight/`)
and returns it; `table` prints it. docs/operations.md, "Preflight".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from apps.ingest.preflight.checks import FAIL, Check, Facts, evaluate
from apps.ingest.preflight.probe import kubernetes_facts, prometheus_facts
from apps.inventory.models import Cluster
from apps.monitoring.services import record_preflight


@dataclass(frozen=True)
class Preflight:
    cluster: str
    ran_at: datetime
    checks: list[Check]

    @property
    def ok(self) -> bool:
        """No check failed: nothing found would leave hours unmeasured or unattributed."""
        return not any(c.status == FAIL for c in self.checks)


def run_preflight(cluster: Cluster, *, at: datetime | None = None, record: bool = True) -> Preflight:
    """Every check of the cluster, as of `at` (Prometheus' evaluation time; default now)."""
    ran_at = timezone.now()
    at = at or ran_at
    kube = kubernetes_facts(cluster)
    prom = prometheus_facts(cluster, at, kube.get("gpu_nodes", ()))
    checks = evaluate(Facts(**kube, **prom))
    if record:
        record_preflight(cluster, ran_at, [c.as_dict() for c in checks])
    return Preflight(cluster.name, ran_at, checks)


def table(result: Preflight) -> str:
    """The table `check_cluster` prints: check, status, what was found, fix."""
    rows = [("check", "status", "found", "fix")] + [(c.name, c.status.upper(), c.found, c.fix) for c in result.checks]
    width = [max(len(r[i]) for r in rows[:]) for i in range(2)]
    lines = [f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]}" + (f"\n{'':<{width[0] + width[1] + 4}}fix: {r[3]}"
                                                                   if r[3] and r is not rows[0] else "")
             for r in rows]
    failed = sum(1 for c in result.checks if c.status == FAIL)
    warned = sum(1 for c in result.checks if c.status == "warn")
    verdict = ("every check passed" if not failed and not warned else
               f"{failed} failed (hours would be unmeasured or unattributed), {warned} warned")
    return "\n".join([f"preflight of {result.cluster} at {result.ran_at:%Y-%m-%d %H:%M} UTC", *lines, verdict])
