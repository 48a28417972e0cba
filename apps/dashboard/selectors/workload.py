"""View 3, one workload: its pods, the GPUs they held, activity under every signal, cost and idle cost over time."""

from __future__ import annotations

from dataclasses import asdict
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from apps.common.timeutils import HOUR
from apps.dashboard import charts
from apps.dashboard.scope import SIGNAL_NAMES, Scope
from apps.dashboard.selectors.history import History, change_vs_history, history
from apps.dashboard.selectors.overview import COST_COLUMNS, HOURS_COLUMNS
from apps.dashboard.selectors.shared import NOTE, bucket_label, bucket_rows, figures_row, mode_labels, report, tile
from apps.dashboard.tables import Block, Column
from apps.findings.grouping import INFRA_LOSS_KINDS, Group, Member, badge, cause_key, group
from apps.findings.selectors import workload_findings
from apps.usage.activity import SIGNALS
from apps.usage.figures import Unit, UsageFigures
from apps.usage.selectors import PodUsage, Seen, workload_pods, workload_seen

POD_COLUMNS = [
    Column("pod", "Pod", "text", ""), Column("node", "Node"),
    Column("node_group", "Node group", "text", "node-group", secondary=True),
    Column("gpu_model", "GPU model", secondary=True),
    Column("mode", "Handed out by", "text", "allocation-mode", secondary=True),
    Column("resources", "Request", secondary=True),
    Column("gpus", "GPUs held", "gpus", "allocated"), Column("queue", "Queue", "text", "queue"),
    Column("first_hour", "From (UTC)", "datetime"), Column("until", "Until (UTC)", "datetime"),
    Column("allocated_gpu_hours", "Allocated (GPU-h)", "gpuh", "allocated"),
    Column("working_gpu_hours", "Working (GPU-h)", "gpuh", "working"),
    Column("idle_gpu_hours", "Idle in allocations (GPU-h)", "gpuh", "idle-in-allocations"),
    Column("unmeasured_gpu_hours", "Unmeasured (GPU-h)", "gpuh", "unmeasured"),
    Column("activity", "Activity", "activity", "activity"),
    Column("cost", "Cost (USD)", "usd", "cost"), Column("idle_cost", "Idle cost (USD)", "usd", "idle-cost"),
    Column("findings", "Findings", "badges", "finding", beside_name=True),
]
WHY_COLUMNS = [
    Column("cause", "Finding", "text", "finding"), Column("where", "Where"),
    Column("money", "USD", "usd"), Column("what", "Money is"),
    Column("hours", "Hours flagged", "int"), Column("gpu_hours", "GPU-hours", "gpuh"),
]
WORKLOAD_HOURLY_DAYS = 8
SIGNAL_COLUMNS = [Column(f"activity_{s}", f"{charts.SIGNAL_STYLES[s]['name']}", "activity", "signals")
                  for s in SIGNALS]


def pod_row(p: PodUsage, findings: list[str] | None = None) -> dict[str, Any]:
    """A pod as its table row: where it ran, its queue (LocalQueue → ClusterQueue), until the end of its last hour,
    and the badges of its findings in the period."""
    facts = {k: v for k, v in asdict(p).items() if k != "figures"}
    facts["findings"] = findings or []
    # A DRA claim allocated with no pod consuming it has rows of its own (workload `ResourceClaim/<name>`).
    facts["pod"] = p.pod or "(no pod: the claim holds its devices)"
    return figures_row(p.figures, **facts, queue=" → ".join(v for v in (p.local_queue, p.cluster_queue) if v),
                       until=p.last_hour + HOUR, mode=mode_labels([p.allocation_mode]))


