"""The ledger as FOCUS 1.3 rows in the split-cost-allocation form (docs/reports.md, "FOCUS 1.3: split allocation").

FOCUS 1.3 ("Data Generator-Calculated Split Cost Allocation Handling") takes a charge present in the dataset, the
*origin charge*, and writes it as several *allocated charges* from which the origin can be derived: their summable
columns (costs, quantities) add up to the origin's, and their dimensions and unit prices are the origin's. Here:

* the **origin charge** is a node's GPU capacity in one charge period (one node, GPU model and unit price: the
  ledger's `NodeHour` rows, `capacity_cost`): its dimensions are the node's (ResourceId `k8s://<cluster>/nodes/<n>`,
  the cluster as sub-account, the node's tags);
* its **allocated charges** are one row per pod that held GPUs on it (AllocatedResourceId = the pod, as the 1.2
  export names it; AllocatedTags = the team, namespace, workload and Kueue queues) and one row for the capacity
  no pod held (AllocatedResourceId null, as the spec asks of the unallocated remainder);
* the method (`AllocatedMethodId` = METHOD_ID) is the ledger's own: each allocated charge is its GPU-hours' share
  of the node's GPU-hours, priced at the node's unit price. AllocatedMethodDetails gives that share
  (`AllocatedRatio`, 9 places, the ratios of one origin summing to exactly 1) and the GPU-hours behind it.

The origin is not written as a row of its own: every row of a FOCUS dataset is a charge, and writing both the
origin and its split would count the node twice (the sum of BilledCost would be twice the fleet's capacity cost).
Grouping the rows by ResourceId, SkuPriceId and ChargePeriodStart gives it back, to the micro-dollar.

The `x_` columns are the 1.2 export's (they are not FOCUS columns, so they may differ between the allocated
charges of one origin): x_CostType, x_Pod, x_Workload... still say which row is which.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import ROUND_DOWN, Decimal
from itertools import groupby
from typing import Any

from django.db.models import Max, QuerySet, Sum
from django.db.models.functions import TruncDate

from apps.reports import focus
from apps.usage import money
from apps.usage.activity import DEFAULT_METRICS
from apps.usage.models import NodeHour, PodHour

VERSION = "1.3"
METHOD_ID = "gpufinops-gpu-hours-share"
RATIO_PLACES = Decimal("1e-9")
ALLOCATION_COLUMNS: tuple[str, ...] = (
    "AllocatedMethodDetails",
    "AllocatedMethodId",
    "AllocatedResourceId",
    "AllocatedResourceName",
    "AllocatedTags",
)
# 1.3 names the provider twice (ProviderName and PublisherName are deprecated in its favour, still present).
PROVIDER_COLUMNS: tuple[str, ...] = ("HostProviderName", "ServiceProviderName")
COLUMNS: tuple[str, ...] = (*sorted((*focus.FOCUS_COLUMNS, *ALLOCATION_COLUMNS, *PROVIDER_COLUMNS)), *focus.X_COLUMNS)

OriginKey = tuple[Any, int, str, str, Decimal | None]  # charge period, cluster id, node, GPU model, unit price


def ratios(quantities: list[Decimal]) -> list[Decimal]:
    """Each quantity's share of their sum, to RATIO_PLACES, summing to exactly 1 (largest remainders take the
    missing billionths): FOCUS asks the AllocatedRatio of one origin's allocated charges to sum to 1."""
    if not quantities:
        return []
    total = sum(quantities, Decimal(0))
    if total <= 0:
        even = [(Decimal(1) / len(quantities)).quantize(RATIO_PLACES, rounding=ROUND_DOWN)] * len(quantities)
        quantities, total = [Decimal(1)] * len(quantities), Decimal(len(quantities))
        floors = even
    else:
        floors = [(q / total).quantize(RATIO_PLACES, rounding=ROUND_DOWN) for q in quantities]
    missing = int((Decimal(1) - sum(floors, Decimal(0))) / RATIO_PLACES)
    by_remainder = sorted(range(len(quantities)), key=lambda i: (-(quantities[i] / total - floors[i]), i))
    for i in by_remainder[:missing]:
        floors[i] += RATIO_PLACES
    return floors


def _details(ratio: Decimal, gpu_hours: Decimal, basis: str) -> str:
    return focus._json({"Elements": [{"AllocatedRatio": float(ratio), "UsageQuantity": float(gpu_hours),
                                      "UsageUnit": focus.GPU_HOURS}], "x_Basis": basis})


def _period_key(qs: QuerySet, granularity: str) -> tuple[QuerySet, str]:
    if granularity == "hour":
        return qs, "hour"
    return qs.annotate(_period=TruncDate("hour", tzinfo=UTC)), "_period"


