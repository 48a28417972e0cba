"""Reads of the bill: the reconciliation of the price card against the bill, per cluster and month (docs/billing.md).

Per cluster and month: the price card's capacity cost of its GPU nodes (the ledger's `NodeHour.capacity_cost`,
what `/fleet/` shows as capacity) against the bill's cost of the same nodes (`BilledNodeHour`, in the cost basis
`GPUFINOPS_BILL_COST`), the variance, per node; the GPU nodes with no bill line; and the month's GPU machine lines
matched to no node. Money is exact decimal to the micro-dollar.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal

from django.conf import settings
from django.db.models import Count, Max, Min, Sum

from apps.billing.models import BilledNodeHour, BillImport, BillLine
from apps.common.periods import MONTHLY, parse_period
from apps.usage.models import NodeHour, PodHour
from apps.usage.money import MICRO, ZERO, micro, to_decimal

COST_FIELD = {"EffectiveCost": "effective_cost", "BilledCost": "billed_cost"}


def cost_basis() -> str:
    """The bill's cost column billed figures use (`GPUFINOPS_BILL_COST`)."""
    return settings.GPUFINOPS_BILL_COST


def parse_month(text: str) -> tuple[datetime, datetime] | None:
    """`2026-11` -> [2026-11-01, 2026-12-01) UTC by the one period rule; None when it is not a month."""
    try:
        period = parse_period(text)
    except ValueError:
        return None
    return (period.start, period.end) if period.kind == MONTHLY else None


def latest_billed_month() -> str | None:
    """The month of the latest charge any kept bill line has, as `YYYY-MM` (the page's default)."""
    last = BillLine.objects.aggregate(last=Max("charge_period_start"))["last"]
    return None if last is None else f"{last:%Y-%m}"


@dataclass(frozen=True)
class NodeReconciliation:
    node: str
    node_group: str
    gpu_model: str
    capacity_gpu_hours: float
    price_card_cost: Decimal
    unpriced_gpu_hours: float  # capacity hours of the node without a price: their price-card cost is unknown
    billed_cost: Decimal | None  # None: no bill line for this node in the month

    @property
    def variance(self) -> Decimal | None:
        return None if self.billed_cost is None else self.billed_cost - self.price_card_cost

    def as_dict(self) -> dict[str, object]:
        return {"node": self.node, "node_group": self.node_group, "gpu_model": self.gpu_model,
                "capacity_gpu_hours": round(self.capacity_gpu_hours, 6), "price_card_cost": micro(self.price_card_cost),
                "unpriced_gpu_hours": round(self.unpriced_gpu_hours, 6),
                "billed_cost": None if self.billed_cost is None else micro(self.billed_cost),
                "variance": None if self.variance is None else micro(self.variance)}


@dataclass(frozen=True)
class ClusterReconciliation:
    cluster: str
    nodes: tuple[NodeReconciliation, ...]

    @property
    def price_card_cost(self) -> Decimal:
        return sum((n.price_card_cost for n in self.nodes), ZERO)

    @property
    def billed_cost(self) -> Decimal:
        return sum((n.billed_cost or ZERO for n in self.nodes), ZERO)

    @property
    def variance(self) -> Decimal:
        return self.billed_cost - self.price_card_cost

    @property
    def variance_share(self) -> float | None:
        """The variance as a share of the price card's cost (0.1 = the bill is 10 % above it)."""
        return float(self.variance / self.price_card_cost) if self.price_card_cost else None

    @property
    def unpriced_gpu_hours(self) -> float:
        return sum(n.unpriced_gpu_hours for n in self.nodes)

    @property
    def nodes_without_bill(self) -> tuple[NodeReconciliation, ...]:
        return tuple(n for n in self.nodes if n.billed_cost is None)

    def as_dict(self) -> dict[str, object]:
        share = self.variance_share
        return {"cluster": self.cluster, "price_card_cost": micro(self.price_card_cost),
                "billed_cost": micro(self.billed_cost), "variance": micro(self.variance),
                "variance_share": None if share is None else round(share, 6),
                "unpriced_gpu_hours": round(self.unpriced_gpu_hours, 6),
                "nodes_without_bill": [n.node for n in self.nodes_without_bill],
                "nodes": [n.as_dict() for n in self.nodes]}


@dataclass(frozen=True)
class UnmatchedLine:
    bill: str
    row: int
    provider: str
    resource_id: str
    resource_name: str
    description: str
    charge_period_start: datetime
    charge_period_end: datetime
    cost: Decimal  # in the cost basis
    cluster: str  # the cluster its tags name, or ""
    note: str

    def as_dict(self) -> dict[str, object]:
        return {"bill": self.bill, "row": self.row, "provider": self.provider, "resource_id": self.resource_id,
                "resource_name": self.resource_name, "description": self.description,
                "charge_period_start": self.charge_period_start, "charge_period_end": self.charge_period_end,
                "cost": self.cost, "cluster": self.cluster or None, "note": self.note}


