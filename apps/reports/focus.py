"""The ledger as FOCUS 1.2 (FinOps Open Cost and Usage Specification) cost and usage rows.

"Pod as resource" (docs/reports.md has the column-by-column mapping):

* one **allocated** row per pod, GPU model, unit price and charge period (a UTC day, or an hour): the team is
  the sub-account, the pod the resource, its allocated GPU-hours the quantity, its cost the billed cost;
* one **unallocated** row per node, GPU model, unit price and charge period, on the platform's sub-account
  (`__unallocated__`, which no team can be named: team names are label values): capacity nobody held.

So for the whole fleet, the sum of `BilledCost` over a range is the fleet's capacity cost for it, to the
micro-dollar (the ledger's precision). Working, idle and unmeasured GPU-hours, idle cost and the activity
signal are `x_` columns: views of the allocation that never add to `BilledCost`.

Money is exact decimal (micro-dollars). `ConsumedQuantity` is the ledger's allocated (or unallocated) GPU-hours;
`PricingQuantity` is the quantity the billed cost prices exactly (`BilledCost / unit price`): the ledger rounds
each hour's cost to the micro-dollar, so the two differ by less than a millionth of a GPU-hour per hour.
A GPU model without a price has null unit prices, costs of 0 and `x_UnpricedGpuHours` (its cost is unknown,
not zero); FOCUS has no null cost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, localcontext
from typing import Any

from django.conf import settings
from django.db.models import Max, QuerySet, Sum
from django.db.models.functions import TruncDate

from apps.common.csvfile import csv_bytes
from apps.common.timeutils import HOUR, month_start, next_month, to_utc
from apps.inventory.models import Cluster
from apps.usage import money
from apps.usage.activity import DEFAULT_METRICS
from apps.usage.models import Bucket, NodeHour, PodHour

FOCUS_VERSION = "1.2"  # the default export
# 1.3 is the split-cost-allocation form (apps/reports/focus_split.py): the same money, by node.
VERSIONS = ("1.2", "1.3")
UNALLOCATED_ACCOUNT = "__unallocated__"
GPU_HOURS = "GPU-Hours"
GRANULARITIES = ("day", "hour")
# Decimal places of PricingQuantity: price x quantity matches the cost far inside the validator's 1e-9.
QUANTITY_PLACES = Decimal("1e-12")
GPU_HOURS_PLACES = Decimal("1e-9")
BATCH = 2000

FOCUS_COLUMNS: tuple[str, ...] = (
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingAccountType",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountStatus",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceId",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SkuId",
    "SkuMeter",
    "SkuPriceDetails",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "SubAccountType",
    "Tags",
)
# Custom columns, after the FOCUS ones (ColumnDefinition in `focus_metadata`).
X_COLUMNS: dict[str, str] = {
    "x_CostType": "allocated (a pod's allocation, charged to its team) or unallocated (capacity no pod held, "
                  "held by the platform)",
    "x_Cluster": "Kubernetes cluster name",
    "x_Namespace": "pod namespace (allocated rows)",
    "x_Pod": "pod name (allocated rows)",
    "x_Workload": "the pod's top controller, Kind/name (allocated rows; empty when unknown)",
    "x_Node": "node name",
    "x_NodeGroup": "node group (first node-pool label present, else the GPU model)",
    "x_GpuModel": "nvidia.com/gpu.product without MIG/SHARED suffixes: the price-card key",
    "x_GpuCount": "physical-GPU equivalents the pod held (MIG slice = slices/7, time-sliced replica = 1/R), or the "
                  "node's physical GPUs; the largest value in the charge period",
    "x_KueueClusterQueue": "Kueue ClusterQueue of the pod's workload (allocated rows)",
    "x_KueueLocalQueue": "Kueue LocalQueue of the pod's workload (allocated rows)",
    "x_AllocatedGpuHours": "GPU-hours held (allocated rows) or not held (unallocated rows): = ConsumedQuantity",
    "x_WorkingGpuHours": "informational subset of x_AllocatedGpuHours: allocated x activity. Never add it to "
                         "PricingQuantity or ConsumedQuantity",
    "x_IdleAllocatedGpuHours": "informational subset of x_AllocatedGpuHours: allocated x (1 - activity). Never add "
                               "it to PricingQuantity or ConsumedQuantity",
    "x_UnmeasuredGpuHours": "informational subset of x_AllocatedGpuHours: held with no activity data (neither "
                            "working nor idle)",
    "x_IdleAllocatedCost": "informational subset of BilledCost: idle GPU-hours x unit price. Never add it to "
                           "BilledCost",
    "x_UnpricedGpuHours": "GPU-hours on a GPU model without a price: their cost is unknown (costs show 0)",
    "x_UnavailableGpuHours": "part of the unallocated GPU-hours on nodes that could not take work (cordoned, "
                             "NotReady, zero allocatable)",
    "x_UtilizationSignal": "DCGM metric behind working/idle (the default activity signal)",
    "x_CoverageRatio": "measured share of the allocated GPU-hours: 1 - unmeasured / allocated",
    "x_ChargePeriodStatus": "final (every hour of the charge period final in the ledger) or provisional (may "
                            "still change)",
}
COLUMNS: tuple[str, ...] = (*FOCUS_COLUMNS, *X_COLUMNS)


@dataclass(frozen=True)
class FocusScope:
    """What an export covers: every team with the unallocated rows (None), or some teams' pods only."""

    teams: frozenset[str] | None = None

    @property
    def fleet(self) -> bool:
        return self.teams is None


