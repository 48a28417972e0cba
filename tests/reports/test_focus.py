"""The FOCUS 1.2 export: BilledCost adds up to the fleet's capacity cost, finance and staff only, bounded, and
valid for the FinOps Foundation's focus-validator."""

from __future__ import annotations

import importlib.util
import math
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from apps.inventory.gpus import MIG_MIXED, GpuNode
from apps.reports import focus
from apps.usage.ledger import NodeFact, PodFact, SeriesFact
from apps.usage.selectors import capacity_totals, usage_report
from tests.harness.services import require_service
from tests.reports.conftest import END, H100, M1, N1, START, csv_rows, series, standard_pods, write_hour

ROOT = Path(__file__).resolve().parents[2]


def api(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_billed_cost_sums_to_the_fleet_capacity_cost_and_each_team_to_its_cost(week):
    capacity = capacity_totals(start=START, end=END)
    teams = usage_report(start=START, end=END, group_by=["team"], visible_teams=None).figures_by("team")
    for granularity in ("day", "hour"):
        rows = csv_rows(focus.focus_csv(start=START, end=END, granularity=granularity))
        assert sum(Decimal(r["BilledCost"]) for r in rows) == capacity.capacity_cost
        for team, figures in teams.items():
            assert sum(Decimal(r["BilledCost"]) for r in rows if r["SubAccountId"] == team) == figures.cost
        unallocated = [r for r in rows if r["x_CostType"] == "unallocated"]
        assert {r["SubAccountId"] for r in unallocated} == {focus.UNALLOCATED_ACCOUNT}
        assert sum(Decimal(r["BilledCost"]) for r in unallocated) == capacity.unallocated_cost
        # Quantities: allocated + unallocated GPU-hours = capacity GPU-hours.
        assert math.isclose(sum(float(r["ConsumedQuantity"]) for r in rows), capacity.capacity_gpu_hours,
                            rel_tol=1e-9)
        for r in rows:
            assert r["BilledCost"] == r["EffectiveCost"] == r["ContractedCost"] == r["ListCost"]
            if r["ContractedUnitPrice"]:  # price x quantity = cost, inside the validator's tolerance
                product = Decimal(r["ContractedUnitPrice"]) * Decimal(r["PricingQuantity"])
                assert abs(product - Decimal(r["BilledCost"])) <= Decimal("1e-9") * max(abs(product), 1)
                assert abs(Decimal(r["PricingQuantity"]) - Decimal(r["ConsumedQuantity"])) < Decimal("0.000001") * 24
            else:  # unpriced: no unit price, cost 0, the hours said to be unpriced (never a $0 price)
                assert r["BilledCost"] == "0.000000" and r["SkuPriceId"] == "" and Decimal(r["x_UnpricedGpuHours"]) > 0
            # Working and idle are views of the allocation: never more than it.
            if r["x_CostType"] == "allocated":
                assert Decimal(r["x_IdleAllocatedCost"]) <= Decimal(r["BilledCost"]) or r["ContractedUnitPrice"] == ""
                parts = sum(float(r[c]) for c in ("x_WorkingGpuHours", "x_IdleAllocatedGpuHours",
                                                  "x_UnmeasuredGpuHours"))
                assert math.isclose(parts, float(r["ConsumedQuantity"]), rel_tol=1e-6)
    daily = csv_rows(focus.focus_csv(start=START, end=END))
    assert {(r["ChargePeriodStart"], r["ChargePeriodEnd"]) for r in daily} == {
        (f"2026-11-{d:02d}T00:00:00Z", f"2026-11-{d + 1:02d}T00:00:00Z") for d in range(16, 23)}
    assert {r["BillingPeriodStart"] for r in daily} == {"2026-11-01T00:00:00Z"}
    assert {r["InvoiceId"] for r in daily} == {"gpufinops-2026-11"}


def test_finance_and_staff_get_the_export_and_team_members_do_not(week, people):
    url = "/api/v1/exports/focus/?start=2026-11-16&end=2026-11-23"
    expected = focus.focus_csv(start=START, end=END)
    for user in (people.finance, people.staff):
        response = api(user).get(url)
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        assert body(response) == expected
    usage = api(people.finance).get("/api/v1/usage/?start=2026-11-16&end=2026-11-23&group_by=team").json()
    assert sum(Decimal(r["BilledCost"]) for r in csv_rows(expected)) == Decimal(str(usage["capacity"]["capacity_cost"]))
    for user in (people.lead, people.loner):
        refused = api(user).get(url)
        assert refused.status_code == 403 and "finance and staff" in refused.json()["detail"]
        assert api(user).get("/api/v1/exports/focus/metadata/").status_code == 403
    assert api(None).get(url).status_code == 401
    metadata = api(people.finance).get("/api/v1/exports/focus/metadata/").json()
    assert metadata["FocusVersion"] == "1.2"
    assert {c["ColumnName"] for c in metadata["ColumnDefinition"]} == set(focus.X_COLUMNS)


def test_the_command_writes_the_same_file(week, tmp_path, capsys):
    out = tmp_path / "focus.csv"
    call_command("export_focus", "--start", "2026-11-16", "--end", "2026-11-23", "--out", str(out),
                 "--metadata", str(tmp_path / "meta.json"))
    assert out.read_bytes() == focus.focus_csv(start=START, end=END)
    assert "rows, SHA-256" in capsys.readouterr().out
    assert '"FocusVersion": "1.2"' in (tmp_path / "meta.json").read_text()


def _validator():
    spec = importlib.util.spec_from_file_location("focus_validate", ROOT / ".ci" / "focus_validate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not (module.venv_dir() / "bin" / "focus-validator").exists():
        require_service("focus-validator", f"not installed in {module.venv_dir()} "
                                           "(python .ci/focus_validate.py --install; .ci/run does it)")
    return module


def test_the_export_is_bounded_and_says_which_parameter_to_change(people, settings):
    settings.GPUFINOPS_LEDGER_KEEP_MONTHS = 0  # keep every month (the retention is checked at the end)
    client = api(people.finance)
    cases = {
        "start=2026-01-01&end=2026-04-05": "end",  # 94 days
        "start=2026-01-01&end=2026-02-02&granularity=hour": "granularity",  # 32 days of hours
        "start=2026-01-01&end=2026-01-02&granularity=week": "granularity",
        "start=2026-01-01T05:00:00Z&end=2026-01-02": "start",  # daily charge periods need whole days
        "start=yesterday": "start",
    }
    for query, param in cases.items():
        response = client.get(f"/api/v1/exports/focus/?{query}")
        assert response.status_code == 400, query
        assert param in response.json()["errors"], (query, response.json())
    assert client.get("/api/v1/exports/focus/?start=2026-01-01&end=2026-04-04").status_code == 200  # 93 days
    # Before the ledger's retention (pod rows pruned) an export would not add up: refused, naming start.
    settings.GPUFINOPS_LEDGER_KEEP_MONTHS = 13
    old = client.get("/api/v1/exports/focus/?start=2020-01-01&end=2020-01-08")
    assert old.status_code == 400 and "pruned" in old.json()["errors"]["start"][0]


@pytest.mark.services
def test_focus_validator_finds_no_failed_rule(prod, people, tmp_path, capsys):
    """A ledger with every kind of row: whole GPUs, a MIG slice, partial hours, an unpriced model, hostile names,
    unallocated capacity, two days and two billing months."""
    validator = _validator()
    mig = NodeFact("g1", "mig-pool", GpuNode(H100, 1, MIG_MIXED, 7), 3600.0, False, Decimal("4.00"))

    def make(hour):
        pods, found = standard_pods()
        pods.append(PodFact("u-mig", "nb", "jupyter-0", "g1", "vision", {"nvidia.com/mig-1g.10gb": 1}, 3600.0,
                            workload="StatefulSet/jupyter"))
        pods.append(PodFact("u-evil", "x", "p", "n1", '=HYPERLINK("http://evil","x")', {"nvidia.com/gpu": 1}, 900.0))
        found += [SeriesFact("nb", "jupyter-0", "GPU-m", "1", "1g.10gb", {"sm_active": 0.2, "gr_engine_active": 0.3,
                                                                            "tensor_active": 0.1, "gpu_util": 0.9}),
                  series("x", "p", "GPU-x", 0.0)]
        return pods, found

    start = START + timedelta(days=14, hours=12)  # 2026-11-30 12:00 .. 2026-12-01 12:00: two billing months
    hour = start
    while hour < start + timedelta(hours=24):
        pods, found = make(hour)
        write_hour(prod, hour, pods, found, nodes=(N1, M1, mig))
        hour += timedelta(hours=1)
    path = tmp_path / "export.csv"
    path.write_bytes(focus.focus_csv(start=start - timedelta(hours=12), end=start + timedelta(hours=36)))
    rows = csv_rows(path.read_bytes())
    assert {r["BillingPeriodStart"] for r in rows} == {"2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"}
    assert any(r["ResourceName"] == "nb/jupyter-0" and r["x_GpuCount"] == "0.142857143" for r in rows)
    assert validator.validate(path), capsys.readouterr().out
    assert "0 failed rule(s)" in capsys.readouterr().out


def test_the_demo_week_validates_in_ci():
    """The CI step (.ci/run) exports the demo week (manage.py demo) and runs the validator on it; this checks the
    step is there and fails the run on a failed rule."""
    script = (ROOT / ".ci" / "run").read_text()
    assert "python .ci/focus_validate.py" in script.replace('"$PYTHON"', "python")
    assert "export_focus" in script and "manage.py demo" in script

