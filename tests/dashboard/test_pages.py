"""Every dashboard page over the demo, through the Django test client: what each person may see, bad input, the
CSV behind each table, query-count guards, and the figures equal to the API's."""

from __future__ import annotations

import csv
import html
import io
import re
from decimal import Decimal

import pytest

from apps.dashboard.tables import format_cell

PAGES = ["/", "/workloads/", "/workloads/?sort=cost&order=asc", "/queues/", "/teams/", "/capacity/", "/data-status/",
         "/glossary/", "/?period={week}", "/?period={month}", "/workloads/?days=30", "/queues/?days=1"]
# The most queries each page may make (any demo size: no page grows with the number of rows). The overview's budgets
# block reads a fixed 4 (budgets, daily history, spend per period kind), however many budgets. /fleet/ and a workload
# page ask coverage of their comparison periods (a fixed 2, `final_shares`) and the preflight/allocation-mode facts;
# each usage answer also reads the ledger's version once (`ledger_version`, one query per report the page shows).
# /fleet/'s forecast block reads a fixed 4 (the spend so far and the daily history, for the week and the month).
MAX_QUERIES = {"/": 54, "/workloads/": 20, "/queues/": 55, "/teams/": 30, "/capacity/": 25, "/data-status/": 15,
               "/fleet/": 48, "/glossary/": 5, "workload": 44}


def _fill(path: str) -> str:
    from django.utils import timezone

    from apps.reports.periods import month, week

    now = timezone.now()
    return path.format(week=week(now).label, month=month(now).label)


def other_teams_names(team: str) -> set[str]:
    """Namespaces and workload names of every other team in the demo (none may appear on the team's pages)."""
    from apps.usage.models import PodHour

    mine = set(PodHour.objects.filter(team=team).values_list("namespace", flat=True))
    names = set()
    for namespace, workload in PodHour.objects.exclude(team=team).values_list("namespace", "workload").distinct():
        if namespace not in mine:
            names.add(namespace)
        names.add(workload.split("/", 1)[-1])
    return {n for n in names if len(n) > 4}


def top_workload_url(client) -> str:
    body = client.get("/workloads/").content.decode()
    return re.search(r'<tbody>\s*<tr><th scope="row"><a href="([^"]+)"', body).group(1).replace("&amp;", "&")


@pytest.mark.parametrize("path", PAGES)
def test_a_team_member_sees_only_their_teams_on_every_page(as_user, path):
    lead = as_user("lead")
    response = lead.get(_fill(path))
    assert response.status_code == 200, path
    body = response.content.decode()
    for name in other_teams_names("research"):
        assert name not in body, (path, name)
    if path.startswith("/workloads/") or path == "/":
        assert "research" in body


def test_a_team_members_workload_pages_and_csvs_carry_only_their_rows(as_user):
    lead = as_user("lead")
    url = top_workload_url(lead)
    body = lead.get(url).content.decode()
    for name in other_teams_names("research"):
        assert name not in body
    for path in ("/?csv=top-idle", "/workloads/?csv=workloads", "/workloads/?format=csv", "/teams/?csv=showback",
                 url + "&csv=pods", "/queues/?csv=queues", "/queues/?csv=paradox"):
        response = lead.get(path)
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv"), path
        rows = list(csv.reader(io.StringIO(response.content.decode())))
        teams_col = rows[0].index("Team") if "Team" in rows[0] else None
        if teams_col is not None:
            assert {r[teams_col] for r in rows[1:-1]} <= {"research", ""}, path
        text = response.content.decode()
        for name in other_teams_names("research"):
            assert name not in text, (path, name)