def _iso(t: datetime) -> str:
    return to_utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(value: dict) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _dec(value: float | None) -> Decimal:
    """A GPU-hour float as a decimal, to a billionth."""
    with localcontext() as ctx:
        ctx.prec = 50
        return Decimal(repr(float(value or 0.0))).quantize(GPU_HOURS_PLACES)


def _plain(value: Decimal) -> str:
    """A decimal as plain digits without trailing zeros (FOCUS numbers have no exponent)."""
    return format(value.normalize(), "f") if value else "0"


def sku_id(gpu_model: str) -> str:
    return f"gpu.{gpu_model.lower()}"


def _names() -> dict[str, str]:
    return {
        "provider": settings.GPUFINOPS_FOCUS_PROVIDER_NAME,
        "account_id": settings.GPUFINOPS_FOCUS_BILLING_ACCOUNT_ID,
        "account_name": settings.GPUFINOPS_FOCUS_BILLING_ACCOUNT_NAME,
    }


def _period_bounds(key: date | datetime, granularity: str) -> tuple[datetime, datetime]:
    if granularity == "hour":
        if not isinstance(key, datetime):  # hour rows are keyed by their start, day rows by their date
            raise TypeError(f"an hour row's key is a datetime, not {key!r}")
        start = to_utc(key)
        return start, start + HOUR
    start = datetime(key.year, key.month, key.day, tzinfo=UTC)
    return start, start + timedelta(days=1)


def _provisional_periods(start: datetime, end: datetime, granularity: str) -> set[tuple[int, Any]]:
    """(cluster id, charge period) pairs with any hour not final and OK: those rows may still change."""
    qs = Bucket.objects.filter(hour__gte=start, hour__lt=end).exclude(state=Bucket.State.FINAL, status="ok")
    out: set[tuple[int, Any]] = set()
    for cluster_id, hour in qs.values_list("cluster_id", "hour"):
        out.add((cluster_id, to_utc(hour) if granularity == "hour" else to_utc(hour).date()))
    return out


def _has_field(model, name: str) -> bool:
    return any(f.name == name for f in model._meta.get_fields())


def _common(period: tuple[datetime, datetime], names: dict[str, str]) -> dict[str, Any]:
    start, end = period
    billing_start = month_start(start)
    return {
        "BillingAccountId": names["account_id"],
        "BillingAccountName": names["account_name"],
        "BillingAccountType": "GPU Fleet",
        "BillingCurrency": "USD",
        "BillingPeriodStart": _iso(billing_start),
        "BillingPeriodEnd": _iso(next_month(billing_start)),
        "ChargeCategory": "Usage",
        "ChargeClass": None,
        "ChargeFrequency": "Usage-Based",
        # No commitment discounts: null (present because ConsumedQuantity's rules are conditioned on it).
        "CommitmentDiscountStatus": None,
        "ChargePeriodStart": _iso(start),
        "ChargePeriodEnd": _iso(end),
        "InvoiceId": f"{settings.GPUFINOPS_FOCUS_INVOICE_PREFIX}-{billing_start:%Y-%m}",
        "InvoiceIssuerName": names["provider"],
        "ProviderName": names["provider"],
        "PublisherName": names["provider"],
        "PricingCategory": "Standard",
        "PricingUnit": GPU_HOURS,
        "ConsumedUnit": GPU_HOURS,
        "ServiceName": "Kubernetes GPU Compute",
        "ServiceCategory": "Compute",
        "ServiceSubcategory": "Containers",
    }