def _origins(start: datetime, end: datetime, granularity: str) -> Iterator[dict[str, Any]]:
    qs, period = _period_key(NodeHour.objects.filter(hour__gte=start, hour__lt=end), granularity)
    rows = (qs.values(period, "cluster_id", "node", "node_group", "gpu_model", "price")
            .annotate(_capacity=Sum("capacity_gpu_hours"), _capacity_cost=Sum("capacity_cost"),
                      _unallocated=Sum("unallocated_gpu_hours"), _cost=Sum("unallocated_cost"),
                      _unavailable=Sum("unavailable_gpu_hours"), _gpus=Max("physical_gpus"))
            .order_by(period, "cluster_id", "node", "gpu_model", "price"))
    for r in rows.iterator(chunk_size=focus.BATCH):
        yield {**r, "_key": (r[period], r["cluster_id"], r["node"], r["gpu_model"], r["price"])}


def _pods(start: datetime, end: datetime, granularity: str, signal: str) -> Iterator[dict[str, Any]]:
    qs, period = _period_key(PodHour.objects.filter(hour__gte=start, hour__lt=end), granularity)
    keys = [period, "cluster_id", "node", "gpu_model", "price", "team", "namespace", "pod", "pod_uid", "node_group",
            "cluster_queue", "local_queue", "workload"]
    rows = (qs.values(*keys)
            .annotate(_allocated=Sum("allocated_gpu_hours"), _working=Sum(f"working_{signal}"),
                      _idle=Sum(f"idle_{signal}"), _unmeasured=Sum(f"unmeasured_{signal}"), _cost=Sum("cost"),
                      _idle_cost=Sum(f"idle_cost_{signal}"), _unpriced=Sum("unpriced_gpu_hours"), _gpus=Max("gpus"))
            .order_by(period, "cluster_id", "node", "gpu_model", "price", "team", "namespace", "pod", "pod_uid"))
    for r in rows.iterator(chunk_size=focus.BATCH):
        yield {**r, "_key": (r[period], r["cluster_id"], r["node"], r["gpu_model"], r["price"])}


def _origin_columns(key: OriginKey, node_group: str, cluster: str,
                    granularity: str, names: dict[str, str]) -> dict[str, Any]:
    """The columns every allocated charge of one origin shares: its dimensions and unit prices."""
    period, _, node, gpu_model, price = key
    row = focus._common(focus._period_bounds(period, granularity), names)
    row.update(focus._sku_columns(gpu_model, price, "GPU Capacity Time"))
    description = f"{gpu_model} GPU capacity of node {node}"
    if price is None:
        description += " (no price for this GPU model: cost unknown, shown as 0)"
    row.update({
        "ChargeDescription": description,
        "HostProviderName": names["provider"],
        "ServiceProviderName": names["provider"],
        "ResourceId": f"k8s://{cluster}/nodes/{node}",
        "ResourceName": node,
        "ResourceType": "Kubernetes Node",
        "SubAccountId": f"k8s://{cluster}",
        "SubAccountName": cluster,
        "SubAccountType": "Kubernetes Cluster",
        "Tags": focus._json({"k8s/cluster": cluster, "k8s/node-group": node_group}),
        "AllocatedMethodId": METHOD_ID,
        "x_Cluster": cluster,
        "x_Node": node,
        "x_NodeGroup": node_group,
        "x_GpuModel": gpu_model,
    })
    return row