def test_another_teams_workload_is_not_found_and_the_fleet_is_not_visible_to_a_team_lead(as_user):
    from apps.usage.models import PodHour

    other = PodHour.objects.filter(team="serving").values("cluster__name", "namespace", "workload").first()
    url = f"/workloads/{other['cluster__name']}/{other['namespace']}/{other['workload']}/"
    assert as_user("lead").get(url).status_code == 404  # not "it exists but is not yours"
    assert as_user("fin").get(url).status_code == 200
    fleet = as_user("lead").get("/fleet/")
    assert fleet.status_code == 403 and "Not visible to you" in fleet.content.decode()
    assert "research" in fleet.content.decode()  # what they can see instead
    assert as_user("fin").get("/fleet/").status_code == 200


def test_a_person_on_no_team_is_told_so_not_shown_zeros(as_user):
    body = as_user("nobody").get("/workloads/").content.decode()
    assert "you are not on any team yet" in body
    assert "manage.py add_team_member" in body
    overview = as_user("nobody").get("/").content.decode()
    assert "You are on no team yet" in overview and "manage.py add_team_member TEAM nobody" in overview
    assert "$0.00" not in overview and "nothing collected" not in overview.lower()


def test_asking_for_another_teams_rows_says_it_is_not_visible(as_user):
    body = html.unescape(as_user("lead").get("/?team=serving").content.decode())
    assert "Team serving is not visible to you (you can see: research)" in body
    assert "llm-serving" not in body


def test_the_queues_page_tells_a_lead_without_queues_they_exist_but_are_not_theirs(as_user):
    from django.utils import timezone

    from apps.inventory.models import Cluster, ClusterTeam
    from apps.inventory.services import record_teams

    body = html.unescape(as_user("outsider").get("/queues/").content.decode())
    assert "None yet: your teams have not appeared in any cluster" in body  # vision has no hour in the demo day
    record_teams(Cluster.objects.get(name="sim-demo"), ["vision"], timezone.now())  # now it has (no LocalQueue)
    try:
        body = html.unescape(as_user("outsider").get("/queues/").content.decode())
    finally:
        ClusterTeam.objects.filter(team__name="vision").delete()
    assert "No Kueue ClusterQueues seen" not in body
    assert "but none has a LocalQueue in your teams' namespaces: not visible to you" in body
    lead = as_user("lead").get("/queues/").content.decode()
    assert "research-cq" in lead and "serving-cq" not in lead and "data-cq" not in lead
    assert "GPU-hours waited" in lead and "Is the quota the bottleneck, or the fleet?" in lead


@pytest.mark.parametrize("query, message", [
    ("days=abc", "Enter a whole number of days"),
    ("days=0", "Enter a whole number of days"),
    ("period=2026-W60", "is not an ISO week"),
    ("period=yesterday", "a period is an ISO week"),
    ("start=2026-13-45&end=2026-12-01", "Custom range"),
    ("period=2026-W48&start=2026-11-20", "Name a period one way"),
    ("days=7&period=2026-W48", "Name a period one way"),
    ("start=2026-11-20T10:30:00Z&end=2026-11-21", "whole hour"),
    ("start=2026-11-22&end=2026-11-20", "Must be after start"),
    ("start=2020-01-01&end=2026-01-01", "at most 400 days"),
    ("signal=sm_hype", "Unknown signal"),
    ("cluster=" + "x" * 300, "At most 253 characters"),
    ("namespace=a%00b", "Control characters"),
    ("cluster=no-such-cluster", "No GPU-hours match cluster no-such-cluster"),
    ("sort=password", "Unknown sort column"),
    ("busy_below=200", "busy_below must be"),
])
def test_bad_input_is_explained_on_the_page_never_a_500(as_user, query, message):
    for path in ("/", "/workloads/", "/queues/", "/teams/", "/fleet/", "/capacity/"):
        response = as_user("fin").get(f"{path}?{query}")
        assert response.status_code == 200, (path, query)
        if path == "/workloads/" or "sort" not in query and "busy_below" not in query:
            assert message in html.unescape(response.content.decode()), (path, query)


