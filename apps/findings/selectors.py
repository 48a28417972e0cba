"""Reads of the findings: the list the API and the page show, counts for the overviews, infra loss for the
reports, and the idle allocations of `/api/v1/idle-allocations/`.

Visibility is one argument, `visible_teams` (`apps.accounts.selectors.visible_team_names`; None = every team):
team members see findings of their teams only; findings of the platform (no team: zero-allocatable nodes,
unattributed activity, missing signals, GPUs nobody held) and tenant-label attempts are for staff and finance.

A finding is listed once its run is long enough: idle allocations, idle-held pods and idle claims from
GPUFINOPS_IDLE_MIN_HOURS consecutive hours, stragglers from GPUFINOPS_STRAGGLER_MIN_HOURS, every other kind from
its first hour. Shorter runs are kept (they are how a run gets there) but not shown.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import Count, Max, Q, QuerySet, Sum

from apps.common.inlists import in_batches
from apps.inventory.models import Cluster
from apps.usage import money
from apps.usage.activity import default_signal
from apps.usage.models import Bucket, PodHour

from .constants import IDLE_KINDS, Kind
from .grouping import Member, within
from .models import Finding, FindingHour

KINDS: tuple[str, ...] = tuple(Kind.values)
STAFF_KINDS = frozenset({Kind.TEAM_LABEL_REJECTED})
DECIMALS = 6


def min_hours(kind: str) -> int:
    if kind in IDLE_KINDS or kind == Kind.IDLE_CLAIM:
        return max(settings.GPUFINOPS_IDLE_MIN_HOURS, 1)
    if kind == Kind.STRAGGLER:
        return max(settings.GPUFINOPS_STRAGGLER_MIN_HOURS, 1)
    return 1


def listed_q() -> Q:
    """Runs long enough to be findings (see the module docstring)."""
    q = Q()
    for kind in KINDS:
        q |= Q(kind=kind, hours__gte=min_hours(kind))
    return q


def visible_q(visible_teams: set[str] | None) -> Q:
    if visible_teams is None:
        return Q()
    return Q(team__in=sorted(visible_teams)) & ~Q(team="") & ~Q(kind__in=sorted(STAFF_KINDS))


def finding_list(
    *,
    visible_teams: set[str] | None,
    start: datetime | None = None,
    end: datetime | None = None,
    kinds: Sequence[str] = (),
    clusters: Sequence[str] = (),
    teams: Sequence[str] = (),
    namespaces: Sequence[str] = (),
    workloads: Sequence[str] = (),
    nodes: Sequence[str] = (),
    ongoing: bool | None = None,
) -> QuerySet[Finding]:
    """Findings overlapping `[start, end)` (a run `[start, end or now)`), newest first, filtered."""
    qs = Finding.objects.filter(visible_q(visible_teams)).filter(listed_q()).select_related("cluster")
    if end is not None:
        qs = qs.filter(start__lt=end)
    if start is not None:
        qs = qs.filter(Q(end__isnull=True) | Q(end__gt=start))
    for name, values in (("kind", kinds), ("cluster__name", clusters), ("team", teams), ("namespace", namespaces),
                         ("workload", workloads), ("node", nodes)):
        if values:
            qs = qs.filter(**{f"{name}__in": list(values)})
    if ongoing is not None:
        qs = qs.filter(end__isnull=ongoing)
    return qs.order_by("-last_hour", "-start", "kind", "cluster__name", "subject")


def finding_get(*, pk: int, visible_teams: set[str] | None) -> Finding | None:
    return Finding.objects.filter(visible_q(visible_teams)).filter(listed_q()).select_related("cluster").filter(
        pk=pk).first()



def workload_findings(*, visible_teams: set[str] | None, start: datetime, end: datetime, cluster: str,
                      namespace: str, workload: str) -> list[Member]:
    """A workload's findings overlapping `[start, end)` (the page's period), each with the figures of its hours
    inside the period (a run may straddle it): two queries whatever the number of findings."""
    runs = list(finding_list(visible_teams=visible_teams, start=start, end=end, clusters=[cluster],
                             namespaces=[namespace], workloads=[workload]))
    if not runs:
        return []
    hours = FindingHour.objects.filter(
        visible_q(visible_teams), cluster_id=runs[0].cluster_id, kind__in=sorted({r.kind for r in runs}),
        subject__in=sorted({r.subject for r in runs}), hour__gte=start, hour__lt=end,
    ).values_list("kind", "subject", "hour", "gpu_hours", "cost", "allocated_cost")
    return within(runs, hours, start, end)


def workload_finding_kinds(*, visible_teams: set[str] | None, start: datetime, end: datetime,
                           workloads: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], list[str]]:
    """(cluster, namespace, workload) -> the kinds of its findings overlapping `[start, end)`, in KINDS' order:
    one query for a page's few rows (the overview's top idle workloads)."""
    if not workloads:
        return {}
    which = Q()
    for cluster, namespace, workload in workloads:
        which |= Q(cluster__name=cluster, namespace=namespace, workload=workload)
    found: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for c, ns, wl, kind in finding_list(visible_teams=visible_teams, start=start, end=end).filter(which).order_by() \
            .values_list("cluster__name", "namespace", "workload", "kind").distinct():
        found[(c, ns, wl)].add(kind)
    return {k: [kind for kind in KINDS if kind in v] for k, v in found.items()}

# ---- Counts for the overviews and the page (templates/findings/includes/counts.html) ----


@dataclass(frozen=True)
class KindCount:
    kind: str
    findings: int
    ongoing: int
    gpu_hours: float
    cost: Decimal
    unpriced_gpu_hours: float

    @property
    def label(self) -> str:
        return self.kind.replace("_", " ")


@dataclass(frozen=True)
class TeamInfraLoss:
    team: str
    gpu_hours: float
    cost: Decimal
    charged: Decimal | None = None  # the team's charge over the period (with `charges=True`)

    @property
    def share(self) -> float | None:
        """Infra loss as a share of the charge."""
        return float(self.cost / self.charged) if self.charged else None


@dataclass(frozen=True)
class FindingCounts:
    """What the counts include renders: per kind, the findings overlapping the period (and how many go on),
    their GPU-hours and cost within the period; the infra loss (held unhealthy GPUs) in total and per team, and
    whether finance credits it back."""

    start: datetime
    end: datetime
    kinds: list[KindCount]
    infra_loss_gpu_hours: float
    infra_loss_cost: Decimal
    infra_loss_by_team: dict[str, TeamInfraLoss] = field(default_factory=dict)
    credited: bool = False
    team: str | None = None

    @property
    def total(self) -> int:
        return sum(k.findings for k in self.kinds)

    @property
    def ongoing(self) -> int:
        return sum(k.ongoing for k in self.kinds)

    def query(self) -> str:
        """The findings page's query string for the same scope."""
        return urlencode([("start", f"{self.start:%Y-%m-%dT%H:%MZ}"), ("end", f"{self.end:%Y-%m-%dT%H:%MZ}"),
                          *([("team", self.team)] if self.team else [])])