@dataclass(frozen=True)
class Reconciliation:
    month: str
    start: datetime
    end: datetime
    basis: str
    bill_lines: int  # kept bill lines charged in the month: 0 means no bill was imported for it
    clusters: tuple[ClusterReconciliation, ...]
    unmatched: tuple[UnmatchedLine, ...]
    imports: tuple[tuple[str, str, datetime], ...]  # (file name, FOCUS version, imported at) of the month's lines

    @property
    def unmatched_cost(self) -> Decimal:
        return sum((line.cost for line in self.unmatched), ZERO)

    def as_dict(self) -> dict[str, object]:
        return {"month": self.month, "start": self.start, "end": self.end, "basis": self.basis,
                "bill_lines": self.bill_lines, "clusters": [c.as_dict() for c in self.clusters],
                "unmatched_lines": [u.as_dict() for u in self.unmatched], "unmatched_cost": self.unmatched_cost,
                "imports": [{"name": name, "focus_version": version, "imported_at": at}
                            for name, version, at in self.imports]}


def reconciliation(month: str, *, clusters: Sequence[str] = ()) -> Reconciliation:
    """The month's reconciliation (`month` as `YYYY-MM`; raises ValueError otherwise), for `clusters` (all if empty)."""
    bounds = parse_month(month)
    if bounds is None:
        raise ValueError(f"{month[:20]!r} is not a month (YYYY-MM)")
    start, end = bounds
    basis = cost_basis()
    field = COST_FIELD[basis]
    ledger = NodeHour.objects.filter(hour__gte=start, hour__lt=end)
    billed = BilledNodeHour.objects.filter(hour__gte=start, hour__lt=end)
    if clusters:
        ledger, billed = ledger.filter(cluster__name__in=clusters), billed.filter(cluster__name__in=clusters)
    nodes: dict[tuple[str, str], NodeReconciliation] = {}
    for row in ledger.values("cluster__name", "node").annotate(
            capacity=Sum("capacity_gpu_hours"), cost=Sum("capacity_cost"), unpriced=Sum("unpriced_gpu_hours"),
            group=Max("node_group"), model=Max("gpu_model")):
        nodes[(row["cluster__name"], row["node"])] = NodeReconciliation(
            node=row["node"], node_group=row["group"] or "", gpu_model=row["model"] or "",
            capacity_gpu_hours=float(row["capacity"] or 0.0), price_card_cost=to_decimal(row["cost"]),
            unpriced_gpu_hours=float(row["unpriced"] or 0.0), billed_cost=None)
    for row in billed.values("cluster__name", "node").annotate(cost=Sum(field), group=Max("node_group")):
        key = (row["cluster__name"], row["node"])
        # A node billed in the month but not in the ledger then: nothing on the price card to compare with.
        known = nodes.get(key) or NodeReconciliation(row["node"], row["group"] or "", "", 0.0, ZERO, 0.0, None)
        nodes[key] = replace(known, billed_cost=to_decimal(row["cost"]))
    per_cluster: dict[str, list[NodeReconciliation]] = defaultdict(list)
    for (cluster, _), node in sorted(nodes.items()):
        per_cluster[cluster].append(node)
    lines = BillLine.objects.filter(charge_period_start__gte=start, charge_period_start__lt=end)
    unmatched = lines.filter(match=BillLine.Match.NONE).select_related("bill", "cluster")
    if clusters:
        unmatched = unmatched.filter(cluster__name__in=clusters)
    return Reconciliation(
        month=month.strip(), start=start, end=end, basis=basis, bill_lines=lines.count(),
        clusters=tuple(ClusterReconciliation(name, tuple(rows)) for name, rows in sorted(per_cluster.items())),
        unmatched=tuple(
            UnmatchedLine(bill=u.bill.name, row=u.row, provider=u.provider, resource_id=u.resource_id,
                          resource_name=u.resource_name, description=u.description,
                          charge_period_start=u.charge_period_start, charge_period_end=u.charge_period_end,
                          cost=getattr(u, field), cluster=u.cluster.name if u.cluster else "", note=u.note)
            for u in unmatched.order_by("charge_period_start", "bill_id", "row")),
        imports=tuple(BillImport.objects.filter(lines__in=lines).distinct().order_by("imported_at")
                      .values_list("name", "focus_version", "imported_at")),
    )


# ---- The billed cost basis: each team's share of its nodes' bill ----


@dataclass(frozen=True)
class BilledTeam:
    team: str
    cost: Decimal  # the team's share of its nodes' bill, in the cost basis
    billed_gpu_hours: float  # allocated GPU-hours on node-hours the bill covers
    unbilled_gpu_hours: float  # allocated GPU-hours on node-hours without a bill line: their billed cost is unknown

    def as_dict(self) -> dict[str, object]:
        return {"team": self.team, "cost": micro(self.cost), "billed_gpu_hours": round(self.billed_gpu_hours, 6),
                "unbilled_gpu_hours": round(self.unbilled_gpu_hours, 6)}


