"""Findings folded into groups a person can read: one row per workload, pod or node on `/findings/`, one row per
cause (kind, reason, node) in a workload's "Why" block. Pure: plain objects in (anything with a finding's
attributes), plain data out; no queries, no templates (tests/findings/test_grouping.py).

A node whose 8 GPUs are all thermally throttled is 8 findings (one per GPU and reason, docs/findings.md), and
near-identical: grouped, it is one row that says "8 findings, 25 h, $792.62 of infra loss".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

HOUR = timedelta(hours=1)
GROUP_BY = ("node", "workload", "pod")  # what /findings/ can group by; the first is its default
# The kinds whose money is what the holder was charged for a broken GPU (`allocated_cost`), not the finding's cost.
INFRA_LOSS_KINDS = frozenset({"unhealthy_gpu"})
BADGES = {"unhealthy_gpu": "infra loss", "straggler": "straggler", "idle_allocation": "idle",
          "idle_held": "idle, memory held", "idle_claim": "idle claim", "oversubscribed_gpu": "oversubscribed"}


class FindingLike(Protocol):
    """What grouping reads of a finding (`apps.findings.models.Finding`, or any stand-in)."""

    pk: Any
    cluster_id: Any
    kind: str
    subject: str
    team: str
    namespace: str
    workload: str
    pod: str
    node: str
    gpu_uuid: str
    start: datetime
    last_hour: datetime
    end: datetime | None
    hours: int
    gpu_hours: Decimal
    cost: Decimal
    allocated_cost: Decimal
    detail: dict


def badge(kind: str) -> str:
    """The short word a badge shows for a kind ("infra loss" for an unhealthy GPU the team held)."""
    return BADGES.get(kind, kind.replace("_", " "))


def reason(f: FindingLike) -> str:
    """Why an unhealthy GPU was flagged (throttle, xid, ecc, remap, vanished); empty for other kinds."""
    return str((f.detail or {}).get("reason", "")) if f.kind == "unhealthy_gpu" else ""


def money(f: FindingLike, cost: Decimal | None = None, allocated_cost: Decimal | None = None) -> Decimal:
    """A finding's money as the pages put it: the infra loss (what its holders were charged for the broken GPU)
    for an unhealthy GPU a team held, else its own cost (idle charge, straggler waste, ...). `cost` and
    `allocated_cost` override the run's own figures (the part of the run inside a period)."""
    cost = f.cost if cost is None else cost
    allocated = f.allocated_cost if allocated_cost is None else allocated_cost
    return Decimal(allocated if f.kind in INFRA_LOSS_KINDS else cost)


def subject_label(f: FindingLike) -> str:
    """What a finding is about when it names no workload, pod or node: a queue, a signal, or its subject."""
    if f.kind == "borrowed_idle":
        return f"queue {f.subject}"
    if f.kind == "missing_signal":
        return f"signal {f.subject}"
    return f.subject


def group_key(f: FindingLike, by: str) -> tuple[str, str]:
    """(key, label) of the group a finding falls in when grouped `by` node, workload or pod. A finding without
    one (a queue's, a signal's) falls back to the next thing it names: node, then its subject."""
    c = f.cluster_id
    if by == "workload" and f.workload:
        return f"{c}:w:{f.namespace}/{f.workload}", f"{f.namespace}/{f.workload}"
    if by == "pod" and f.pod:
        return f"{c}:p:{f.namespace}/{f.pod}", f"pod {f.namespace}/{f.pod}"
    if f.node:
        return f"{c}:n:{f.node}", f"node {f.node}"
    return f"{c}:s:{f.kind}:{f.subject}", subject_label(f)


def cause_key(f: FindingLike) -> tuple[str, str]:
    """(key, label) of a workload's "Why" rows: one per kind, reason and node (a node's 8 throttled GPUs are one
    cause), the pod named when it is one."""
    why = reason(f)
    label = badge(f.kind) + (f" ({why})" if why else "")
    return f"{f.cluster_id}:{f.kind}:{why}:{f.node}", label