def _money_columns(cost: Decimal, price: Decimal | None, quantity: float) -> dict[str, Any]:
    """Costs, unit prices and the quantities; unpriced rows have null unit prices and costs of 0."""
    consumed = _dec(quantity)
    if price is None:
        pricing_quantity = consumed
        unit = None
    else:
        unit = Decimal(price)
        with localcontext() as ctx:
            ctx.prec = 50
            pricing_quantity = (cost / unit).quantize(QUANTITY_PLACES) if unit else consumed
    cost = money.micro(cost)
    return {
        "BilledCost": cost, "EffectiveCost": cost, "ListCost": cost, "ContractedCost": cost,
        "ListUnitPrice": unit, "ContractedUnitPrice": unit,
        "PricingQuantity": _plain(pricing_quantity), "ConsumedQuantity": _plain(consumed),
    }


def _sku_columns(gpu_model: str, price: Decimal | None, meter: str) -> dict[str, Any]:
    sku = sku_id(gpu_model)
    priced = price is not None
    return {
        "SkuId": sku,
        "SkuMeter": meter,
        "SkuPriceId": f"{sku}:usd-{price.normalize():f}" if price is not None else None,
        "SkuPriceDetails": _json({"GpuCount": 1, "x_GpuModel": gpu_model}) if priced else None,
    }


def pod_rows(
    *, start: datetime, end: datetime, teams: frozenset[str] | None, granularity: str, signal: str,
    provisional: set[tuple[int, Any]], cluster_names: dict[int, str],
) -> Iterator[list[Any]]:
    """Allocated rows: one per pod, GPU model, unit price and charge period."""
    names = _names()
    qs: QuerySet = PodHour.objects.filter(hour__gte=start, hour__lt=end)
    if teams is not None:
        qs = qs.filter(team__in=sorted(teams))
    workload = _has_field(PodHour, "workload")
    period = "hour" if granularity == "hour" else "_period"
    if granularity != "hour":
        qs = qs.annotate(_period=TruncDate("hour", tzinfo=UTC))
    keys = [period, "team", "cluster_id", "namespace", "pod", "pod_uid", "node", "node_group", "gpu_model", "price",
            "cluster_queue", "local_queue", *(["workload"] if workload else [])]
    rows = (
        qs.values(*keys)
        .annotate(
            _allocated=Sum("allocated_gpu_hours"), _working=Sum(f"working_{signal}"), _idle=Sum(f"idle_{signal}"),
            _unmeasured=Sum(f"unmeasured_{signal}"), _cost=Sum("cost"), _idle_cost=Sum(f"idle_cost_{signal}"),
            _unpriced=Sum("unpriced_gpu_hours"), _gpus=Max("gpus"),
        )
        .order_by(period, "team", "cluster_id", "namespace", "pod", "pod_uid", "gpu_model", "price")
    )
    metric = DEFAULT_METRICS.get(signal, signal)
    for r in rows.iterator(chunk_size=BATCH):
        bounds = _period_bounds(r[period], granularity)
        cluster = cluster_names.get(r["cluster_id"], str(r["cluster_id"]))
        price = r["price"]
        allocated = r["_allocated"] or 0.0
        unmeasured = r["_unmeasured"] or 0.0
        row = _common(bounds, names)
        row.update(_money_columns(money.to_decimal(r["_cost"]), price, allocated))
        row.update(_sku_columns(r["gpu_model"], price, "GPU Allocation Time"))
        description = f"{r['gpu_model']} GPU allocation, {r['_gpus']:g} GPU(s), pod {r['namespace']}/{r['pod']}"
        if price is None:
            description += " (no price for this GPU model: cost unknown, shown as 0)"
        tags = {"team": r["team"], "k8s/cluster": cluster, "k8s/namespace": r["namespace"],
                "k8s/node-group": r["node_group"], "k8s/workload": r.get("workload") or "",
                "kueue/cluster-queue": r["cluster_queue"], "kueue/local-queue": r["local_queue"]}
        row.update({
            "ChargeDescription": description,
            "ResourceId": f"k8s://{cluster}/namespaces/{r['namespace']}/pods/{r['pod_uid']}",
            "ResourceName": f"{r['namespace']}/{r['pod']}",
            "ResourceType": "Kubernetes Pod",
            "SubAccountId": r["team"],
            "SubAccountName": r["team"],
            "SubAccountType": "Team",
            "Tags": _json({k: v for k, v in tags.items() if v}),
            "x_CostType": "allocated",
            "x_Cluster": cluster,
            "x_Namespace": r["namespace"],
            "x_Pod": r["pod"],
            "x_Workload": r.get("workload") or "",
            "x_Node": r["node"],
            "x_NodeGroup": r["node_group"],
            "x_GpuModel": r["gpu_model"],
            "x_GpuCount": _plain(_dec(r["_gpus"])),
            "x_KueueClusterQueue": r["cluster_queue"],
            "x_KueueLocalQueue": r["local_queue"],
            "x_AllocatedGpuHours": _plain(_dec(allocated)),
            "x_WorkingGpuHours": _plain(_dec(r["_working"])),
            "x_IdleAllocatedGpuHours": _plain(_dec(r["_idle"])),
            "x_UnmeasuredGpuHours": _plain(_dec(unmeasured)),
            "x_IdleAllocatedCost": money.micro(r["_idle_cost"]),
            "x_UnpricedGpuHours": _plain(_dec(r["_unpriced"])),
            "x_UnavailableGpuHours": None,
            "x_UtilizationSignal": metric,
            "x_CoverageRatio": _plain(_dec(max(0.0, 1.0 - unmeasured / allocated) if allocated > 0 else 1.0)),
            "x_ChargePeriodStatus": "provisional" if (r["cluster_id"], r[period]) in provisional else "final",
        })
        yield [row.get(c) for c in COLUMNS]