def _activity_rows(per_signal: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per bucket with the activity under every signal (a gap where a signal measured nothing)."""
    activity: dict[str, dict[str, Any]] = {}
    for s, rows in per_signal.items():
        for r in rows:
            activity.setdefault(r["t"], {"t": r["t"]})[f"activity_{s}"] = r["activity"]
    return [activity[t] for t in sorted(activity)]


def _tiles(scope: Scope, totals: UsageFigures, hist: History, pods: int) -> list[dict[str, Any]]:
    def ch(field: str, kind: Unit) -> dict[str, Any]:
        return change_vs_history(getattr(totals, field), hist, hist.series((), field), kind)

    return [
        tile("GPU cost (USD)", totals.cost, "usd", "cost", delta=ch("cost", "usd")),
        tile("Idle in allocations (USD)", totals.idle_cost, "usd", "idle-cost", delta=ch("idle_cost", "usd")),
        tile("Allocated GPU-hours", totals.allocated_gpu_hours, "gpuh", "allocated",
             delta=ch("allocated_gpu_hours", "gpuh")),
        tile("Working GPU-hours", totals.working_gpu_hours, "gpuh", "working"),
        tile("Idle in allocations (GPU-hours)", totals.idle_gpu_hours, "gpuh", "idle-in-allocations"),
        tile("Unmeasured GPU-hours", totals.unmeasured_gpu_hours, "gpuh", "unmeasured"),
        tile(f"Activity ({charts.SIGNAL_STYLES[scope.signal]['name']})", totals.activity, "activity", "activity"),
        tile("Pods", pods, "int", ""),
    ]


def _over_time(scope: Scope, name: str, totals: dict[str, Any], per_signal: dict[str, list[dict[str, Any]]],
               bucket: str) -> list[Block]:
    """Activity per signal, cost and GPU-hours per bucket."""
    series = per_signal[scope.signal]
    if not series:
        return []
    activity_rows = _activity_rows(per_signal)
    measured = [r["activity"] for r in series if r["activity"] is not None]
    verdict = (f"{name} was busy {totals['activity'] * 100:.1f} % of its measured GPU-hours"
               if totals["activity"] is not None else f"{name}'s activity was not measured")
    when = Column("t", bucket_label(scope.window, bucket))
    return [
        Block("activity", verdict, [when, *SIGNAL_COLUMNS], activity_rows,
              figure=charts.signal_lines("activity", [r["t"] for r in activity_rows],
                                         {s: [r.get(f"activity_{s}") for r in activity_rows] for s in SIGNALS}),
              term="signals", aria="Activity per signal over time, percent",
              note="Activity = working / (working + idle) GPU-hours of the bucket under each DCGM signal; gaps are "
                   f"buckets without any measurement. {len(measured)} of {len(series)} buckets measured."),
        Block("cost", f"${totals['idle_cost']:,.2f} of ${totals['cost']:,.2f} was idle in allocations",
              [when, *COST_COLUMNS], series, figure=charts.cost_split("cost", series),
              totals={**totals, "t": "Total"}, term="idle-cost", aria="Cost per bucket: working versus idle, USD",
              note=NOTE.format(signal=SIGNAL_NAMES[scope.signal])),
        Block("hours", f"{totals['allocated_gpu_hours']:,.1f} GPU-hours held", [when, *HOURS_COLUMNS], series,
              figure=charts.hours_split("hours", series), totals={**totals, "t": "Total"}, term="gpu-hour",
              aria="GPU-hours held per bucket: working, idle in allocations, unmeasured",
              note=f"GPU-hours per {bucket} / hours in the {bucket} = GPUs held on average."),
    ]


def _where(g: Group) -> str:
    """A cause's scope: its node, how many of the node's GPUs, its pod(s)."""
    parts = [f"node {', '.join(g.nodes)}"] if g.nodes else []
    if g.gpus:
        parts.append(f"{g.gpus} GPU{'s' if g.gpus != 1 else ''}" if g.gpus > 1 else f"GPU {g.first.gpu_uuid}")
    if g.pods:
        parts.append(f"pod {g.pods[0]}" + (f" +{len(g.pods) - 1}" if len(g.pods) > 1 else ""))
    return " · ".join(parts) or g.first.subject


def why_block(scope: Scope, cluster: str, namespace: str, workload: str, members: list[Member]) -> Block:
    """"Why": the workload's findings in the period, one row per cause (kind, reason, node: a node's 8 throttled
    GPUs are one row), the costliest first, each linking to its findings on /findings/ (grouped by node)."""
    rows = []
    for g in group(members, cause_key):
        f = g.first
        query = [*scope.window.params, ("cluster", cluster), ("namespace", namespace), ("workload", workload),
                 ("kind", f.kind), *([("node", f.node)] if f.node else []), ("group", "node")]
        rows.append({"cause": g.label, "where": _where(g), "money": g.money, "hours": g.hours,
                     "gpu_hours": float(g.gpu_hours), "kind": f.kind, "findings": g.count,
                     "what": "infra loss" if f.kind in INFRA_LOSS_KINDS else "cost",
                     "href": f"/findings/?{urlencode(query)}#finding-{f.pk}"})
    loss = sum((g.infra_loss for g in group(members, cause_key)), Decimal(0))
    title = (f"Why: {len(members):,} findings in {scope.window.caption()}"
             + (f", ${loss:,.2f} of infra loss" if loss else "")) if members else "Why: no findings"
    return Block("why", title, WHY_COLUMNS, rows, open=True, term="finding",
                 empty=f"No finding about {workload or 'this workload'} in {scope.window.caption()}.",
                 note="Hours flagged and money inside the period. Money is the infra loss (what the pods were "
                      "charged for GPUs while unhealthy) for an unhealthy GPU, else the finding's own cost "
                      "(idle charge, straggler waste); docs/findings.md.")


def why_badges(members: list[Member]) -> list[dict[str, Any]]:
    """The badges above the page: per kind, how many findings and their money in the period."""
    by_kind: dict[str, list[Member]] = {}
    for m in members:
        by_kind.setdefault(m.finding.kind, []).append(m)
    out = [{"label": badge(kind), "count": len(ms), "money": sum((m.money for m in ms), Decimal(0)),
            "infra_loss": kind in INFRA_LOSS_KINDS} for kind, ms in by_kind.items()]
    return sorted(out, key=lambda b: (-b["money"], b["label"]))


def pod_badges(members: list[Member]) -> dict[str, list[str]]:
    """Pod name -> the badges of its findings (each kind once)."""
    out: dict[str, list[str]] = {}
    for m in members:
        if m.finding.pod and badge(m.finding.kind) not in out.setdefault(m.finding.pod, []):
            out[m.finding.pod].append(badge(m.finding.kind))
    return out


def _facts(cluster: str, namespace: str, workload: str, teams: list[str], pods: list[PodUsage],
           seen: Seen) -> dict[str, Any]:
    """What is the same for the whole workload, shown above the page."""
    return {"team": ", ".join(teams), "cluster": cluster, "namespace": namespace,
            "workload": workload or "(not recorded)", "kind": workload.split("/", 1)[0] if "/" in workload else "",
            "node_groups": ", ".join(sorted({p.node_group for p in pods})),
            "gpu_models": ", ".join(sorted({p.gpu_model for p in pods})),
            "modes": mode_labels([p.allocation_mode for p in pods]),
            "queues": sorted({(p.local_queue, p.cluster_queue) for p in pods if p.cluster_queue or p.local_queue}),
            "first_seen": seen.first, "last_seen": seen.last + HOUR if seen.last else None}


def workload_page(scope: Scope, cluster: str, namespace: str, workload: str) -> dict[str, Any] | None:
    """View 3: one workload's pods, GPUs held, activity under each signal, cost and idle cost over time. None when
    the caller may see no hour of it (the page then answers 404, never "it exists but is not yours")."""
    seen = workload_seen(visible_teams=scope.visible_teams, cluster=cluster, namespace=namespace, workload=workload)
    if seen.first is None:
        return None
    w = scope.window
    filters = {**scope.usage_filters, "cluster": [cluster], "namespace": [namespace], "workload": [workload]}
    total = report(scope, ["team"], filters=filters)
    totals = figures_row(total.totals)
    hist = history(scope, filters=filters)
    # One workload's hours are cheap to read (the ledger's workload index): hourly up to WORKLOAD_HOURLY_DAYS.
    bucket = "hour" if w.days <= WORKLOAD_HOURLY_DAYS else w.bucket
    per_signal = {s: bucket_rows(scope, signal=s, filters=filters, bucket=bucket) for s in SIGNALS}
    pods = workload_pods(start=w.start, end=w.end, visible_teams=scope.visible_teams, cluster=cluster,
                         namespace=namespace, workload=workload, signal=scope.signal)
    findings = workload_findings(visible_teams=scope.visible_teams, start=w.start, end=w.end, cluster=cluster,
                                 namespace=namespace, workload=workload)
    badges = pod_badges(findings)
    rows = [pod_row(p, badges.get(p.pod)) for p in pods]
    # Columns that say the same for every pod are in the facts above the page, not repeated per row.
    same = {k for k in ("node_group", "gpu_model", "queue", "mode") if len({r[k] for r in rows}) <= 1}
    if not any(p.figures.unmeasured_gpu_hours for p in pods):
        same.add("unmeasured_gpu_hours")
    if not badges:
        same.add("findings")
    name = workload or "(not recorded)"
    blocks = [why_block(scope, cluster, namespace, workload, findings),
              *_over_time(scope, name, totals, per_signal, bucket)]
    blocks.append(Block(
        "pods", f"{len(pods):,} pods", [c for c in POD_COLUMNS if c.key not in same], rows,
        totals=figures_row(UsageFigures.fold(p.figures for p in pods), pod="Total"), open=True, term="workload",
        empty=f"No pod of {name} held GPUs in {w.caption()}."))
    teams = sorted({r.group["team"] for r in total.results}) or sorted({p.team for p in pods})
    return {"totals": totals, "tiles": _tiles(scope, total.totals, hist, len(pods)), "blocks": blocks,
            "facts": _facts(cluster, namespace, workload, teams, pods, seen), "report": total, "pods": rows,
            "own_scope": scope.with_filters(cluster=(cluster,), namespace=(namespace,)), "history": hist,
            "chart_bucket": bucket, "why_badges": why_badges(findings)}