def _split(key: OriginKey, origin: dict[str, Any] | None, pods: list[dict[str, Any]], *, granularity: str,
           signal: str, provisional: set[tuple[int, Any]], cluster_names: dict[int, str],
           names: dict[str, str]) -> Iterator[dict[str, Any]]:
    """The allocated charges of one origin: its pods, then its unallocated capacity."""
    period, cluster_id, _, _, price = key
    cluster = cluster_names.get(cluster_id, str(cluster_id))
    node_group = origin["node_group"] if origin else pods[0]["node_group"]
    shared = _origin_columns(key, node_group, cluster, granularity, names)
    status = "provisional" if (cluster_id, period) in provisional else "final"
    pod_hours = [focus._dec(p["_allocated"]) for p in pods]
    unallocated = focus._dec(origin["_unallocated"]) if origin else Decimal(0)
    unallocated_cost = money.to_decimal(origin["_cost"]) if origin else Decimal(0)
    with_remainder = unallocated > 0 or unallocated_cost != 0
    shares = ratios(pod_hours + ([unallocated] if with_remainder else []))
    metric = DEFAULT_METRICS.get(signal, signal)
    for p, hours, share in zip(pods, pod_hours, shares, strict=False):
        row = dict(shared)
        row.update(focus._money_columns(money.to_decimal(p["_cost"]), price, p["_allocated"] or 0.0))
        workload = p.get("workload") or ""
        tags = {"team": p["team"], "k8s/namespace": p["namespace"], "k8s/workload": workload,
                "kueue/cluster-queue": p["cluster_queue"], "kueue/local-queue": p["local_queue"]}
        allocated, unmeasured = p["_allocated"] or 0.0, p["_unmeasured"] or 0.0
        row.update({
            "AllocatedMethodDetails": _details(share, hours, "allocated"),
            "AllocatedResourceId": f"k8s://{cluster}/namespaces/{p['namespace']}/pods/{p['pod_uid']}",
            "AllocatedResourceName": f"{p['namespace']}/{p['pod']}",
            "AllocatedTags": focus._json({k: v for k, v in tags.items() if v}),
            "x_CostType": "allocated", "x_Namespace": p["namespace"], "x_Pod": p["pod"], "x_Workload": workload,
            "x_GpuCount": focus._plain(focus._dec(p["_gpus"])),
            "x_KueueClusterQueue": p["cluster_queue"], "x_KueueLocalQueue": p["local_queue"],
            "x_AllocatedGpuHours": focus._plain(hours),
            "x_WorkingGpuHours": focus._plain(focus._dec(p["_working"])),
            "x_IdleAllocatedGpuHours": focus._plain(focus._dec(p["_idle"])),
            "x_UnmeasuredGpuHours": focus._plain(focus._dec(unmeasured)),
            "x_IdleAllocatedCost": money.micro(p["_idle_cost"]),
            "x_UnpricedGpuHours": focus._plain(focus._dec(p["_unpriced"])),
            "x_UtilizationSignal": metric,
            "x_CoverageRatio": focus._plain(focus._dec(max(0.0, 1.0 - unmeasured / allocated)
                                                       if allocated > 0 else 1.0)),
            "x_ChargePeriodStatus": status,
        })
        yield row
    if with_remainder and origin is not None:
        row = dict(shared)
        row.update(focus._money_columns(unallocated_cost, price, origin["_unallocated"] or 0.0))
        row.update({
            "AllocatedMethodDetails": _details(shares[-1], unallocated, "unallocated"),
            "AllocatedResourceId": None, "AllocatedResourceName": None, "AllocatedTags": None,
            "x_CostType": "unallocated", "x_GpuCount": origin["_gpus"],
            "x_AllocatedGpuHours": focus._plain(unallocated),
            "x_UnpricedGpuHours": focus._plain(unallocated if price is None else Decimal(0)),
            "x_UnavailableGpuHours": focus._plain(focus._dec(origin["_unavailable"])),
            "x_ChargePeriodStatus": status,
        })
        yield row


def split_rows(*, start: datetime, end: datetime, granularity: str, signal: str, provisional: set[tuple[int, Any]],
               cluster_names: dict[int, str]) -> Iterator[list[Any]]:
    """Every allocated charge of `[start, end)`, origin by origin (charge period, cluster, node, GPU model, price).

    Both queries are ordered by charge period first; one period's origins and pods are matched in memory (a day of
    the fleet's pods at most), so the export streams whatever the range."""
    names = focus._names()
    origins = groupby(_origins(start, end, granularity), key=lambda r: r["_key"][0])
    pods = groupby(_pods(start, end, granularity, signal), key=lambda r: r["_key"][0])
    pending_pods = next(pods, None)
    for period, period_origins in origins:
        by_key: dict[OriginKey, dict[str, Any] | None] = {o["_key"]: o for o in period_origins}
        held: dict[OriginKey, list[dict[str, Any]]] = {}
        while pending_pods is not None and pending_pods[0] <= period:
            if pending_pods[0] == period:
                for p in pending_pods[1]:
                    held.setdefault(p["_key"], []).append(p)
            pending_pods = next(pods, None)
        for key in held:  # a pod on a node-hour with no capacity row (never in a consistent ledger): its own origin
            by_key.setdefault(key, None)
        for key in sorted(by_key, key=lambda k: (k[1], k[2], k[3], k[4] is None, k[4] or 0)):
            for row in _split(key, by_key[key], held.get(key, []), granularity=granularity, signal=signal,
                              provisional=provisional, cluster_names=cluster_names, names=names):
                yield [row.get(c) for c in COLUMNS]


def method_documentation() -> dict[str, Any]:
    """The documented method (FOCUS asks for one per AllocatedMethodId), delivered in the metadata."""
    return {"AllocatedMethodId": METHOD_ID,
            "Description": "A node's GPU capacity cost in a charge period (GPU-hours x the price card's unit "
                           "price) split by GPU-hours: one allocated charge per pod (its allocated GPU-hours) and "
                           "one for the GPU-hours no pod held (AllocatedResourceId null). AllocatedRatio = the "
                           "charge's GPU-hours / the node's; the ratios of one origin sum to 1.",
            "Documentation": "docs/reports.md#focus-13-split-allocation",
            "TagKeyPrefixes": ["team", "k8s/", "kueue/"]}
