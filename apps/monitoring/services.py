"""Recording collection runs (the one write of this app).

`collection_run` wraps `apps.ingest.services.collect_cluster`: it binds the cluster to every log line of the
run (`logs.log_context`), times the run and hands the outcome to `record_run`, which stores it for
`/metrics`. The report is read by attribute (`written`, `failed`, `degraded`, `skipped`, `not_attempted`),
so this app never imports the adapter layer above it. Recording never fails a collection.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.inventory.models import Cluster
from apps.monitoring.logs import log_context
from apps.monitoring.models import CollectionRun, CollectionTotals, PreflightRun

log = logging.getLogger(__name__)

F_ = TypeVar("F_", bound=Callable[..., Any])


def _count(value: Any) -> int:
    return len(value) if value is not None else 0


def outcome_of(written: int, failed: int, not_attempted: int, error: str) -> str:
    """ok: nothing failed and nothing was left undone (degraded and skipped buckets are not the collector's
    failure: the bucket metrics show them); partial: something was written, something failed; failed:
    nothing was written and something failed, or the run raised."""
    if error and not written:
        return CollectionRun.Outcome.FAILED
    if failed or not_attempted or error:
        return CollectionRun.Outcome.PARTIAL if written else CollectionRun.Outcome.FAILED
    return CollectionRun.Outcome.OK


def record_run(
    cluster: Cluster,
    *,
    started_at: datetime,
    duration_seconds: float,
    report: Any = None,
    error: str = "",
) -> CollectionRun | None:
    """Store one run and add it to the cluster's running totals; prune runs older than
    `GPUFINOPS_COLLECTION_RUN_DAYS`. Returns the run, or None when it could not be stored (logged)."""
    written = _count(getattr(report, "written", None))
    failed = _count(getattr(report, "failed", None))
    degraded = _count(getattr(report, "degraded", None))
    skipped = _count(getattr(report, "skipped", None))
    not_attempted = _count(getattr(report, "not_attempted", None))
    if not error and failed:
        error = str(next(iter(report.failed.values()), ""))
    error = cluster.scrub(error)
    outcome = outcome_of(written, failed, not_attempted, error)
    finished_at = started_at + timedelta(seconds=duration_seconds)
    try:
        with transaction.atomic():
            run = CollectionRun.objects.create(
                cluster=cluster, started_at=started_at, finished_at=finished_at, duration_seconds=duration_seconds,
                outcome=outcome, written=written, failed=failed, degraded=degraded, skipped=skipped,
                not_attempted=not_attempted, error=error[:2000],
            )
            CollectionTotals.objects.get_or_create(cluster=cluster, outcome=outcome)
            CollectionTotals.objects.filter(cluster=cluster, outcome=outcome).update(
                runs=F("runs") + 1, duration_seconds=F("duration_seconds") + duration_seconds,
                buckets_written=F("buckets_written") + written, buckets_failed=F("buckets_failed") + failed,
            )
            keep_from = finished_at - timedelta(days=settings.GPUFINOPS_COLLECTION_RUN_DAYS)
            CollectionRun.objects.filter(cluster=cluster, finished_at__lt=keep_from).delete()
    except Exception:
        log.exception("could not record the collection run of %s", cluster.name)
        return None
    log.info(
        "collection run %s: %s in %.1fs (written %d, failed %d, degraded %d, skipped %d, not attempted %d)",
        cluster.name, outcome, duration_seconds, written, failed, degraded, skipped, not_attempted,
        extra={"outcome": outcome, "duration_seconds": round(duration_seconds, 3)},
    )
    return run


def collection_run(fn: F_) -> F_:
    """Decorate a `collect_cluster(cluster, ...)`-shaped function: bind `cluster` (and `bucket=None` until
    the function binds one per hour) to its log lines and record the run, whether it returns or raises."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cluster = args[0] if args else kwargs["cluster"]
        started_at, start = timezone.now(), time.monotonic()
        with log_context(cluster=cluster.name, bucket=None):
            try:
                report = fn(*args, **kwargs)
            except Exception as exc:
                record_run(cluster, started_at=started_at, duration_seconds=time.monotonic() - start,
                           error=f"{type(exc).__name__}: {exc}")
                raise
            record_run(cluster, started_at=started_at, duration_seconds=time.monotonic() - start, report=report)
        return report

    return wrapper  # type: ignore[return-value]


def record_preflight(cluster: Cluster, ran_at: datetime, checks: list[dict[str, Any]]) -> PreflightRun:
    """Keep one preflight's table (plain JSON rows with a `status`); ok when no row failed."""
    ok = not any(c.get("status") == "fail" for c in checks)
    return PreflightRun.objects.create(cluster=cluster, ran_at=ran_at, ok=ok, checks=checks)
