"""View 4, queues and quota (for admins, every queue): quota next to the work it bought, what waited and why, and the
GPU-hours each team waited next to the GPU-hours it held idle."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.urls import reverse
from django.utils import timezone

from apps.capacity.constants import PendingReason
from apps.capacity.selectors import Waited, pending_gpu_hours, pending_list
from apps.dashboard import charts
from apps.dashboard.scope import Scope
from apps.dashboard.selectors.shared import plain_query, report, teams_in_scope
from apps.dashboard.tables import Block, Column
from apps.queues.selectors import (
    QueuePresence,
    QueueUsage,
    WaitSummary,
    admission_wait_summary,
    local_queue_list,
    queue_list,
    queue_presence,
    queue_usage,
    quota_series,
)
from apps.usage.figures import UsageFigures
from apps.usage.selectors import UsageReport

QUEUE_COLUMNS = [
    Column("queue", "Cluster / ClusterQueue", "text", "queue"), Column("local_queues", "LocalQueues", "text"),
    Column("cohort", "Cohort"), Column("nominal_gpus", "Nominal (GPUs)", "gpus", "quota"),
    Column("reserved_gpus", "Reserved now (GPUs)", "gpus", "quota"),
    Column("borrowed_gpus", "Borrowed now (GPUs)", "gpus", "borrowed"),
    Column("pending_now", "Pending now", "int", "pending"),
    Column("wait_p50", "Admission wait p50", "seconds", "admission-wait"),
    Column("wait_p95", "Admission wait p95", "seconds", "admission-wait"),
]
QUEUE_USAGE_COLUMNS = [
    Column("queue", "Cluster / ClusterQueue", "text", "queue"),
    Column("allocated_gpu_hours", "Allocated (GPU-h)", "gpuh", "allocated"),
    Column("working_gpu_hours", "Working (GPU-h)", "gpuh", "working"),
    Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh", "idle-in-allocations"),
    Column("borrowed_idle_gpu_hours", "Borrowed while idle (GPU-h)", "gpuh", "borrowed-while-idle"),
    Column("waited_gpu_hours", "GPU-hours waited", "gpuh", "gpu-hours-waited"),
]
PARADOX_COLUMNS = [
    Column("team", "Team", "text", "team"),
    Column("waited_gpu_hours", "GPU-hours waited (pending)", "gpuh", "gpu-hours-waited"),
    Column("idle_gpu_hours", "GPU-hours held idle", "gpuh", "idle-in-allocations"),
    Column("idle_cost", "Idle cost (USD)", "usd", "idle-cost"),
]
REASON_COLUMNS = [
    Column("reason", "Why the work waited", "text", "pending"), Column("explanation", "Meaning"),
    Column("waited_gpu_hours", "GPU-hours waited", "gpuh", "gpu-hours-waited"),
    Column("share", "Share", "ratio"), Column("items", "Pending pods / workloads", "int", "pending"),
]
VERDICTS = {
    "quota": "your queue's quota is the bottleneck: Kueue had not reserved quota for the work",
    "fragmentation": "the fleet's fragmentation is the bottleneck: the node group had enough free GPUs, but no node "
                     "with enough for one pod",
    "capacity": "the fleet's capacity is the bottleneck: not enough free GPUs",
    "other": "neither quota nor GPUs: GPUs were free and something else (taints, affinity, images) blocked",
}
QueueKey = tuple[str, str]  # cluster, ClusterQueue


@dataclass(frozen=True)
class QueueReads:
    """What the queues page reads for its scope, narrowed to the clusters asked for."""

    usage: list[QueueUsage]
    reserved: dict[QueueKey, float]  # GPUs reserved now per ClusterQueue
    local_queues: dict[QueueKey, list[str]]  # the caller's LocalQueues of each ClusterQueue
    pending_now: dict[QueueKey, int]
    waits: dict[QueueKey, WaitSummary]
    waited: list[Waited]
    presence: list[QueuePresence]
    idle_team: UsageReport
    quota: list[dict[str, Any]]  # quota per ClusterQueue at the hours it changed


def _reads(scope: Scope, now: datetime) -> QueueReads:
    w = scope.window
    at = min(now, w.end)
    teams = teams_in_scope(scope)
    clusters = set(scope.filters.get("cluster", ()))

    def keep(name: str) -> bool:
        return not clusters or name in clusters

    reserved: dict[QueueKey, float] = defaultdict(float)
    for q in queue_list(at=at, visible_teams=teams):
        if q.resource.startswith("nvidia.com/") and keep(q.cluster.name):
            reserved[(q.cluster.name, q.cluster_queue.name)] += q.reserved
    lqs: dict[QueueKey, list[str]] = defaultdict(list)
    for lq in local_queue_list(at=at, visible_teams=teams):
        if keep(lq.cluster.name):
            lqs[(lq.cluster.name, lq.cluster_queue)].append(f"{lq.namespace}/{lq.name}")
    pending_now: dict[QueueKey, int] = defaultdict(int)
    for p in pending_list(at=at, visible_teams=teams):
        if keep(p.cluster.name) and p.cluster_queue:
            pending_now[(p.cluster.name, p.cluster_queue)] += 1
    return QueueReads(
        usage=[u for u in queue_usage(start=w.start, end=w.end, signal=scope.signal, visible_teams=teams)
               if keep(u.cluster)],
        reserved=reserved, local_queues=lqs, pending_now=pending_now,
        waits=admission_wait_summary(start=w.start, end=w.end, visible_teams=teams),
        waited=[x for x in pending_gpu_hours(start=w.start, end=w.end, visible_teams=teams) if keep(x.cluster)],
        presence=queue_presence(at=at, visible_teams=scope.visible_teams),
        idle_team=report(scope, ["team"], filters={k: v for k, v in scope.usage_filters.items()
                                                   if k in ("cluster", "team")}),
        quota=_changes([r for r in quota_series(start=w.start, end=w.end, visible_teams=teams) if keep(r["cluster"])]),
    )


def _queue_rows(scope: Scope, reads: QueueReads) -> list[dict[str, Any]]:
    """One row per ClusterQueue: quota now, what its pods allocated and worked, what waited for it."""
    waited: dict[QueueKey, float] = defaultdict(float)
    for x in reads.waited:
        waited[(x.cluster, x.cluster_queue)] += x.gpu_hours
    rows = []
    for u in reads.usage:
        key = (u.cluster, u.cluster_queue)
        wait = reads.waits.get(key)
        rows.append({
            "queue": f"{u.cluster} / {u.cluster_queue}", "cluster": u.cluster, "cluster_queue": u.cluster_queue,
            "local_queues": ", ".join(sorted(reads.local_queues.get(key, []))) or "—", "cohort": u.cohort or "—",
            "nominal_gpus": u.nominal_gpus, "reserved_gpus": reads.reserved.get(key, 0.0),
            "borrowed_gpus": u.borrowed_gpus, "allocated_gpu_hours": u.allocated_gpu_hours,
            "working_gpu_hours": u.working_gpu_hours, "idle_gpu_hours": u.idle_gpu_hours,
            "borrowed_idle_gpu_hours": u.borrowed_idle_gpu_hours, "borrowed_idle": u.borrowed_idle,
            "pending_now": reads.pending_now.get(key, 0), "waited_gpu_hours": waited.get(key, 0.0),
            "wait_p50": wait.p50_seconds if wait else None, "wait_p95": wait.p95_seconds if wait else None,
            "href": reverse("dashboard:queues") + "?" + plain_query(scope, cluster=u.cluster),
        })
    return rows


def _paradox(scope: Scope, reads: QueueReads) -> list[dict[str, Any]]:
    """Per team: GPU-hours waited (pending x GPUs asked) next to GPU-hours held idle."""
    waited: dict[str, float] = defaultdict(float)
    for x in reads.waited:
        waited[x.team] += x.gpu_hours
    idle = reads.idle_team.figures_by("team")
    return [{"team": team, "waited_gpu_hours": waited.get(team, 0.0),
             "idle_gpu_hours": idle.get(team, UsageFigures()).idle_gpu_hours,
             "idle_cost": idle.get(team, UsageFigures()).idle_cost,
             "href": reverse("dashboard:overview") + "?" + plain_query(scope, team=team)}
            for team in sorted(set(waited) | set(idle))]


def _reasons(waited: Sequence[Waited]) -> tuple[list[dict[str, Any]], float, str]:
    """Why the work waited: GPU-hours and items per reason, largest first; their total; the verdict."""
    by_reason: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for x in waited:
        by_reason[x.reason][0] += x.gpu_hours
        by_reason[x.reason][1] += x.items
    total = math.fsum(v[0] for v in by_reason.values())
    reasons: list[dict[str, Any]] = [
        {"reason": reason, "explanation": PendingReason(reason).label if reason in PendingReason.values else reason,
         "waited_gpu_hours": v[0], "share": v[0] / total if total else None, "items": v[1]}
        for reason, v in sorted(by_reason.items(), key=lambda kv: -kv[1][0])]
    verdict = ""
    if reasons and total:
        top = reasons[0]
        verdict = (f"{top['share'] * 100:.0f} % of the GPU-hours waited ({top['waited_gpu_hours']:,.1f} of "
                   f"{total:,.1f}) were for reason “{top['reason']}”: {VERDICTS.get(top['reason'], '')}.")
    return reasons, total, verdict


def _blocks(scope: Scope, reads: QueueReads, rows: list[dict[str, Any]], paradox: list[dict[str, Any]],
            reasons: list[dict[str, Any]], total_waited: float, total_idle: float) -> list[Block]:
    blocks = [
        Block("queues", _queue_title(rows), QUEUE_COLUMNS, rows, open=True,
              term="queue", empty=_queue_empty(scope, reads.presence),
              note="Nominal, reserved and borrowed: GPU devices in Kueue's latest snapshot of the period. Admission "
                   "wait: creation to admission of the Kueue workloads admitted in the period"
                   + ("." if scope.sees_all else " (your teams')."))]
    if rows:
        blocks.append(Block(
            "queue-usage", "What the quota bought", QUEUE_USAGE_COLUMNS, rows, open=True, term="borrowed-while-idle",
            totals={"queue": "Total", **{c.key: math.fsum(r[c.key] for r in rows) for c in QUEUE_USAGE_COLUMNS[1:]}},
            note="GPU-hours of the queue's pods in the ledger" + ("." if scope.sees_all else " (your teams' pods).")))
    blocks += [
        Block("paradox", f"{_whose(scope)} waited {total_waited:,.1f} GPU-hours for GPUs while holding "
                         f"{total_idle:,.1f} GPU-hours idle" if paradox else "Nothing waited and nothing was held idle",
              PARADOX_COLUMNS, paradox,
              figure=charts.grouped_bars("paradox", [p["team"] for p in paradox],
                                         [("waited", [p["waited_gpu_hours"] for p in paradox]),
                                          ("idle", [p["idle_gpu_hours"] for p in paradox])],
                                         unit="gpuh", y_title="GPU-hours") if paradox else None,
              term="gpu-hours-waited", aria="GPU-hours waited versus GPU-hours held idle, per team",
              note="GPU-hours waited = at each collection, the GPUs each pending pod or Kueue workload asked for "
                   "(in physical-GPU equivalents, as the ledger shares them: a MIG slice N/7, or N/4 on A30, a "
                   "time-sliced replica 1/R) x the time to the next collection (at most an hour)."),
        Block("reasons", "Why the work waited" if reasons else "No pending GPU work in the period", REASON_COLUMNS,
              reasons, open=True, term="pending", empty="No GPU work waited in the period (or none was collected)."),
    ]
    if reads.quota:
        blocks.append(Block(
            "quota", "Reserved GPUs against the nominal quota over time",
            [Column("t", "Hour (UTC)"), Column("cluster", "Cluster"), Column("cluster_queue", "ClusterQueue"),
             Column("nominal_gpus", "Nominal (GPUs)", "gpus", "quota"),
             Column("reserved_gpus", "Reserved (GPUs)", "gpus", "quota"),
             Column("borrowed_gpus", "Borrowed (GPUs)", "gpus", "borrowed")], reads.quota,
            figure=charts.quota_lines("quota", reads.quota), term="quota",
            aria="Reserved, nominal and borrowed GPUs per ClusterQueue over time"))
    return blocks


def queues_page(scope: Scope, now: datetime | None = None) -> dict[str, Any]:
    """View 4 (and, for admins, every queue): quota next to the work it bought, what waited and why, and the
    GPU-hours the team waited next to the GPU-hours it held idle."""
    reads = _reads(scope, now or timezone.now())
    rows = _queue_rows(scope, reads)
    paradox = _paradox(scope, reads)
    reasons, total_waited, verdict = _reasons(reads.waited)
    total_idle = math.fsum(p["idle_gpu_hours"] for p in paradox)
    return {"blocks": _blocks(scope, reads, rows, paradox, reasons, total_waited, total_idle), "rows": rows,
            "paradox": paradox, "reasons": reasons, "verdict": verdict, "presence": reads.presence,
            "total_waited": total_waited, "total_idle": total_idle}


def _changes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hours at which a queue's quota figures changed (and its last hour): what a step chart draws."""
    out: list[dict[str, Any]] = []
    last: dict[QueueKey, tuple[float, float, float]] = {}
    for i, r in enumerate(rows):
        key = (r["cluster"], r["cluster_queue"])
        values = (r["nominal_gpus"], r["reserved_gpus"], r["borrowed_gpus"])
        final = i + 1 == len(rows) or (rows[i + 1]["cluster"], rows[i + 1]["cluster_queue"]) != key
        if last.get(key) != values or final:
            out.append({**r, "t": r["hour"].strftime("%Y-%m-%d %H:%M")})
        last[key] = values
    return out