@dataclass(frozen=True)
class BilledCosts:
    """Costs in the **billed** basis over `[start, end)`: a node-hour's bill is shared by the pods on it in
    proportion to the GPU-hours they held of its capacity (the price card's rule, with the bill's figure for the
    node-hour instead of GPU-hours x price); what no pod held is the unallocated share. Hours on nodes the bill
    does not cover have no billed cost: they are counted as unbilled GPU-hours, never priced from the card."""

    basis: str
    start: datetime
    end: datetime
    bill_lines: int  # kept bill lines charged in the range: 0 means no bill covers it
    teams: tuple[BilledTeam, ...]
    unallocated_cost: Decimal | None  # None unless every team is seen (finance): the fleet's share nobody held

    @property
    def teams_cost(self) -> Decimal:
        return sum((t.cost for t in self.teams), ZERO)

    @property
    def total_cost(self) -> Decimal:
        return self.teams_cost + (self.unallocated_cost or ZERO)

    @property
    def unbilled_gpu_hours(self) -> float:
        return sum(t.unbilled_gpu_hours for t in self.teams)

    def as_dict(self) -> dict[str, object]:
        return {"basis": self.basis, "start": self.start, "end": self.end, "bill_lines": self.bill_lines,
                "teams": [t.as_dict() for t in self.teams], "teams_cost": micro(self.teams_cost),
                "unallocated_cost": None if self.unallocated_cost is None else micro(self.unallocated_cost),
                "total_cost": micro(self.total_cost), "unbilled_gpu_hours": round(self.unbilled_gpu_hours, 6)}


def bill_lines_between(start: datetime, end: datetime) -> int:
    """Kept bill lines whose charge period overlaps `[start, end)`."""
    return BillLine.objects.filter(charge_period_start__lt=end, charge_period_end__gt=start).count()


def bill_stamp(start: datetime, end: datetime) -> str:
    """Changes whenever the bill lines of `[start, end)` do (an import adds lines, a newer file replaces them); ""
    when no bill covers it. Part of the reports' ledger stamp: a bill imported for a closed period restates it."""
    agg = BillLine.objects.filter(charge_period_start__lt=end, charge_period_end__gt=start).aggregate(
        n=Count("id"), last=Max("bill_id"), first=Min("bill_id"))
    return "" if not agg["n"] else f"bill:{agg['n']}:{agg['first']}:{agg['last']}"


def billed_costs(*, start: datetime, end: datetime, visible_teams: set[str] | None) -> BilledCosts:
    """Every visible team's cost in the billed basis (see `BilledCosts`); the unallocated share for finance only.
    Each pod-hour's share is exact to the micro-dollar; the unallocated share is the node-hours' bill less them,
    so teams + unallocated = the bill of the range's node-hours exactly."""
    field = COST_FIELD[cost_basis()]
    bills: dict[tuple[int, datetime, str], Decimal] = defaultdict(lambda: ZERO)
    for cluster_id, hour, node, amount in (BilledNodeHour.objects.filter(hour__gte=start, hour__lt=end)
                                           .values_list("cluster_id", "hour", "node").annotate(c=Sum(field))):
        bills[(cluster_id, hour, node)] = to_decimal(amount)
    capacity = {(c, h, n): cap for c, h, n, cap in NodeHour.objects.filter(hour__gte=start, hour__lt=end)
                .values_list("cluster_id", "hour", "node", "capacity_gpu_hours")}
    pods = PodHour.objects.filter(hour__gte=start, hour__lt=end)
    if visible_teams is not None:
        pods = pods.filter(team__in=sorted(visible_teams))
    cost: dict[str, Decimal] = defaultdict(lambda: ZERO)
    billed_h: dict[str, float] = defaultdict(float)
    unbilled_h: dict[str, float] = defaultdict(float)
    held: Decimal = ZERO
    for cluster_id, hour, node, team, allocated in pods.values_list("cluster_id", "hour", "node", "team",
                                                                    "allocated_gpu_hours").iterator(chunk_size=5000):
        key = (cluster_id, hour, node)
        bill, cap = bills.get(key), capacity.get(key) or 0.0
        if bill is None or cap <= 0:
            unbilled_h[team] += allocated
            cost[team] += ZERO  # the team is listed, with its unbilled hours
            continue
        share = (bill * Decimal(repr(allocated)) / Decimal(repr(cap))).quantize(MICRO, rounding=ROUND_HALF_EVEN)
        cost[team] += share
        held += share
        billed_h[team] += allocated
    teams = tuple(BilledTeam(t, cost[t], billed_h[t], unbilled_h[t]) for t in sorted(cost))
    return BilledCosts(
        basis=cost_basis(), start=start, end=end, bill_lines=bill_lines_between(start, end), teams=teams,
        unallocated_cost=None if visible_teams is not None else sum(bills.values(), ZERO) - held,
    )