def test_the_workloads_table_and_its_csv_are_the_apis_rows(as_user):
    fin = as_user("fin")
    page = fin.get("/workloads/")
    start, end = re.search(r'data-start="([^"]+)" data-end="([^"]+)"', page.content.decode()).groups()
    api = fin.get("/api/v1/usage/", {"start": start, "end": end, "group_by": "team,cluster,workload"}).json()
    rows = list(csv.reader(io.StringIO(fin.get("/workloads/?format=csv").content.decode())))
    header, body, total = rows[0], rows[1:-1], rows[-1]
    assert header[:4] == ["Workload", "Namespace", "Team", "Cluster"]
    assert len(body) == len(api["results"])
    by_key = {(r["team"], r["namespace"], r["workload"]): r for r in api["results"]}
    for r in body:
        a = by_key[(r[2], r[1], r[0])]
        assert Decimal(r[header.index("Cost (USD)")]) == Decimal(str(a["cost"]))
        assert Decimal(r[header.index("Idle cost (USD)")]) == Decimal(str(a["idle_cost"]))
        assert float(r[header.index("Allocated (GPU-h)")]) == pytest.approx(a["allocated_gpu_hours"], abs=1e-6)
    idle = [Decimal(r[header.index("Idle cost (USD)")]) for r in body]
    assert idle == sorted(idle, reverse=True)  # the screen's default order
    assert Decimal(total[header.index("Cost (USD)")]) == Decimal(str(api["totals"]["cost"]))


def test_every_table_has_a_csv_of_exactly_its_rows(as_user):
    fin = as_user("fin")
    for path in ("/", "/fleet/", "/teams/", "/queues/", top_workload_url(fin)):
        body = fin.get(path).content.decode()
        blocks = re.findall(r'href="\?[^"]*csv=([a-z-]+)"', body)
        assert blocks, path
        for block in blocks:
            sep = "&" if "?" in path else "?"
            response = fin.get(f"{path}{sep}csv={block}")
            assert response.status_code == 200, (path, block)
            rows = list(csv.reader(io.StringIO(response.content.decode())))
            # As many rows as the table (plus its header, plus its totals row when it has one).
            section = body[body.index(f'id="{block}"'):]
            section = section[:section.index("</table>")]
            shown = section.count("<tr") - 1 - section.count('class="empty"')
            assert len(rows) - 1 == shown, (path, block)


def test_the_showback_rows_add_up_to_the_capacity_cost(as_user):
    fin = as_user("fin")
    rows = list(csv.reader(io.StringIO(fin.get("/teams/?csv=showback").content.decode())))
    header, body, total = rows[0], rows[1:-1], rows[-1]
    cost = header.index("Cost (USD)")
    names = [r[0] for r in body]
    assert "unassigned" in names and names[-1] == "Unallocated capacity (platform)"
    assert sum(Decimal(r[cost]) for r in body) == Decimal(total[cost])
    page = fin.get("/teams/").content.decode()
    start, end = re.search(r'data-start="([^"]+)" data-end="([^"]+)"', page).groups()
    api = fin.get("/api/v1/usage/", {"start": start, "end": end, "group_by": "team"}).json()
    assert Decimal(total[cost]) == Decimal(str(api["capacity"]["capacity_cost"])).quantize(Decimal("0.01"))
    assert format_cell(Decimal(total[cost]), "usd") in page


def test_the_fleet_names_both_kinds_of_idle_and_reconciles(as_user):
    body = as_user("fin").get("/fleet/").content.decode()
    assert "Unallocated capacity (USD)" in body and "Idle in allocations (USD)" in body
    assert "✓ reconciles" in body
    assert "platform-owned" in body and "team-owned" in body


