"""One answer everywhere: every page, the API and the findings, asked for the same named window, print the same
bounds and the same totals (the one period rule, apps/common/periods.py)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.test import Client

from apps.common.periods import read_window

PAGES = ["/", "/workloads/", "/teams/", "/fleet/", "/queues/", "/capacity/", "/data-status/", "/findings/"]
TODAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
# The ledger's days (2026-11-23 and -24) lie in each of these windows, however they are named.
DAYS_BACK = (TODAY.date() - datetime(2026, 11, 23, tzinfo=UTC).date()).days + 1
WINDOWS = {
    "period=2026-W48": ("2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z", "2026-11-23 – 2026-11-30 UTC"),
    "period=2026-11": ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", "2026-11-01 – 2026-12-01 UTC"),
    "start=2026-11-23&end=2026-11-25": ("2026-11-23T00:00:00Z", "2026-11-25T00:00:00Z", "2026-11-23 – 2026-11-25 UTC"),
    f"days={DAYS_BACK}": None,  # relative to today: computed below by the rule itself
}


def _expected(query: str) -> tuple[str, str, str]:
    named = WINDOWS[query]
    if named is not None:
        return named
    w = read_window(dict([query.split("=")]), datetime.now(UTC), max_days=400)
    assert w.start == datetime(2026, 11, 23, tzinfo=UTC) and w.end > TODAY
    return f"{w.start:%Y-%m-%dT%H:%M:%SZ}", f"{w.end:%Y-%m-%dT%H:%M:%SZ}", w.caption()


def _csv_total(response, column: str = "Cost (USD)") -> Decimal:
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    return Decimal(rows[-1][column])


@pytest.mark.parametrize("query", list(WINDOWS))
def test_every_page_the_api_and_the_findings_give_the_same_bounds_and_totals(users, clients, query):
    start, end, caption = _expected(query)
    page = Client()
    page.force_login(users["carol"])  # finance: every page, every team
    api = clients["carol"]

    usage = api.get(f"/api/v1/usage/?{query}").json()
    findings = api.get(f"/api/v1/findings/?{query}").json()
    status = api.get(f"/api/v1/data-status/?{query}").json()
    assert (usage["start"], usage["end"]) == (findings["start"], findings["end"]) == (start, end)
    assert (status["start"], status["end"]) == (start, end)

    for url in PAGES:  # the bounds printed under the title
        html = page.get(f"{url}?{query}").content.decode()
        assert caption in html, url

    cost = Decimal(usage["totals"]["cost"])
    assert cost > 0
    overview = page.get(f"/?{query}&csv=teams")
    assert 'filename="gpufinops-overview-teams-' + caption[:10] in overview["Content-Disposition"]
    assert _csv_total(overview) == cost
    # Showback for finance ends with unallocated capacity: its total is what the capacity cost.
    assert _csv_total(page.get(f"/teams/?{query}&csv=showback")) == Decimal(usage["capacity"]["capacity_cost"])
    assert _csv_total(page.get(f"/workloads/?{query}&format=csv")) == cost

    listed = page.get(f"/findings/?{query}").content.decode().count('id="finding-')
    assert listed == findings["count"] > 0
    csv_rows = list(csv.DictReader(io.StringIO(
        api.get(f"/api/v1/findings/?{query}&format=csv").content.decode())))
    assert len(csv_rows) == findings["count"]
    assert sum(Decimal(r["cost"]) for r in csv_rows) == sum(Decimal(r["cost"]) for r in findings["results"])


def test_the_default_window_is_the_same_everywhere(users, clients):
    """No period named: the pages' last 7 days, today included, for the API and the findings too (no rolling
    168 hours, no window ending at midnight)."""
    w = read_window({}, datetime.now(UTC), max_days=400)
    expected = (f"{w.start:%Y-%m-%dT%H:%M:%SZ}", f"{w.end:%Y-%m-%dT%H:%M:%SZ}")
    for url in ("/api/v1/usage/", "/api/v1/findings/", "/api/v1/data-status/"):
        body = clients["root"].get(url).json()
        assert (body["start"], body["end"]) == expected, url
    page = Client()
    page.force_login(users["root"])
    for url in ("/", "/findings/", "/data-status/"):
        assert w.caption() in page.get(url).content.decode(), url
