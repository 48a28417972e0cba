"""Report periods: ISO weeks (`2026-W47`, Monday 00:00 to Monday 00:00 UTC) and calendar months (`2026-11`), whose
bounds are the one period rule's (`apps.common.periods`, re-exported here), and whether a period is final
(every hour of it, for every cluster that existed in it, has a final OK bucket).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Max, Min, Q

from apps.billing.selectors import bill_stamp
from apps.common.periods import (  # noqa: F401 (re-exported: the reports' periods are the rule's)
    KINDS,
    MONTHLY,
    WEEKLY,
    Period,
    comparison_periods,
    last_complete,
    month,
    parse_period,
    period_containing,
    week,
)
from apps.common.timeutils import HOUR, to_utc
from apps.inventory.models import Cluster
from apps.usage.models import Bucket

# ---- Coverage: is the period final? ----


@dataclass(frozen=True)
class ClusterCoverage:
    """One cluster's hours in a period, by what the ledger has for them."""

    cluster: str
    hours: int  # hours in the period
    elapsed: int  # of which have ended by now
    final: int  # final and OK: counted as collected
    provisional: int  # collected but not final yet
    failed: int  # failed, degraded, abandoned or without DCGM data
    missing: int  # ended hours with no bucket at all

    @property
    def ratio(self) -> float:
        return self.final / self.hours if self.hours else 1.0

    @property
    def complete(self) -> bool:
        return self.final == self.hours

    def as_dict(self) -> dict:
        return {"cluster": self.cluster, "hours": self.hours, "elapsed": self.elapsed, "final": self.final,
                "provisional": self.provisional, "failed": self.failed, "missing": self.missing,
                "ratio": round(self.ratio, 6)}


@dataclass(frozen=True)
class PeriodState:
    period: Period
    ended: bool
    clusters: list[ClusterCoverage] = field(default_factory=list)

    @property
    def final(self) -> bool:
        """Every hour of the period is over and, for every cluster that existed in it (at least one), final and
        OK. A period no cluster was collecting in has nothing to close."""
        return self.ended and bool(self.clusters) and all(c.complete for c in self.clusters)

    @property
    def collected(self) -> int:
        return sum(c.final for c in self.clusters)

    @property
    def expected(self) -> int:
        return sum(c.hours for c in self.clusters)

    @property
    def ratio(self) -> float | None:
        return self.collected / self.expected if self.expected else None

    def reason(self) -> str | None:
        """Why the period is not final, in one line; None when it is."""
        if self.final:
            return None
        if not self.clusters:
            return f"no cluster was collecting in this {self.period.noun}"
        if not self.ended:
            elapsed = max((c.elapsed for c in self.clusters), default=0)
            return f"the {self.period.noun} is not over ({elapsed} of {self.period.hours} hours so far)"
        parts = []
        for c in self.clusters:
            if c.complete:
                continue
            detail = [f"{n} {what}" for n, what in ((c.provisional, "provisional"), (c.failed, "failed"),
                                                    (c.missing, "not collected")) if n]
            parts.append(f"{c.cluster}: {c.final} of {c.hours} hours final ({', '.join(detail)})")
        return "; ".join(parts)

    def as_dict(self) -> dict:
        return {"final": self.final, "ended": self.ended, "hours": self.period.hours,
                "ratio": None if self.ratio is None else round(self.ratio, 6),
                "reason": self.reason(), "clusters": [c.as_dict() for c in self.clusters]}


FAILED_STATUSES = (Bucket.Status.FAILED, Bucket.Status.SOURCE_MISSING, Bucket.Status.DEGRADED_SOURCE,
                   Bucket.Status.ABANDONED)


def period_state(period: Period, now: datetime) -> PeriodState:
    """Coverage per cluster: hours collected (final and OK) out of the hours of the period.

    A cluster existed in the period when its first bucket is before the period's end: from then on every hour
    of the period counts, including the ones before its first collected hour (a week whose data starts on
    Monday 22:00 is partial, and stays provisional).
    """
    now = to_utc(now)
    ended = now >= period.end
    elapsed = max(0, min(period.hours, int((now - period.start) // HOUR)))
    first = dict(Bucket.objects.values("cluster_id").annotate(first=Min("hour")).values_list("cluster_id", "first"))
    counts = (
        Bucket.objects.filter(hour__gte=period.start, hour__lt=period.end)
        .values("cluster_id")
        .annotate(
            final=Count("id", filter=Q(state=Bucket.State.FINAL, status=Bucket.Status.OK)),
            provisional=Count("id", filter=Q(state=Bucket.State.PROVISIONAL, status=Bucket.Status.OK)),
            failed=Count("id", filter=Q(status__in=FAILED_STATUSES)),
            n=Count("id"),
        )
    )
    by_cluster = {row["cluster_id"]: row for row in counts}
    clusters = []
    for cluster in Cluster.objects.order_by("name"):
        if cluster.pk not in first or first[cluster.pk] >= period.end:
            continue
        row = by_cluster.get(cluster.pk, {"final": 0, "provisional": 0, "failed": 0, "n": 0})
        ended_buckets = Bucket.objects.filter(cluster=cluster, hour__gte=period.start,
                                              hour__lt=min(period.end, period.start + elapsed * HOUR)).count()
        clusters.append(ClusterCoverage(
            cluster=cluster.name, hours=period.hours, elapsed=elapsed, final=row["final"],
            provisional=row["provisional"], failed=row["failed"], missing=max(elapsed - ended_buckets, 0),
        ))
    return PeriodState(period, ended, clusters)


def ledger_stamp(period: Period) -> str:
    """Changes whenever the ledger of the period does (every bucket write stamps `collected_at`), or its cloud bill
    (apps.billing: an import for a closed period restates it in the billed basis)."""
    agg = Bucket.objects.filter(hour__gte=period.start, hour__lt=period.end).aggregate(
        latest=Max("collected_at"), n=Count("id"), ok=Count("id", filter=Q(status=Bucket.Status.OK)),
    )
    raw = f"{agg['latest'].isoformat() if agg['latest'] else ''}|{agg['n']}|{agg['ok']}"
    bill = bill_stamp(period.start, period.end)  # "" without a bill: the stamps of bill-less periods stay as they were
    return hashlib.sha256((raw + (f"|{bill}" if bill else "")).encode()).hexdigest()