def node_rows(
    *, start: datetime, end: datetime, granularity: str, provisional: set[tuple[int, Any]],
    cluster_names: dict[int, str],
) -> Iterator[list[Any]]:
    """Unallocated rows: one per node, GPU model, unit price and charge period with capacity no pod held."""
    names = _names()
    qs: QuerySet = NodeHour.objects.filter(hour__gte=start, hour__lt=end)
    period = "hour" if granularity == "hour" else "_period"
    if granularity != "hour":
        qs = qs.annotate(_period=TruncDate("hour", tzinfo=UTC))
    rows = (
        qs.values(period, "cluster_id", "node", "node_group", "gpu_model", "price")
        .annotate(_unallocated=Sum("unallocated_gpu_hours"), _cost=Sum("unallocated_cost"),
                  _unavailable=Sum("unavailable_gpu_hours"), _gpus=Max("physical_gpus"))
        .order_by(period, "cluster_id", "node", "gpu_model", "price")
    )
    for r in rows.iterator(chunk_size=BATCH):
        unallocated = r["_unallocated"] or 0.0
        cost = money.to_decimal(r["_cost"])
        if unallocated <= 0 and cost == 0:
            continue
        bounds = _period_bounds(r[period], granularity)
        cluster = cluster_names.get(r["cluster_id"], str(r["cluster_id"]))
        price = r["price"]
        row = _common(bounds, names)
        row.update(_money_columns(cost, price, unallocated))
        row.update(_sku_columns(r["gpu_model"], price, "GPU Capacity Time"))
        description = f"Unallocated {r['gpu_model']} GPU capacity on node {r['node']}"
        if price is None:
            description += " (no price for this GPU model: cost unknown, shown as 0)"
        row.update({
            "ChargeDescription": description,
            "ResourceId": f"k8s://{cluster}/nodes/{r['node']}",
            "ResourceName": r["node"],
            "ResourceType": "Kubernetes Node",
            "SubAccountId": UNALLOCATED_ACCOUNT,
            "SubAccountName": "Unallocated capacity (platform)",
            "SubAccountType": "Platform",
            "Tags": _json({"k8s/cluster": cluster, "k8s/node-group": r["node_group"]}),
            "x_CostType": "unallocated",
            "x_Cluster": cluster,
            "x_Namespace": None,
            "x_Pod": None,
            "x_Workload": None,
            "x_Node": r["node"],
            "x_NodeGroup": r["node_group"],
            "x_GpuModel": r["gpu_model"],
            "x_GpuCount": r["_gpus"],
            "x_KueueClusterQueue": None,
            "x_KueueLocalQueue": None,
            "x_AllocatedGpuHours": _plain(_dec(unallocated)),
            "x_WorkingGpuHours": None,
            "x_IdleAllocatedGpuHours": None,
            "x_UnmeasuredGpuHours": None,
            "x_IdleAllocatedCost": None,
            "x_UnpricedGpuHours": _plain(_dec(unallocated if price is None else 0.0)),
            "x_UnavailableGpuHours": _plain(_dec(r["_unavailable"])),
            "x_UtilizationSignal": None,
            "x_CoverageRatio": None,
            "x_ChargePeriodStatus": "provisional" if (r["cluster_id"], r[period]) in provisional else "final",
        })
        yield [row.get(c) for c in COLUMNS]


