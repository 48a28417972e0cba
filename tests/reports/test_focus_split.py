"""The FOCUS 1.3 export (split cost allocation): each node's capacity cost, the origin charge, written as allocated
charges (its pods and its unallocated capacity) that add up to it to the cent, with the 1.3 allocation columns; the
1.2 export is unchanged by it."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal

from django.core.management import call_command
from django.db.models import Sum
from django.db.models.functions import TruncDate
from rest_framework.test import APIClient

from apps.reports import focus, focus_split
from apps.usage.models import NodeHour
from tests.reports.conftest import END, START, csv_rows

CENT = Decimal("0.01")
ALLOCATION = ("AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName",
              "AllocatedTags")
# The dimensions and unit prices every allocated charge shares with its origin (FOCUS 1.3, split handling).
ORIGIN_COLUMNS = ("ResourceId", "ResourceName", "ResourceType", "SubAccountId", "SubAccountName", "SubAccountType",
                  "ChargeDescription", "ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "SkuId",
                  "SkuPriceId", "SkuMeter", "ListUnitPrice", "ContractedUnitPrice", "Tags", "AllocatedMethodId",
                  "ServiceName", "BillingAccountId", "InvoiceId")


def _origins(rows: list[dict]) -> dict[tuple[str, str, str], list[dict]]:
    out: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for r in rows:
        out[(r["ResourceId"], r["ChargePeriodStart"], r["SkuPriceId"])].append(r)
    return out


def test_the_allocated_charges_of_a_node_add_up_to_its_capacity_cost(week):
    """The origin is the ledger's node capacity (NodeHour.capacity_cost, read here straight from the table): the
    allocated charges of each node and day add up to it to the cent, and quantities and ratios to the node's."""
    expected = {
        (f"k8s://{week.name}/nodes/{r['node']}", f"{r['day']:%Y-%m-%d}T00:00:00Z"): r
        for r in NodeHour.objects.filter(hour__gte=START, hour__lt=END)
        .annotate(day=TruncDate("hour", tzinfo=UTC)).values("node", "day")
        .annotate(cost=Sum("capacity_cost"), hours=Sum("capacity_gpu_hours"))}
    rows = csv_rows(focus.focus_csv(start=START, end=END, version="1.3"))
    origins = _origins(rows)
    assert {(k[0], k[1]) for k in origins} == set(expected)
    split_any = False
    for (resource, day, _), charges in origins.items():
        node = expected[(resource, day)]
        cost = sum(Decimal(r["BilledCost"]) for r in charges)
        assert cost.quantize(CENT) == Decimal(node["cost"]).quantize(CENT), (resource, day)
        assert math.isclose(sum(float(r["ConsumedQuantity"]) for r in charges), node["hours"], rel_tol=1e-9)
        details = [json.loads(r["AllocatedMethodDetails"]) for r in charges]
        assert sum(Decimal(str(d["Elements"][0]["AllocatedRatio"])) for d in details) == 1
        for r, d in zip(charges, details, strict=True):
            element = d["Elements"][0]
            assert element["UsageUnit"] == "GPU-Hours"
            assert math.isclose(element["UsageQuantity"], float(r["ConsumedQuantity"]), abs_tol=1e-9)
            assert math.isclose(element["AllocatedRatio"], float(r["ConsumedQuantity"]) / node["hours"],
                                abs_tol=1e-8)
        for column in ORIGIN_COLUMNS:
            assert len({r[column] for r in charges}) == 1, (resource, day, column)
        kinds = [r["x_CostType"] for r in charges]
        split_any |= kinds.count("allocated") >= 2 and "unallocated" in kinds
    assert split_any  # some node-day holds several pods and idle capacity
    # The whole file is the fleet's capacity cost, like the 1.2 export's.
    assert (sum(Decimal(r["BilledCost"]) for r in rows)
            == sum(Decimal(r["BilledCost"]) for r in csv_rows(focus.focus_csv(start=START, end=END))))