def _whose(scope: Scope) -> str:
    teams = scope.filters.get("team") or (sorted(scope.visible_teams) if scope.visible_teams is not None else None)
    if teams is None:
        return "Teams"
    return ", ".join(teams) if len(teams) <= 3 else f"Your {len(teams)} teams"


def _queue_title(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No ClusterQueue"
    over = [r for r in rows if r["reserved_gpus"] > r["nominal_gpus"]]
    text = f"{len(rows)} ClusterQueue{'s' if len(rows) != 1 else ''}"
    if over:
        text += f"; {len(over)} over its nominal quota now (borrowing)"
    return text


def _queue_empty(scope: Scope, presence: list[QueuePresence]) -> str:
    if not presence and not scope.sees_all:
        return "None yet: your teams have not appeared in any cluster (no GPU-hours, pending work or LocalQueue)."
    if not presence or not any(p.collected for p in presence):
        return "Not collected yet: no queue snapshot has been taken on the clusters you can see."
    if not any(p.kueue for p in presence):
        return "None: Kueue is not installed on the clusters you can see (no ClusterQueues)."
    total = sum(p.cluster_queues for p in presence)
    if total and not scope.sees_all:
        return (f"Kueue has {total} ClusterQueue{'s' if total != 1 else ''} on the clusters you can see, but none "
                "has a LocalQueue in your teams' namespaces: not visible to you.")
    if scope.filtered:
        return "No ClusterQueue matches the filters."
    return "None: Kueue answered but has no ClusterQueues."