def test_the_fleet_shows_the_month_forecast_with_its_range(as_user):
    """The fleet's forecast block is the budgets' forecast (apps.budgets.forecast, one home) of the fleet's spend
    charged to teams; its spend so far is the ledger's, summed here from UsageHour."""
    from django.db.models import Sum
    from django.utils import timezone

    from apps.budgets.selectors import period_forecast
    from apps.usage.models import UsageHour

    response = as_user("fin").get("/fleet/")
    block = next(b for b in response.context["blocks"] if b.id == "forecast")
    month = period_forecast(timezone.now(), "monthly")
    row = block.rows[-1]
    assert row["period"] == month.label and row["history_days"] == month.forecast.history_days
    spent = UsageHour.objects.filter(hour__gte=month.start).aggregate(c=Sum("cost"))["c"]
    assert row["actual"] == month.forecast.actual == Decimal(spent).quantize(row["actual"])
    body = response.content.decode()
    if month.forecast.history_days:
        # The same forecast a moment later: the hours left today differ by the seconds between the two calls.
        assert abs(row["expected"] - month.forecast.expected) <= max(month.forecast.run_rate / 1000, Decimal("0.01"))
        assert row["low"] <= row["expected"] <= row["high"] and row["actual"] <= row["low"]
        assert f"${row['expected']:,.2f}" in body and f"${row['high']:,.2f}" in body
    else:
        assert "No history yet to forecast this month" in body
    assert 'href="/glossary/#forecast"' in body and "docs/numbers.md" in body
    assert as_user("fin").get("/fleet/?csv=forecast").status_code == 200


def test_activity_that_was_not_measured_is_never_shown_as_zero(as_user):
    from apps.usage.models import PodHour

    unmeasured = (PodHour.objects.filter(working_sm_active=0, idle_sm_active=0).values("team", "namespace",
                                                                                      "workload").first())
    assert unmeasured is not None, "the demo has a workload no DCGM series measured"
    page = as_user("fin").get("/workloads/?busy_below=100").content.decode()
    assert "not measured" in as_user("fin").get("/workloads/").content.decode()
    assert "0.0 %" not in page.split(unmeasured["workload"])[0][-10:]


@pytest.mark.parametrize("who", ["lead", "fin"])
@pytest.mark.parametrize("page", list(MAX_QUERIES))
def test_no_page_grows_n_plus_one_queries(as_user, who, page, django_assert_max_num_queries):
    client = as_user(who)
    path = top_workload_url(client) if page == "workload" else page
    client.get(path)  # the session, the cache and the first-use lookups
    from django.core.cache import cache

    cache.clear()  # a cold answer cache: every usage answer is computed
    with django_assert_max_num_queries(MAX_QUERIES[page]):
        response = client.get(path)
    assert response.status_code in (200, 403)


def test_the_glossary_defines_every_term_the_pages_link_to(as_user):
    glossary = as_user("fin").get("/glossary/").content.decode()
    anchors = set(re.findall(r'<dt id="([a-z-]+)"', glossary))
    fin = as_user("fin")
    for path in ("/", "/workloads/", "/queues/", "/teams/", "/fleet/", top_workload_url(fin)):
        for term in re.findall(r'/glossary/#([a-z-]+)"', fin.get(path).content.decode()):
            assert term in anchors, (path, term)


def test_periods_are_iso_weeks_months_days_or_a_range_and_links_keep_them(as_user):
    lead = as_user("lead")
    body = lead.get("/?period=2026-W48&namespace=ml-training").content.decode()
    assert "2026-11-23 – 2026-11-30 UTC" in body
    assert 'href="/workloads/?period=2026-W48&amp;namespace=ml-training"' in body
    assert "4-week avg" in body or "no data for 2026-W47" in body
    body = lead.get("/?period=2026-11").content.decode()
    assert "2026-11-01 – 2026-12-01 UTC" in body
    body = lead.get("/?start=2026-11-20&end=2026-11-27").content.decode()
    assert "2026-11-20 – 2026-11-27 UTC" in body and "Charts by day" in body
    body = lead.get("/?days=2").content.decode()
    assert "last 2 days" in body and "Charts by hour" in body