def counts_for(
    *,
    visible_teams: set[str] | None,
    start: datetime,
    end: datetime,
    team: str | None = None,
    cluster: str | None = None,
    charges: bool = False,
) -> FindingCounts:
    """Finding counts and infra loss over `[start, end)` for what the caller sees (one team with `team`, one
    cluster with `cluster`). With `charges`, each team's charge over the period comes along (the usage report's
    cost), so the infra loss can be shown next to it: every team charged is listed, with or without a loss."""
    runs = finding_list(visible_teams=visible_teams, start=start, end=end, teams=[team] if team else (),
                        clusters=[cluster] if cluster else ())
    per_kind = {row["kind"]: row for row in runs.order_by().values("kind").annotate(
        n=Count("id"), open=Count("id", filter=Q(end__isnull=True)))}
    hours = FindingHour.objects.filter(visible_q(visible_teams), hour__gte=start, hour__lt=end)
    if team:
        hours = hours.filter(team=team)
    if cluster:
        hours = hours.filter(cluster__name=cluster)
    figures = {(r["kind"], r["team"]): r for r in hours.values("kind", "team").annotate(
        g=Sum("gpu_hours"), c=Sum("cost"), u=Sum("unpriced_gpu_hours"))}
    kinds = []
    for kind in KINDS:
        if kind not in per_kind:
            continue
        rows = [r for (k, _t), r in figures.items() if k == kind]
        kinds.append(KindCount(
            kind=kind, findings=per_kind[kind]["n"], ongoing=per_kind[kind]["open"],
            gpu_hours=round(float(sum((money.to_decimal(r["g"]) for r in rows), money.ZERO)), DECIMALS),
            cost=sum((money.to_decimal(r["c"]) for r in rows), money.ZERO),
            unpriced_gpu_hours=round(float(sum((money.to_decimal(r["u"]) for r in rows), money.ZERO)), DECIMALS),
        ))
    held = infra_loss_rows(visible_teams=visible_teams, start=start, end=end, team=team, cluster=cluster)
    charged: dict[str, Decimal] = {}
    if charges:
        from apps.usage.selectors import usage_report

        report = usage_report(start=start, end=end, group_by=["team"], visible_teams=visible_teams,
                              team=team, cluster=cluster)
        charged = {r.group["team"]: r.figures.cost for r in report.results}
    by_team = {t: TeamInfraLoss(t, round(float(held.get(t, (0, 0))[0]), DECIMALS),
                                money.micro(held.get(t, (0, money.ZERO))[1]), charged.get(t) if charges else None)
               for t in sorted(set(held) | set(charged))}
    return FindingCounts(
        start=start, end=end, kinds=kinds,
        infra_loss_gpu_hours=round(float(sum((h for h, _c in held.values()), Decimal(0))), DECIMALS),
        infra_loss_cost=money.micro(sum((c for _h, c in held.values()), money.ZERO)),
        infra_loss_by_team=by_team, credited=settings.GPUFINOPS_INFRA_LOSS_CREDIT, team=team,
    )


