"""The demo's cloud bill and budgets (`manage.py demo`): what the finance pages show on the simulated cluster.

The bill is the FOCUS 1.2 file an AWS account would export for the demo's GPU nodes: one daily `Usage` row per
node and UTC day it existed (the ledger's node-hours say when), ResourceId its instance id (the simulator's
providerID, devtools/simulator/model.provider_id). H100 nodes are covered by a savings plan (BilledCost 0,
EffectiveCost 62 % of list), the others get a 5 % negotiated discount. Nodes without the device plugin are left off
(GPU nodes with no bill line), and one instance of another cluster is billed (a line matched to no node), so every
part of the reconciliation has something in it. The budgets are weekly, one per team: most a third above the
team's last week, one a tenth under it (crossed).
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db.models import Sum

from apps.inventory.models import Cluster, Node
from apps.usage.models import NodeHour, UsageHour

COLUMNS = ["BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd",
           "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodStart",
           "ChargePeriodEnd", "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ListUnitPrice",
           "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "InvoiceIssuerName", "InvoiceId",
           "PricingCurrency", "BillingAccountType", "CommitmentDiscountStatus", "ResourceId", "ResourceName",
           "ResourceType", "ServiceCategory", "ServiceName", "SkuPriceDetails", "Tags"]
INSTANCE_TYPES = {"NVIDIA-H100-80GB-HBM3": "p5.48xlarge", "NVIDIA-A100-SXM4-80GB": "p4de.24xlarge",
                  "NVIDIA-A100-80GB-PCIe": "p4d.24xlarge", "NVIDIA-L4": "g6.12xlarge", "NVIDIA-A30": "g5.12xlarge",
                  "Tesla-T4": "g4dn.12xlarge"}
SAVINGS_PLAN = Decimal("0.62")
DISCOUNT = Decimal("0.95")


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _month(day: date) -> tuple[datetime, datetime]:
    from apps.common.timeutils import midnight, next_month

    start = midnight(day.replace(day=1))
    return start, next_month(start)


def demo_bill(cluster: Cluster, prices: dict[str, str]) -> bytes:
    """The demo cluster's FOCUS 1.2 bill as CSV bytes (see the module docstring)."""
    nodes = {n.name: n for n in Node.objects.filter(cluster=cluster) if "noplugin" not in n.name}
    hours: dict[tuple[str, date], float] = defaultdict(float)
    for node, hour, present in (NodeHour.objects.filter(cluster=cluster, node__in=list(nodes))
                                .values_list("node", "hour", "capacity_gpu_hours")):
        gpus = nodes[node].physical_gpus or 1
        hours[(node, hour.date())] += present / gpus
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for (name, day), present in sorted(hours.items()):
        node = nodes[name]
        price = Decimal(prices.get(node.gpu_model, "0"))
        if not price or not node.provider_id:
            continue
        instance = node.provider_id.rsplit("/", 1)[-1]
        hourly = price * node.physical_gpus
        list_cost = (hourly * Decimal(repr(round(present, 6)))).quantize(Decimal("0.0000001"))
        covered = node.gpu_model == "NVIDIA-H100-80GB-HBM3"
        effective = (list_cost * (SAVINGS_PLAN if covered else DISCOUNT)).quantize(Decimal("0.0000001"))
        start, end = _month(day)
        writer.writerow(_row(day, start, end, instance, name, node.gpu_model, hourly, present, list_cost,
                             billed=Decimal(0) if covered else effective, effective=effective, covered=covered,
                             pool=node.node_group.name, cluster=cluster.name))
    if hours:
        day = max(d for _, d in hours)
        start, end = _month(day)
        list_cost = Decimal("98.32") * 24
        writer.writerow(_row(day, start, end, "i-0ffffffffffffffff", "ip-10-9-8-7.ec2.internal",
                             "NVIDIA-H100-80GB-HBM3", Decimal("98.32"), 24.0, list_cost, billed=list_cost,
                             effective=list_cost, covered=False, pool="batch", cluster="other-team-cluster"))
    return out.getvalue().encode()


def _row(day: date, bill_start: datetime, bill_end: datetime, instance: str, name: str, model: str, hourly: Decimal,
         present: float, list_cost: Decimal, *, billed: Decimal, effective: Decimal, covered: bool, pool: str,
         cluster: str) -> dict[str, str]:
    start = datetime(day.year, day.month, day.day, tzinfo=bill_start.tzinfo)
    kind = INSTANCE_TYPES.get(model, "g5.xlarge")
    return {
        "BillingAccountId": "111122223333", "BillingAccountName": "demo-gpu", "BillingCurrency": "USD",
        "BillingPeriodStart": _iso(bill_start), "BillingPeriodEnd": _iso(bill_end), "ChargeCategory": "Usage",
        "ChargeClass": "", "ChargeDescription": f"${hourly} per On Demand Linux {kind} Instance Hour",
        "ChargeFrequency": "Usage-Based", "ChargePeriodStart": _iso(start),
        "ChargePeriodEnd": _iso(start + timedelta(days=1)), "BilledCost": str(billed), "EffectiveCost": str(effective),
        "ListCost": str(list_cost), "ContractedCost": str(effective), "ListUnitPrice": str(hourly),
        "PricingQuantity": f"{present:.6f}", "PricingUnit": "Hours", "ProviderName": "AWS",
        "PublisherName": "Amazon Web Services, Inc.", "InvoiceIssuerName": "Amazon Web Services, Inc.",
        "InvoiceId": f"DEMO-{bill_start:%Y%m}", "PricingCurrency": "USD", "BillingAccountType": "Linked Account",
        "CommitmentDiscountStatus": "Used" if covered else "", "ResourceId": instance, "ResourceName": name,
        "ResourceType": "Instance", "ServiceCategory": "Compute", "ServiceName": "Amazon Elastic Compute Cloud",
        "SkuPriceDetails": f'{{"InstanceType": "{kind}"}}',
        "Tags": f'{{"eks:cluster-name": "{cluster}", "eks:nodegroup-name": "{pool}"}}',
    }


def demo_budgets(cluster: Cluster, now: datetime) -> list[str]:
    """A weekly budget per team of the demo: a third above its last 7 days' spend, the largest team's a tenth under
    (so the budgets page and the overviews show a crossed threshold). Returns what was set."""
    from apps.budgets.services import set_budget

    since = now - timedelta(days=7)
    spend = (UsageHour.objects.filter(cluster=cluster, hour__gte=since).values("team").annotate(c=Sum("cost"))
             .order_by("-c"))
    out = []
    for i, row in enumerate(spend):
        if not row["c"]:
            continue
        amount = (Decimal(row["c"]) * (Decimal("0.9") if i == 0 else Decimal("1.33"))).quantize(Decimal("1"))
        set_budget(row["team"], max(amount, Decimal(1)), period="weekly")
        out.append(f"{row['team']} {amount} USD/week")
    return out