def test_the_overviews_count_findings_and_show_infra_loss_next_to_the_charge(as_user):
    """The lead's overview counts the team's findings (the findings API's for the same days and team); the fleet
    shows every team's infra loss beside its charge."""
    from apps.findings.selectors import counts_for

    lead = as_user("lead")
    page = lead.get("/?days=7")
    counts = page.context["finding_counts"]
    scope_window = page.context["window"]
    expected = counts_for(visible_teams={"research"}, start=scope_window.start, end=scope_window.end, charges=True)
    assert [(k.kind, k.findings, k.ongoing) for k in counts.kinds] == [
        (k.kind, k.findings, k.ongoing) for k in expected.kinds]
    assert counts.kinds and set(counts.infra_loss_by_team) <= {"research"}
    listed = lead.get("/api/v1/findings/", {"start": scope_window.start.isoformat(),
                                             "end": scope_window.end.isoformat(), "page_size": 500}).json()
    assert sum(k.findings for k in counts.kinds) == listed["count"]
    body = page.content.decode()
    assert "Infra loss" in body
    # each count links to the findings page for the same period, which counts the same
    link = "/findings/?" + counts.query()
    assert html.escape(link) in body
    followed = lead.get(link)
    assert followed.context["start"] == scope_window.start and followed.context["end"] == scope_window.end
    assert [(k.kind, k.findings) for k in followed.context["finding_counts"].kinds] == [
        (k.kind, k.findings) for k in counts.kinds]
    assert "Showing the last 7 days" in lead.get("/findings/?start=yesterday").content.decode()
    fleet = as_user("fin").get("/fleet/?days=7")
    assert len(fleet.context["finding_counts"].infra_loss_by_team) >= 2
    assert "Infra loss" in fleet.content.decode()


@pytest.mark.parametrize("who", ["lead", "fin"])
def test_per_workload_and_per_pod_totals_equal_the_team_totals_on_the_demo(as_user, demo_db, who):
    """Every team's GPU-hours and cost, summed over its workloads and over its pods, are the team's: over whole
    days (the day rollups) and over a range on the hour (the pod rows). A lead sees only their team."""
    from datetime import timedelta

    client = as_user(who)
    fields = ("allocated_gpu_hours", "working_gpu_hours", "idle_gpu_hours", "unmeasured_gpu_hours", "cost",
              "idle_cost")
    days = {"start": str((demo_db.newest - timedelta(days=1)).date()), "end": str((demo_db.end + timedelta(
        days=1)).date())}
    hours = {"start": (demo_db.newest - timedelta(hours=6)).strftime("%Y-%m-%dT%H:%MZ"),
             "end": demo_db.newest.strftime("%Y-%m-%dT%H:%MZ")}
    for window in (days, hours):
        by_team = client.get("/api/v1/usage/", {**window, "group_by": "team"}).json()["results"]
        assert by_team, window
        if who == "lead":
            assert {r["team"] for r in by_team} == {"research"}
        for key in ("workload", "pod"):
            rows = client.get("/api/v1/usage/", {**window, "group_by": f"team,{key}"}).json()["results"]
            for team in by_team:
                mine = [r for r in rows if r["team"] == team["team"]]
                assert mine, (key, team["team"])
                for f in fields:  # each row is rounded on its own: cents, and GPU-hours to 6 decimals
                    slack = (Decimal("0.005") if "cost" in f else Decimal("0.0000005")) * (len(mine) + 1)
                    total = sum(Decimal(str(r[f])) for r in mine)
                    assert abs(total - Decimal(str(team[f]))) <= slack, (window, key, team["team"], f)