def columns(version: str = FOCUS_VERSION) -> tuple[str, ...]:
    """The header of an export of `version`."""
    if version not in VERSIONS:
        raise ValueError(f"FOCUS version is one of {VERSIONS}")
    if version == "1.3":
        from apps.reports import focus_split  # it builds on this module's columns and helpers

        return focus_split.COLUMNS
    return COLUMNS


def focus_rows(
    *, start: datetime, end: datetime, scope: FocusScope = FocusScope(), granularity: str = "day",
    signal: str | None = None, version: str = FOCUS_VERSION,
) -> Iterator[list[Any]]:
    """Every FOCUS row of `[start, end)`, in a deterministic order (charge period, team, cluster, pod...; then
    the unallocated rows by charge period, cluster and node). Version 1.3 is the fleet's nodes split into their pods
    and unallocated capacity (apps/reports/focus_split.py): a whole-fleet export only."""
    from apps.usage.activity import default_signal

    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity is one of {GRANULARITIES}")
    columns(version)
    signal = signal or default_signal()
    provisional = _provisional_periods(start, end, granularity)
    cluster_names = dict(Cluster.objects.values_list("id", "name"))
    if version == "1.3":
        if not scope.fleet:
            raise ValueError("the FOCUS 1.3 split export covers the whole fleet (an origin is a whole node)")
        from apps.reports import focus_split

        yield from focus_split.split_rows(start=start, end=end, granularity=granularity, signal=signal,
                                          provisional=provisional, cluster_names=cluster_names)
        return
    yield from pod_rows(start=start, end=end, teams=scope.teams, granularity=granularity, signal=signal,
                        provisional=provisional, cluster_names=cluster_names)
    if scope.fleet:
        yield from node_rows(start=start, end=end, granularity=granularity, provisional=provisional,
                             cluster_names=cluster_names)


def retention_cutoff(now: datetime) -> datetime | None:
    """Pod and node rows before this are pruned (GPUFINOPS_LEDGER_KEEP_MONTHS, whole months; None: all kept), so
    an export reaching before it would not add up to the capacity cost."""
    keep = getattr(settings, "GPUFINOPS_LEDGER_KEEP_MONTHS", 0)
    if keep <= 0:
        return None
    cutoff = month_start(now)
    for _ in range(keep):
        cutoff = month_start(cutoff - timedelta(days=1))
    return cutoff


def focus_csv(*, version: str = FOCUS_VERSION, **kwargs) -> bytes:
    """The whole export as one CSV file (the report attachment, `export_focus`)."""
    return csv_bytes(columns(version), focus_rows(version=version, **kwargs))


def focus_csv_chunks(*, version: str = FOCUS_VERSION, **kwargs) -> Iterator[bytes]:
    """The same bytes as `focus_csv`, in pieces (the API streams large exports)."""
    header_columns = columns(version)
    header = csv_bytes(header_columns, [])
    yield header
    batch: list[Sequence[Any]] = []
    for row in focus_rows(version=version, **kwargs):
        batch.append(row)
        if len(batch) >= BATCH:
            yield csv_bytes(header_columns, batch)[len(header):]
            batch = []
    if batch:
        yield csv_bytes(header_columns, batch)[len(header):]


def focus_metadata(*, created: datetime | None = None, version: str = FOCUS_VERSION) -> dict[str, Any]:
    """FOCUS metadata (delivered beside the data): version, generator and the definition of every `x_` column
    (and, for 1.3, the documented allocation method)."""
    data: dict[str, Any] = {
        "FocusVersion": version,
        "DataGenerator": "gpufinops",
        "SchemaId": f"gpufinops-focus-{version}-{len(columns(version))}",
        "ProviderName": settings.GPUFINOPS_FOCUS_PROVIDER_NAME,
        "ColumnDefinition": [
            {"ColumnName": name, "DataType": "String" if name in ("x_CostType", "x_Cluster", "x_Namespace", "x_Pod",
                                                                  "x_Workload", "x_Node", "x_NodeGroup", "x_GpuModel",
                                                                  "x_KueueClusterQueue", "x_KueueLocalQueue",
                                                                  "x_UtilizationSignal", "x_ChargePeriodStatus")
             else "Decimal", "Description": text}
            for name, text in X_COLUMNS.items()
        ],
    }
    if version == "1.3":
        from apps.reports import focus_split

        data["AllocatedMethods"] = [focus_split.method_documentation()]
    if created is not None:
        data["CreationDate"] = _iso(created)
    return data