def hours_covered(spans: Iterable[tuple[datetime, datetime]]) -> int:
    """Clock hours inside the union of `[start, end)` spans (8 GPUs throttled for the same 25 h: 25, not 200)."""
    total = timedelta(0)
    merged: list[list[datetime]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in merged:
        total += max(end - start, timedelta(0))
    return int(total / HOUR)


@dataclass(frozen=True)
class Member:
    """One finding of a group, with its figures (the run's, or the part of it inside a period) and its hours."""

    finding: FindingLike
    hours: int
    gpu_hours: Decimal
    cost: Decimal
    allocated_cost: Decimal
    spans: tuple[tuple[datetime, datetime], ...] = ()

    @property
    def money(self) -> Decimal:
        return money(self.finding, self.cost, self.allocated_cost)

    @property
    def infra_loss(self) -> Decimal:
        return self.allocated_cost if self.finding.kind in INFRA_LOSS_KINDS and self.finding.team else Decimal(0)


def whole_run(f: FindingLike) -> Member:
    """A finding with the figures of its whole run (the findings page lists runs as they are)."""
    return Member(f, f.hours, Decimal(f.gpu_hours), Decimal(f.cost), Decimal(f.allocated_cost),
                  ((f.start, f.last_hour + HOUR),))


def within(runs: Sequence[FindingLike], hour_rows: Iterable[tuple[str, str, datetime, Any, Any, Any]],
           start: datetime, end: datetime) -> list[Member]:
    """Each run with the figures of its hours inside `[start, end)` (the page's period): `hour_rows` are
    (kind, subject, hour, gpu_hours, cost, allocated_cost) of the runs' subjects; an hour counts for the run of
    its subject whose `[start, last_hour]` holds it. A run without an hour in the period is left out."""
    by_subject: dict[tuple[str, str], list[tuple[datetime, Decimal, Decimal, Decimal]]] = {}
    for kind, subject, hour, g, c, a in hour_rows:
        if start <= hour < end:
            by_subject.setdefault((kind, subject), []).append((hour, Decimal(g), Decimal(c), Decimal(a)))
    out = []
    for f in runs:
        mine = [r for r in by_subject.get((f.kind, f.subject), ()) if f.start <= r[0] <= f.last_hour]
        if mine:
            out.append(Member(f, len(mine), sum((r[1] for r in mine), Decimal(0)),
                              sum((r[2] for r in mine), Decimal(0)), sum((r[3] for r in mine), Decimal(0)),
                              tuple((r[0], r[0] + HOUR) for r in mine)))
    return out


@dataclass(frozen=True)
class Group:
    """Findings that are about one thing: how many, of which kinds, the clock hours they cover and their sums."""

    key: str
    label: str
    members: list[Member] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.members)

    @property
    def kinds(self) -> list[tuple[str, int]]:
        """(kind, how many), most first."""
        counts: dict[str, int] = {}
        for m in self.members:
            counts[m.finding.kind] = counts.get(m.finding.kind, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    @property
    def ongoing(self) -> int:
        return sum(1 for m in self.members if m.finding.end is None)

    @property
    def hours(self) -> int:
        return hours_covered(s for m in self.members for s in m.spans)

    @property
    def since(self) -> datetime:
        return min(m.finding.start for m in self.members)

    @property
    def gpu_hours(self) -> Decimal:
        return sum((m.gpu_hours for m in self.members), Decimal(0))

    @property
    def cost(self) -> Decimal:
        return sum((m.cost for m in self.members), Decimal(0))

    @property
    def money(self) -> Decimal:
        return sum((m.money for m in self.members), Decimal(0))

    @property
    def infra_loss(self) -> Decimal:
        return sum((m.infra_loss for m in self.members), Decimal(0))

    @property
    def teams(self) -> list[str]:
        return sorted({m.finding.team for m in self.members})

    @property
    def nodes(self) -> list[str]:
        return sorted({m.finding.node for m in self.members if m.finding.node})

    @property
    def pods(self) -> list[str]:
        return sorted({m.finding.pod for m in self.members if m.finding.pod})

    @property
    def gpus(self) -> int:
        return len({(m.finding.node, m.finding.gpu_uuid) for m in self.members if m.finding.gpu_uuid})

    @property
    def first(self) -> FindingLike:
        return self.members[0].finding


def group(members: Iterable[Member], key: Callable[[FindingLike], tuple[str, str]]) -> list[Group]:
    """Members grouped by `key` (`group_key` bound to a `by`, or `cause_key`), the costliest group first (then by
    label, so the order never jitters); members keep their order."""
    groups: dict[str, Group] = {}
    for m in members:
        k, label = key(m.finding)
        groups.setdefault(k, Group(k, label)).members.append(m)
    return sorted(groups.values(), key=lambda g: (-g.money, -g.count, g.label))


def group_by(members: Iterable[Member], by: str) -> list[Group]:
    """`/findings/`'s groups: by node, workload or pod (GROUP_BY)."""
    if by not in GROUP_BY:
        raise ValueError(f"group by one of {', '.join(GROUP_BY)}, not {by!r}")
    return group(members, lambda f: group_key(f, by))
