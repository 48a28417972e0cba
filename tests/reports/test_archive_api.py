"""The e-mail's figures are the API's, the printed totals add up, and the archive (API and page) serves every
edition with its exact files to the people who may see it."""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from apps.inventory.models import Cluster
from apps.reports.models import ReportSubscription
from apps.reports.periods import last_complete, parse_period
from apps.reports.services import send_reports
from apps.usage.ledger import PodFact
from apps.usage.money import cents
from tests.harness.shared_rows import WORLD_FIXTURES
from tests.reports.conftest import (
    END,
    NOW,
    START,
    WEEK_WORLDS,
    Week,
    attachments,
    by_rcpt,
    fill,
    make_people,
    money,
    series,
    standard_pods,
    table_rows,
    text_part,
)

pytestmark = pytest.mark.services
CENT = Decimal("0.01")


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def build_two_weeks() -> Week:
    """2026-W46 without research and with vision on 3 GPUs, then the standard 2026-W47: changes to compare."""

    def previous(hour):
        pods, found = standard_pods()
        pods = [p for p in pods if p.team != "research"]
        pods[0] = PodFact("u-vision", "cv", "train-0", "n1", "vision", {"nvidia.com/gpu": 3}, 3600.0,
                          workload="Job/train")
        return pods, [*found, series("cv", "train-0", "GPU-v3", 0.5)]

    from django.test import override_settings

    with override_settings(GPUFINOPS_LEDGER_KEEP_MONTHS=0):  # built before the autouse keep_every_month applies
        people = make_people()
        prod = Cluster.objects.create(name="prod")
        fill(prod, START - timedelta(days=7), START, make=previous)
        fill(prod, START, END)
    return Week(prod, people)


# The two weeks' ledger (336 buckets through the write path) is built once for this module's tests; each sends its
# own reports to its own SMTP server.
WORLD_FIXTURES.add("two_weeks_world")
WEEK_WORLDS.append("two_weeks_world")


@pytest.fixture
def two_weeks_world(shared_rows) -> Week:
    return shared_rows.world("two_weeks_world", build_two_weeks)


@pytest.fixture
def two_weeks(two_weeks_world, prod, people, smtp_settings):
    for user in (people.finance, people.lead):
        ReportSubscription.objects.create(user=user, email=user.email)
    send_reports(now=NOW)
    return prod


def test_every_figure_in_the_email_is_the_apis_and_the_printed_totals_add_up(two_weeks, people, smtp_settings):
    mail = by_rcpt(smtp_settings)
    query = "/api/v1/usage/?start=2026-11-16&end=2026-11-23&group_by=team"
    for user, address in ((people.finance, "finance@example.com"), (people.lead, "vision-lead@example.com")):
        text = text_part(mail[address][0])
        answer = api(user).get(query).json()
        exact = {r["team"]: Decimal(str(r["cost"])) for r in answer["results"]}
        rows = table_rows(text)
        printed = {name: money(cells[0]) for name, cells in rows.items() if cells[0] != "unpriced"}
        total = printed.pop("Total")
        # Each team's printed cost is the API's within a cent; the total is the API's rounded to the cent.
        for team, value in printed.items():
            if team == "Unallocated capacity (platform)":
                assert abs(value - Decimal(str(answer["capacity"]["unallocated_cost"]))) < CENT
            else:
                assert abs(value - exact[team]) < CENT, (team, value, exact[team])
        api_total = answer["capacity"]["capacity_cost"] if "capacity" in answer else answer["totals"]["cost"]
        assert total == cents(Decimal(str(api_total)))
        assert sum(printed.values()) == total  # the printed total is the sum of the printed rows
        # GPU-hours: each within 0.05 of the API's, and they add up too.
        hours = {name: Decimal(cells[4].replace(",", "")) for name, cells in rows.items()}
        hours_total = hours.pop("Total")
        assert sum(hours.values()) == hours_total
        for r in answer["results"]:
            assert abs(hours[r["team"]] - Decimal(str(r["allocated_gpu_hours"]))) <= Decimal("0.05")
        # Changes against 2026-W46: the rows' changes add up to the total's.
        deltas = {name: money(cells[2]) for name, cells in rows.items() if "$" in cells[2]}
        assert sum(v for k, v in deltas.items() if k != "Total") == deltas["Total"]
        # The archive's totals for the same period and scope are the e-mail's.
        report = api(user).get("/api/v1/reports/2026-W47/").json()
        assert Decimal(report["totals"]["printed"]["total"]) == total
        assert Decimal(report["totals"]["cost"]) == Decimal(str(answer["totals"]["cost"]))
    finance = text_part(mail["finance@example.com"][0])
    # vision went from 3 GPUs to 2: a mover, down by a third (printed $1,679.99 -> $1,119.99); research is new.
    movers = finance.split("TOP MOVERS")[1].split("\n\n")[0]
    assert "vision    -$560.00 (-33.3 %)  $1,679.99 -> $1,119.99" in movers
    assert "research      +$575.86 (new)" in movers
    headline = finance.split("HEADLINE\n")[1].split("\n\n")[0]
    capacity, charged, unallocated = (money(line) for line in headline.splitlines()
                                      if line.strip().startswith(("GPU capacity", "Charged", "Unallocated")))
    assert charged + unallocated == capacity


