"""A cloud bill imported for a closed week restates it in the billed basis (docs/billing.md, docs/reports.md): the
restated edition is mailed (aiosmtpd) with the per-team differences, and every billed figure in it is the API's.

The standard week (tests/reports/conftest.py): node n1 (8 H100) holds vision 2 GPUs all hour, nlp 1 GPU for 2222 s,
research 3 GPUs for 1234 s; m1 (A100) holds data. The bill: n1 at 480.00 a day (EffectiveCost), nothing for m1.
Per hour n1 costs 20.00 of which, by the GPU-hours held of its 8: vision 2/8 -> 5.000000, nlp (2222/3600)/8 ->
1.543056, research (3 x 1234/3600)/8 -> 2.570833. Over 168 hours: vision 840.000000, nlp 259.233408, research
431.899944, the unallocated rest 3360 - 1531.133352 = 1828.866648; data's 168 GPU-hours are not on the bill.
Printed in cents apportioned to 3360.00: 840.00, 259.23, 431.90 (largest remainders), 1828.87.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from apps.billing.services import import_bill
from apps.reports.models import ReportEdition, ReportSubscription
from apps.reports.services import send_reports
from apps.reports.statement import UNALLOCATED
from tests.billing.helpers import N, sync_nodes
from tests.billing.test_import import _file13, _row13
from tests.reports.conftest import END, NOW, START, text_part

pytestmark = pytest.mark.services


def _bill() -> bytes:
    rows = [_row13(ChargePeriodStart=f"{START + timedelta(days=d):%Y-%m-%dT%H:%M:%SZ}",
                   ChargePeriodEnd=f"{START + timedelta(days=d + 1):%Y-%m-%dT%H:%M:%SZ}",
                   BillingPeriodStart="2026-11-01T00:00:00Z", BillingPeriodEnd="2026-12-01T00:00:00Z",
                   ResourceId="arn:aws:ec2:us-east-1:200000000012:instance/i-0n1", ResourceName="i-0n1",
                   EffectiveCost="480.00", BilledCost="400.00", PricingQuantity="24")
            for d in range(7)]
    return _file13(rows)


def test_a_bill_for_a_closed_week_restates_it_team_by_team_in_the_billed_basis(week, people, smtp_settings):
    sync_nodes(week, [N("n1", "aws:///us-east-1a/i-0n1"), N("m1", "aws:///us-east-1a/i-0m1")], START)
    for user in (people.finance, people.lead):
        ReportSubscription.objects.create(user=user, email=user.email, cadence="weekly")
    send_reports(now=NOW)
    first = ReportEdition.objects.get(scope="all", version=1)
    assert first.figures["billed"] is None and len(smtp_settings.messages) == 2
    assert send_reports(now=NOW + timedelta(hours=1)).sent == []  # nothing changed, nothing sent

    result = import_bill(_bill(), "aws-2026-11.csv")
    assert result.bill.lines_matched == 7
    outcome = send_reports(now=NOW + timedelta(hours=2))
    assert sorted(outcome.sent) == ["2026-W47 finance@example.com (restated v2)",
                                    "2026-W47 vision-lead@example.com (restated v2)"]
    restated = ReportEdition.objects.get(scope="all", version=2)
    billed = restated.figures["billed"]
    assert billed["basis"] == "EffectiveCost"
    rows = {r["name"]: r for r in billed["rows"]}
    assert {n: (r["cost"], r["cost_printed"]) for n, r in rows.items()} == {
        "data": ("0.000000", "0.00"), "nlp": ("259.233408", "259.23"), "research": ("431.899944", "431.90"),
        "vision": ("840.000000", "840.00"), UNALLOCATED: ("1828.866648", "1828.87")}
    assert rows["data"]["unbilled_gpu_hours"] == 168.0 and billed["total_printed"] == "3360.00"
    # The price-card figures did not move: the restatement is the billed basis only, team by team.
    assert restated.figures["restatement"]["rows"] == [] and restated.figures["totals"] == first.figures["totals"]
    changes = {c["name"]: c for c in restated.figures["restatement"]["billed"]["rows"]}
    assert changes["vision"] == {"name": "vision", "old_cost": None, "new_cost": "840.00", "delta": "840.00"}
    assert changes[UNALLOCATED]["new_cost"] == "1828.87" and "data" in changes

    # Every billed figure of the edition is the API's in the billed basis (exact, to the micro-dollar).
    api = APIClient()
    api.force_authenticate(people.finance)
    body = api.get("/api/v1/billed-costs/", {"start": START.isoformat(), "end": END.isoformat()}).json()
    assert {t["team"]: Decimal(str(t["cost"])) for t in body["teams"]} == {
        n: Decimal(r["cost"]) for n, r in rows.items() if n != UNALLOCATED}
    assert Decimal(str(body["unallocated_cost"])) == Decimal(rows[UNALLOCATED]["cost"])
    assert Decimal(str(body["total_cost"])) == Decimal("3360")

    texts = {tuple(m.rcpt_tos): text_part(m.message) for m in smtp_settings.messages[2:]}
    finance_text = texts[("finance@example.com",)]
    assert "In the billed basis (EffectiveCost of the cloud bill):" in finance_text
    assert "BILLED BASIS (EffectiveCost of the imported cloud bill" in finance_text
    for name, printed in (("vision", "$840.00"), ("nlp", "$259.23"), ("research", "$431.90"),
                          (UNALLOCATED, "$1,828.87")):
        line = next(ln for ln in finance_text.split("BILLED BASIS")[1].splitlines() if ln.strip().startswith(name))
        assert printed in line, line
    lead_text = texts[("vision-lead@example.com",)]
    assert "$840.00" in lead_text.split("BILLED BASIS")[1] and UNALLOCATED not in lead_text.split("BILLED BASIS")[1]
    lead_api = APIClient()
    lead_api.force_authenticate(people.lead)
    lead_body = lead_api.get("/api/v1/billed-costs/", {"start": START.isoformat(), "end": END.isoformat()}).json()
    assert [t["team"] for t in lead_body["teams"]] == ["vision"] and lead_body["unallocated_cost"] is None

    assert send_reports(now=NOW + timedelta(hours=3)).sent == []  # the same bill again: nothing restated
    assert not import_bill(_bill(), "again.csv").created


def test_the_monthly_report_has_the_reconciliation_section_of_the_api(week, people, smtp_settings):
    """A forced (provisional) edition of 2026-11 with the bill: per cluster the price card (the standard week's
    capacity of n1 at 3.3333 x 8 GPUs x 168 h = 4479.9552) against the bill (7 x 480.00 = 3360.00), in cents, as
    `/api/v1/reconciliation/?month=2026-11` has them; m1 (no price, no bill line) is a node without bill line."""
    from apps.reports.periods import parse_period

    sync_nodes(week, [N("n1", "aws:///us-east-1a/i-0n1"), N("m1", "aws:///us-east-1a/i-0m1")], START)
    import_bill(_bill(), "aws-2026-11.csv")
    ReportSubscription.objects.create(user=people.finance, email=people.finance.email, cadence="monthly")
    send_reports(now=NOW, period=parse_period("2026-11"), force=True)
    edition = ReportEdition.objects.get(period="2026-11", scope="all")
    (prod,) = edition.figures["reconciliation"]["clusters"]
    api = APIClient()
    api.force_authenticate(people.finance)
    (api_prod,) = api.get("/api/v1/reconciliation/", {"month": "2026-11"}).json()["clusters"]
    for key in ("price_card_cost", "billed_cost", "variance"):
        assert Decimal(prod[key]) == Decimal(str(api_prod[key])).quantize(Decimal("0.01")), key
    assert (prod["price_card_cost"], prod["billed_cost"]) == ("4479.96", "3360.00")
    assert prod["nodes_without_bill"] == api_prod["nodes_without_bill"] == ["m1"]
    text = text_part(smtp_settings.messages[-1].message)
    section = text.split("RECONCILIATION (EffectiveCost", 1)[1].split("\n\n", 1)[0]
    assert "card $4,479.96" in section and "bill $3,360.00" in section and "variance -$1,119.96" in section
    assert "1 GPU node(s) without bill line" in section