def infra_loss_rows(*, visible_teams: set[str] | None, start: datetime, end: datetime, team: str | None = None,
                    cluster: str | None = None) -> dict[str, tuple[Decimal, Decimal]]:
    """Team -> (GPU-hours, cost) its pods were charged on unhealthy GPUs in `[start, end)`: each GPU-hour once,
    however many reasons flagged it, split by holder (a shared GPU's tenants each their own share)."""
    rows = FindingHour.objects.filter(kind=Kind.UNHEALTHY_GPU, hour__gte=start, hour__lt=end).exclude(team="")
    if cluster:
        rows = rows.filter(cluster__name=cluster)
    seen: set[tuple] = set()
    out: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), money.ZERO])
    for cluster_id, hour, node, gpu, detail in rows.order_by("cluster_id", "hour", "node", "gpu_uuid", "subject") \
            .values_list("cluster_id", "hour", "node", "gpu_uuid", "detail"):
        if (cluster_id, hour, node, gpu) in seen:
            continue
        seen.add((cluster_id, hour, node, gpu))
        for h in (detail or {}).get("holders", []):
            t = h.get("team", "")
            if not t or (visible_teams is not None and t not in visible_teams) or (team and t != team):
                continue
            out[t][0] += Decimal(str(h.get("gpu_hours", 0)))
            out[t][1] += Decimal(h.get("cost", "0"))
    return {t: (v[0], v[1]) for t, v in sorted(out.items())}


def infra_loss_by_team(*, start: datetime, end: datetime, visible_teams: set[str] | None) -> dict[str, TeamInfraLoss]:
    """Infra loss per team over `[start, end)`: GPU-hours and cost the team held on unhealthy GPUs (exact sums of
    the hours inside the period, whatever the findings' runs straddle)."""
    return {t: TeamInfraLoss(t, round(float(h), DECIMALS), money.micro(c))
            for t, (h, c) in infra_loss_rows(visible_teams=visible_teams, start=start, end=end).items()}


