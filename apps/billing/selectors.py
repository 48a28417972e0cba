"""Reads of the bill: the reconciliation of the price card against the bill, per cluster and month (docs/billing.md).

Per cluster and month: the price card's capacity cost of its GPU nodes (the ledger's `NodeHour.capacity_cost`,
what `/fleet/` shows as capacity) against the bill's cost of the same nodes (`BilledNodeHour`, in the cost basis
`GPUFINOPS_BILL_COST`), the variance, per node; the GPU nodes with no bill line; and the month's GPU machine lines
matched to no node. Money is exact decimal to the micro-dollar.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Max, Sum

from apps.billing.models import BilledNodeHour, BillImport, BillLine
from apps.common.timeutils import next_month
from apps.usage.models import NodeHour
from apps.usage.money import ZERO, micro, to_decimal

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
COST_FIELD = {"EffectiveCost": "effective_cost", "BilledCost": "billed_cost"}


def cost_basis() -> str:
    """The bill's cost column billed figures use (`GPUFINOPS_BILL_COST`)."""
    return settings.GPUFINOPS_BILL_COST


def parse_month(text: str) -> tuple[datetime, datetime] | None:
    """`2026-11` -> [2026-11-01, 2026-12-01) UTC; None when it is not a month."""
    m = _MONTH.match(text.strip())
    if not m or not 1 <= int(m[2]) <= 12 or int(m[1]) < 2000:
        return None
    start = datetime(int(m[1]), int(m[2]), 1, tzinfo=UTC)
    return start, next_month(start)


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