def test_the_archive_serves_each_edition_and_its_exact_files_to_whoever_may_see_it(two_weeks, people, smtp_settings):
    mail = by_rcpt(smtp_settings)
    finance, lead = api(people.finance), api(people.lead)
    listing = finance.get("/api/v1/reports/").json()
    assert {(r["period"], r["scope"], r["version"], r["status"]) for r in listing["results"]} == {
        ("2026-W47", "all", 1, "final"), ("2026-W47", "team-vision", 1, "final")}
    assert [d["period"] for d in listing["due"]] == [last_complete("monthly", NOW).label] or listing["due"] == [] \
        or all(d["version"] is None for d in listing["due"])
    assert [(r["scope"]) for r in lead.get("/api/v1/reports/").json()["results"]] == ["team-vision"]

    detail = finance.get("/api/v1/reports/2026-W47/").json()
    assert (detail["period"], detail["scope"], detail["status"], detail["version"]) == ("2026-W47", "all", "final", 1)
    assert detail["coverage"]["final"] is True and detail["coverage"]["ratio"] == 1.0
    assert {e["scope"] for e in detail["editions"]} == {"all", "team-vision"}
    received = attachments(mail["finance@example.com"][0])
    files = (("csv", "gpufinops-2026-W47-final-all.csv"), ("focus", "gpufinops-2026-W47-final-all-focus.csv"))
    for which, name in files:
        response = finance.get(f"/api/v1/reports/2026-W47/{which}")
        assert response.status_code == 200 and response.content == received[name]
        assert name in response["Content-Disposition"]
        digest = base64.b64encode(hashlib.sha256(response.content).digest()).decode()
        assert response["Repr-Digest"] == f"sha-256=:{digest}:"
    assert detail["csv_sha256"] == hashlib.sha256(received["gpufinops-2026-W47-final-all.csv"]).hexdigest()

    lead_detail = lead.get("/api/v1/reports/2026-W47/").json()
    assert lead_detail["scope"] == "team-vision" and "capacity_cost" not in lead_detail["totals"]
    assert lead.get("/api/v1/reports/2026-W47/csv").content == attachments(
        mail["vision-lead@example.com"][0])["gpufinops-2026-W47-final-team-vision.csv"]
    # What the lead may not see is absent: 404, never 403.
    assert lead.get("/api/v1/reports/2026-W47/?scope=all").status_code == 404
    assert lead.get("/api/v1/reports/2026-W47/focus?scope=all").status_code == 404
    assert api(people.loner).get("/api/v1/reports/2026-W47/").status_code == 404
    assert api(people.loner).get("/api/v1/reports/").json()["results"] == []

    # Bad input is a 400 naming the parameter.
    for path, param in (("/api/v1/reports/2026-W99/", "period"), ("/api/v1/reports/last-week/", "period"),
                        ("/api/v1/reports/2026-13/csv", "period"), ("/api/v1/reports/2026-W47/?version=x", "version")):
        response = finance.get(path)
        assert response.status_code == 400 and param in response.json()["errors"], path
    assert finance.get("/api/v1/reports/2026-W47/?version=7").status_code == 404
    assert APIClient().get("/api/v1/reports/").status_code == 401


def test_a_period_without_an_edition_answers_the_report_as_it_would_be_made_now(two_weeks, people):
    lead = api(people.lead)
    due = lead.get("/api/v1/reports/2026-W46/").json()
    assert due["version"] is None and due["edition"] == "due" and due["status"] == "final"
    assert due["scope"] == "team-vision" and Decimal(due["totals"]["printed"]["total"]) > 0
    csv = lead.get("/api/v1/reports/2026-W46/csv")
    assert hashlib.sha256(csv.content).hexdigest() == due["csv_sha256"]
    assert lead.get("/api/v1/reports/2030-W01/").status_code == 404  # has not begun
    assert api(people.finance).get(f"/api/v1/reports/{parse_period('2026-11').label}/").json()["status"] \
        == "provisional"
    # A month in progress answers its forecast (apps.budgets.forecast); a week has none.
    from django.utils import timezone

    from apps.budgets.selectors import spend_forecast
    from apps.reports.periods import period_containing

    now = timezone.now()
    this_month = period_containing("monthly", now)
    answer = api(people.finance).get(f"/api/v1/reports/{this_month.label}/").json()["forecast"]
    expected = spend_forecast(now=now, start=this_month.start, end=this_month.end, label=this_month.label)
    assert answer["of"] == "this" and answer["period"] == this_month.label
    assert Decimal(answer["actual"]) == expected.forecast.actual.quantize(Decimal("0.01"))
    assert Decimal(answer["low"]) <= Decimal(answer["expected"]) <= Decimal(answer["high"])
    assert due["forecast"] is None


def test_the_reports_page_lists_the_editions_a_person_may_see(two_weeks, people, client):
    client.force_login(people.finance)
    page = client.get("/reports/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "gpufinops-2026-W47-final-all.csv" in html and "gpufinops-2026-W47-final-team-vision.csv" in html
    assert "$4,479.96" in html
    from django.utils import timezone

    from apps.reports.periods import period_containing

    assert f"Forecast: {period_containing('monthly', timezone.now()).label}" in html and "docs/numbers.md" in html
    client.force_login(people.lead)
    html = client.get("/reports/").content.decode()
    assert "gpufinops-2026-W47-final-team-vision.csv" in html and "final-all.csv" not in html
    assert "not a month" in client.get("/reports/?period=2026-13").content.decode()
    client.logout()
    assert client.get("/reports/").status_code == 302