def latest_hour(cluster: Cluster) -> datetime | None:
    """The cluster's latest collected hour (its newest written bucket or ledger row): runs ending there go on."""
    written = Q(collected_at__isnull=False) | Q(status=Bucket.Status.OK)
    hours = [Bucket.objects.filter(written, cluster=cluster).aggregate(h=Max("hour"))["h"],
             PodHour.objects.filter(cluster=cluster).aggregate(h=Max("hour"))["h"]]
    return max((h for h in hours if h is not None), default=None)


# ---- /api/v1/idle-allocations/ (ledger.md "Idle allocations"), a view over the idle findings ----


def idle_allocation_list(
    *,
    visible_teams: set[str] | None,
    cluster: str | None = None,
    team: str | None = None,
    signal: str | None = None,
) -> list[dict[str, Any]]:
    """Pods idle (plain or holding memory) for at least GPUFINOPS_IDLE_MIN_HOURS consecutive hours up to their
    cluster's latest collected hour, as the ledger's idle allocations have always been listed.

    Read from the idle findings' hours: the streak is followed back from the latest hour while each hour's
    activity stays below GPUFINOPS_IDLE_THRESHOLD (at most GPUFINOPS_IDLE_LOOKBACK_HOURS). Findings are computed
    under the default signal: another `signal` raises ValueError.
    """
    if signal is not None and signal != default_signal():
        raise ValueError(f"idle allocations are found under the default signal ({default_signal()}) only")
    threshold = settings.GPUFINOPS_IDLE_THRESHOLD
    needed = max(settings.GPUFINOPS_IDLE_MIN_HOURS, 1)
    clusters = Cluster.objects.order_by("name")
    if cluster is not None:
        clusters = clusters.filter(name=cluster)
    found: list[dict[str, Any]] = []
    for c in clusters:
        latest = latest_hour(c)
        if latest is None:
            continue
        runs = Finding.objects.filter(visible_q(visible_teams), cluster=c, kind__in=IDLE_KINDS, last_hour=latest)
        if team is not None:
            runs = runs.filter(team=team)
        uids = sorted(set(runs.values_list("subject", flat=True)))
        if not uids:
            continue
        oldest = latest - timedelta(hours=settings.GPUFINOPS_IDLE_LOOKBACK_HOURS)
        history: dict[str, list[FindingHour]] = defaultdict(list)
        for batch in in_batches(uids):
            for row in FindingHour.objects.filter(cluster=c, kind__in=IDLE_KINDS, subject__in=batch,
                                                  hour__lte=latest, hour__gt=oldest).order_by("subject", "-hour"):
                history[row.subject].append(row)
        for uid in uids:
            streak = []
            expected = latest
            for row in history[uid]:
                if row.hour != expected or float(row.detail.get("activity", 1.0)) >= threshold:
                    break
                streak.append(row)
                expected = row.hour - timedelta(hours=1)
            if len(streak) < needed:
                continue
            now = streak[0]
            working = math.fsum(float(r.detail.get("working_gpu_hours", 0.0)) for r in streak)
            idle = sum((Decimal(r.detail.get("sums", {}).get("idle_gpu_hours", "0")) for r in streak), Decimal(0))
            found.append({
                "cluster": c.name, "team": now.team, "namespace": now.namespace, "pod": now.pod, "node": now.node,
                "node_group": now.detail.get("node_group", ""), "gpu_model": now.detail.get("gpu_model", ""),
                "gpus": round(float(now.detail.get("gpus", 0.0)), DECIMALS), "idle_since": streak[-1].hour,
                "last_bucket": latest, "idle_hours": len(streak),
                "activity": round(working / (working + float(idle)), DECIMALS) if working + float(idle) > 0 else 0.0,
                "allocated_gpu_hours": round(float(sum((r.allocated_gpu_hours for r in streak), Decimal(0))), DECIMALS),
                "idle_gpu_hours": round(float(idle), DECIMALS),
                "cost": sum((r.allocated_cost for r in streak), money.ZERO),
                "idle_cost": sum((Decimal(r.detail.get("idle_cost", "0")) for r in streak), money.ZERO),
                "kind": streak[0].kind,
            })
    found.sort(key=lambda r: (-r["idle_gpu_hours"], r["cluster"], r["namespace"], r["pod"]))
    return found
