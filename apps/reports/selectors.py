"""Reads for the reports: the top idle workloads (or pods) of a period, and the archive as a person may see it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import F, Q, QuerySet, Sum

from apps.accounts.selectors import visible_team_names
from apps.inventory.models import Cluster
from apps.reports.models import ReportEdition, ReportSubscription
from apps.usage import money
from apps.usage.models import PodHour
from apps.usage.selectors import GROUP_KEYS, usage_report

TOP = 5


def workloads_available() -> bool:
    """The ledger groups by workload (`Kind/name`) once the usage selectors know the key."""
    return "workload" in GROUP_KEYS


@dataclass(frozen=True)
class IdleItem:
    """A workload (or pod) of a period: what it held, what of it sat idle, and their cost (exact decimals)."""

    team: str
    cluster: str
    namespace: str
    name: str
    allocated_gpu_hours: float
    idle_gpu_hours: float
    cost: Decimal
    idle_cost: Decimal
    unpriced_gpu_hours: float


def top_idle(
    *, start: datetime, end: datetime, visible_teams: set[str] | None, signal: str, limit: int = TOP
) -> tuple[str, list[IdleItem]]:
    """The workloads (or, without workloads in the ledger, pods) with the largest idle cost in `[start, end)`:
    ("workload" | "pod", items), largest idle cost first."""
    if workloads_available():
        report = usage_report(start=start, end=end, group_by=["team", "cluster", "workload"], signal=signal,
                              visible_teams=visible_teams)
        rows = [
            IdleItem(r.group["team"], r.group["cluster"], r.group.get("namespace", ""),
                     r.group["workload"] or "(workload not recorded)", r.figures.allocated_gpu_hours,
                     r.figures.idle_gpu_hours, r.figures.cost, r.figures.idle_cost, r.figures.unpriced_gpu_hours)
            for r in report.results
        ]
        kind = "workload"
    else:
        rows = _idle_pods(start=start, end=end, visible_teams=visible_teams, signal=signal)
        kind = "pod"
    rows = [r for r in rows if r.idle_gpu_hours > 0]
    rows.sort(key=lambda r: (-r.idle_cost, -r.idle_gpu_hours, r.team, r.cluster, r.namespace, r.name))
    return kind, rows[:limit]


def _idle_pods(*, start: datetime, end: datetime, visible_teams: set[str] | None, signal: str) -> list[IdleItem]:
    """Idle GPU-hours and idle cost per pod (PodHour: the only ledger rows that name pods)."""
    qs: QuerySet = PodHour.objects.filter(hour__gte=start, hour__lt=end)
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    names = dict(Cluster.objects.values_list("id", "name"))
    rows = (
        qs.values("team", "cluster_id", "namespace", "pod")
        .annotate(_allocated=Sum("allocated_gpu_hours"), _idle=Sum(f"idle_{signal}"), _cost=Sum("cost"),
                  _idle_cost=Sum(f"idle_cost_{signal}"), _unpriced=Sum("unpriced_gpu_hours"))
        .order_by(F("_idle_cost").desc(nulls_last=True), "team", "namespace", "pod")[:200]
    )
    return [
        IdleItem(r["team"], names.get(r["cluster_id"], str(r["cluster_id"])), r["namespace"], r["pod"],
                 r["_allocated"] or 0.0, r["_idle"] or 0.0, money.micro(r["_cost"]), money.micro(r["_idle_cost"]),
                 r["_unpriced"] or 0.0)
        for r in rows
    ]


# ---- The archive, as a person may see it ----


def scope_visible(scope_teams: Iterable[str] | None, visible: set[str] | None) -> bool:
    """An edition is visible to whoever sees every team it covers: its all-teams edition (with the fleet's
    capacity) only to those who see every team."""
    if visible is None:
        return True
    if scope_teams is None:
        return False
    teams = set(scope_teams)
    return bool(teams) and teams <= visible


def editions_visible_to(user, *, period: str | None = None) -> QuerySet:
    """Editions the user may see, newest period first."""
    qs = ReportEdition.objects.all()
    if period is not None:
        qs = qs.filter(period=period)
    visible = visible_team_names(user)
    if visible is None:
        return qs
    if not visible:
        return qs.none()
    # Team-scoped editions whose every team the user sees: filtered in Python (scopes are short lists).
    ids = [pk for pk, teams in qs.filter(~Q(scope="all")).values_list("pk", "scope_teams")
           if scope_visible(teams, visible)]
    return qs.filter(pk__in=ids)


def subscription_get(pk: int) -> ReportSubscription | None:
    """One subscription with its person (the unsubscribe link names it by id)."""
    return ReportSubscription.objects.select_related("user").filter(pk=pk).first()
