"""Report periods: ISO weeks (`2026-W47`, Monday 00:00 to Monday 00:00 UTC) and calendar months (`2026-11`),
and whether a period is final (every hour of it, for every cluster that existed in it, has a final OK bucket).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.db.models import Count, Max, Min, Q

from apps.billing.selectors import bill_stamp
from apps.common.timeutils import HOUR, iso_week_start, month_start, next_month, to_utc
from apps.inventory.models import Cluster
from apps.usage.models import Bucket

WEEKLY = "weekly"
MONTHLY = "monthly"
KINDS = (WEEKLY, MONTHLY)
_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


@dataclass(frozen=True, order=True)
class Period:
    """A report period: `[start, end)` UTC."""

    start: datetime
    end: datetime
    kind: str
    label: str

    @property
    def hours(self) -> int:
        return int((self.end - self.start) / HOUR)

    @property
    def noun(self) -> str:
        return "week" if self.kind == WEEKLY else "month"

    def previous(self, n: int = 1) -> Period:
        """The period `n` before this one."""
        p = self
        for _ in range(n):
            p = period_containing(self.kind, p.start - HOUR)
        return p

    def following(self) -> Period:
        return period_containing(self.kind, self.end)

    def billing_month(self) -> str:
        """The calendar month a week rolls into (the month of its last day), for the e-mail's note."""
        return (self.end - timedelta(days=1)).strftime("%Y-%m")


def week(t: datetime) -> Period:
    start = iso_week_start(t)
    year, number, _ = start.date().isocalendar()
    return Period(start, start + timedelta(days=7), WEEKLY, f"{year}-W{number:02d}")


def month(t: datetime) -> Period:
    start = month_start(t)
    return Period(start, next_month(start), MONTHLY, f"{start:%Y-%m}")


def period_containing(kind: str, t: datetime) -> Period:
    return week(t) if kind == WEEKLY else month(t)


def last_complete(kind: str, now: datetime) -> Period:
    """The last period of `kind` that has ended by `now`."""
    return period_containing(kind, period_containing(kind, to_utc(now)).start - HOUR)


def parse_period(text: str) -> Period:
    """`2026-W47` (ISO week) or `2026-11` (calendar month); ValueError with a readable reason otherwise."""
    text = (text or "").strip()
    if m := _WEEK.match(text):
        try:
            monday = date.fromisocalendar(int(m[1]), int(m[2]), 1)
        except ValueError as exc:
            raise ValueError(f"{text!r} is not an ISO week (weeks run 01 to 52 or 53)") from exc
        if not 1970 <= monday.year <= 9000:
            raise ValueError("year out of range")
        return week(datetime(monday.year, monday.month, monday.day, tzinfo=UTC))
    if m := _MONTH.match(text):
        year, mon = int(m[1]), int(m[2])
        if not 1 <= mon <= 12 or not 1970 <= year <= 9000:
            raise ValueError(f"{text!r} is not a month (YYYY-MM, 01 to 12)")
        return month(datetime(year, mon, 1, tzinfo=UTC))
    raise ValueError("a period is an ISO week like 2026-W47 or a month like 2026-11")


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