def test_the_allocation_columns_follow_the_13_rules(week):
    rows = csv_rows(focus.focus_csv(start=START, end=END, version="1.3"))
    assert set(ALLOCATION) <= set(rows[0]) and {"HostProviderName", "ServiceProviderName"} <= set(rows[0])
    rows_12 = [r for r in csv_rows(focus.focus_csv(start=START, end=END)) if r["x_CostType"] == "allocated"]
    pods_12 = {r["ResourceId"]: r for r in rows_12}
    seen = defaultdict(set)
    for r in rows:
        assert r["AllocatedMethodId"] == focus_split.METHOD_ID
        assert r["ResourceType"] == "Kubernetes Node" and r["ResourceId"].startswith("k8s://")
        if r["x_CostType"] == "unallocated":  # the unallocated remainder: no allocated resource (1.3)
            assert r["AllocatedResourceId"] == r["AllocatedResourceName"] == r["AllocatedTags"] == ""
            continue
        assert r["AllocatedResourceId"] in pods_12  # the pod, named as the 1.2 export names it
        assert r["AllocatedResourceName"] == pods_12[r["AllocatedResourceId"]]["ResourceName"]
        tags, allocated = json.loads(r["Tags"]), json.loads(r["AllocatedTags"])
        assert allocated["team"] == pods_12[r["AllocatedResourceId"]]["SubAccountId"]
        assert not set(tags) & set(allocated)  # AllocatedTags repeats no key of Tags
        key = (r["ResourceId"], r["ChargePeriodStart"], r["SkuPriceId"], r["AllocatedResourceId"])
        assert key not in seen  # unique within the origin
        seen[key].add(1)
    # Each team's allocated charges are its 1.2 cost.
    by_team_13: dict[str, Decimal] = defaultdict(Decimal)
    for r in rows:
        if r["AllocatedTags"]:
            by_team_13[json.loads(r["AllocatedTags"])["team"]] += Decimal(r["BilledCost"])
    by_team_12: dict[str, Decimal] = defaultdict(Decimal)
    for r in rows_12:
        by_team_12[r["SubAccountId"]] += Decimal(r["BilledCost"])
    assert by_team_13 == by_team_12


def test_the_api_and_command_serve_13_on_request_and_12_by_default(week, people, tmp_path):
    client = APIClient()
    client.force_authenticate(people.finance)
    base = "/api/v1/exports/focus/?start=2026-11-16&end=2026-11-23"
    split = client.get(base + "&version=1.3")
    assert split.status_code == 200
    assert b"".join(split.streaming_content) == focus.focus_csv(start=START, end=END, version="1.3")
    assert "focus-1.3-day" in split["Content-Disposition"]
    default = client.get(base)
    body = b"".join(default.streaming_content)
    assert body == focus.focus_csv(start=START, end=END) and b"AllocatedMethodId" not in body.split(b"\r\n")[0]
    assert client.get(base + "&version=1.4").status_code == 400
    meta = client.get("/api/v1/exports/focus/metadata/?version=1.3").json()
    assert meta["FocusVersion"] == "1.3" and meta["AllocatedMethods"][0]["AllocatedMethodId"] == focus_split.METHOD_ID
    out = tmp_path / "split.csv"
    call_command("export_focus", "--start", "2026-11-16", "--end", "2026-11-23", "--version", "1.3", "--out", str(out))
    assert out.read_bytes() == focus.focus_csv(start=START, end=END, version="1.3")


def test_hourly_split_matches_the_daily_split(week):
    day = datetime(2026, 11, 17, tzinfo=UTC)
    hourly = csv_rows(focus.focus_csv(start=START, end=END, version="1.3", granularity="hour"))
    daily = csv_rows(focus.focus_csv(start=START, end=END, version="1.3"))
    assert sum(Decimal(r["BilledCost"]) for r in hourly) == sum(Decimal(r["BilledCost"]) for r in daily)
    assert any(r["ChargePeriodStart"] == f"{day:%Y-%m-%d}T05:00:00Z" for r in hourly)


def test_ratios_sum_to_one_exactly():
    for quantities in ([Decimal(1)] * 3, [Decimal("0.1"), Decimal("0.2"), Decimal("0.7")], [Decimal(0)] * 7,
                       [Decimal("1e-9"), Decimal(5)], [Decimal(2)]):
        shares = focus_split.ratios(quantities)
        assert sum(shares) == 1 and len(shares) == len(quantities)
        assert all(s >= 0 for s in shares)
    assert focus_split.ratios([Decimal(1), Decimal(3)]) == [Decimal("0.25"), Decimal("0.75")]
    assert focus_split.ratios([]) == []