def test_workloads_past_the_answer_cap_are_ranked_and_paged_not_refused(as_user, settings):
    """The workloads page and the overview's top list rank in the database: no GPUFINOPS_API_MAX_ROWS cap applies
    (a fleet's month has more workloads than one answer holds), every page of the ranking is reachable, and a page
    past the whole-ranking size prints each row on its own."""
    from apps.dashboard.selectors import workloads

    fin = as_user("fin")
    full = fin.get("/workloads/?days=30")
    rows = full.context["table_block"].extra["all_rows"]
    assert len(rows) == full.context["count"] > 3
    settings.GPUFINOPS_API_MAX_ROWS = 2
    workloads.PAGE_SIZE, workloads.WHOLE_RANKING_ROWS = 2, 2  # restored below
    try:
        page = fin.get("/workloads/?days=30&page=2")
        assert page.status_code == 200 and page.context["count"] == len(rows) and page.context["pages"] > 2
        shown = page.context["table_block"].rows
        assert [(r["team"], r["workload"]) for r in shown] == [(r["team"], r["workload"]) for r in rows[2:4]]
        assert "all_rows" not in page.context["table_block"].extra
        last = fin.get("/workloads/?days=30&page=999")
        assert last.context["page"] == last.context["pages"] and last.context["table_block"].rows
    finally:
        workloads.PAGE_SIZE, workloads.WHOLE_RANKING_ROWS = 50, 2_000
    settings.GPUFINOPS_API_MAX_ROWS = 20_000
    overview = fin.get("/?days=30")
    top = next(b for b in overview.context["blocks"] if b.id == "top-idle").rows
    idle = sorted((r for r in rows if r["idle_gpu_hours"] > 0), key=lambda r: -r["idle_cost"])
    assert [r["idle_cost"] for r in top] == [r["idle_cost"] for r in idle[:len(top)]] and top


def test_a_range_not_on_midnight_compares_with_the_previous_ranges_totals(as_user, demo_db):
    """Hour-level ranges read one usage answer per earlier window: the previous window's figures are its totals
    (not one of its ledger rows), for the tiles' changes."""
    from datetime import timedelta

    from apps.usage import money
    from apps.usage.selectors import usage_report

    end = demo_db.end
    start = end - timedelta(hours=6)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    page = as_user("fin").get(f"/?start={start:{stamp}}&end={end:{stamp}}")
    assert page.status_code == 200 and not page.context["window"].whole_days
    before = usage_report(start=start - timedelta(hours=6), end=start, group_by=["team"], visible_teams=None).totals
    assert before.cost > 0
    tiles = {t["label"]: t for t in page.context["tiles"]}
    assert tiles["GPU cost (USD)"]["change"]["previous"] == money.cents(before.cost)
    shown = tiles["Allocated GPU-hours"]["change"]["previous"]
    assert abs(shown - Decimal(repr(before.allocated_gpu_hours))) <= Decimal("0.05")


def test_a_leaderworkerset_is_one_workload_in_the_api_the_table_and_its_page(as_user):
    """The demo's llama-70b is a LeaderWorkerSet (leader pod through its StatefulSet, worker through the leader
    pod): one workload `LeaderWorkerSet/llama-70b` holding both pods' GPUs, nowhere a StatefulSet."""
    fin = as_user("fin")
    page = fin.get("/workloads/").content.decode()
    assert "LeaderWorkerSet/llama-70b" in page and "StatefulSet/llama-70b" not in page
    start, end = re.search(r'data-start="([^"]+)" data-end="([^"]+)"', page).groups()
    api = fin.get("/api/v1/usage/", {"start": start, "end": end, "group_by": "workload,pod"}).json()
    pods = {r["pod"]: r for r in api["results"] if r["workload"] == "LeaderWorkerSet/llama-70b"}
    assert set(pods) == {"llama-70b-0", "llama-70b-0-1"}  # the leader and its worker
    assert not [r for r in api["results"] if r["workload"].startswith("StatefulSet/llama-70b")]
    detail = fin.get("/workloads/sim-demo/llm-serving/LeaderWorkerSet/llama-70b/")
    assert detail.status_code == 200
    body = detail.content.decode()
    assert "llama-70b-0-1" in body and "llama-70b-0" in body
