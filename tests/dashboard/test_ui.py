"""The dashboards in a real headless Chromium over the demo (collected through the production collector): a team
lead signs in with the real form and walks overview -> workloads (by idle cost) -> one workload -> its pods, and
every figure on the way is the API's for the same period and filters, and the simulator oracle's."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from decimal import Decimal
from urllib.parse import urlencode

import pytest

from apps.dashboard.tables import format_cell
from tests.dashboard.conftest import sign_in

PLOTS = "document.querySelectorAll('.js-plotly-plot .main-svg').length"
TILE_FIELDS = {
    "GPU cost (USD)": ("cost", "usd"),
    "Idle in allocations (USD)": ("idle_cost", "usd"),
    "Allocated GPU-hours": ("allocated_gpu_hours", "gpuh"),
    "Working GPU-hours": ("working_gpu_hours", "gpuh"),
    "Idle in allocations (GPU-hours)": ("idle_gpu_hours", "gpuh"),
    "Unmeasured GPU-hours": ("unmeasured_gpu_hours", "gpuh"),
}
# Columns of the workloads table in the screen's order (apps/dashboard/tables.py `Block.screen_columns`: the name,
# the money, the rest, the folded secondary columns last): 0 workload, 1 cost, 2 idle cost, 3 namespace, 4 team.
WORKLOAD_NUMBERS = {5: ("allocated_gpu_hours", "gpuh"), 6: ("working_gpu_hours", "gpuh"),
                    7: ("idle_gpu_hours", "gpuh"), 8: ("unmeasured_gpu_hours", "gpuh"), 1: ("cost", "usd"),
                    2: ("idle_cost", "usd")}


def api(browser, path: str, **params) -> dict:
    """The API's answer, fetched by the page itself (the same session, so the same visibility)."""
    query = urlencode(params, doseq=True)
    return browser.eval(f"fetch({(path + '?' + query)!r}, {{credentials: 'same-origin'}}).then(r => r.json())")


def period(browser) -> dict:
    return browser.eval("(() => { const s = document.querySelector('.scopebar').dataset; "
                        "return {start: s.start, end: s.end, signal: s.signal}; })()")


def tiles(browser) -> dict[str, str]:
    return dict(browser.eval("Array.from(document.querySelectorAll('.kpi')).map(k => "
                             "[k.dataset.label, k.querySelector('.value').textContent.trim()])"))


def table(browser, block: str, part: str = "tbody") -> list[list[str]]:
    """The cells' text; a row's name without the finding badges under it (a pod's "infra loss")."""
    return browser.eval(f"Array.from(document.querySelectorAll('#{block} table {part} tr')).map(tr => "
                        "Array.from(tr.children).map(c => (c.tagName === 'TH' && c.firstChild || c)"
                        ".textContent.trim()))")


def headers(browser, block: str) -> list[str]:
    return browser.eval(f"Array.from(document.querySelectorAll('#{block} table thead th')).map(th => "
                        "th.firstChild.textContent.trim())")


def click(browser, selector: str, path_prefix: str) -> None:
    browser.eval(f"document.querySelector({selector!r}).click()")
    browser.wait_for(f"location.pathname.startsWith({path_prefix!r}) && document.readyState === 'complete'")
    browser.wait_for("!!document.querySelector('.scopebar')")


def money(v) -> Decimal:
    return Decimal(str(v))


def printed_column(values: list, total, kind: str) -> list[str]:
    """A table column as the page must print it: the API's values apportioned to the printed total by largest
    remainder (`apps.usage.figures.apportion_places`, the e-mail's rule), so the printed rows add up to the printed
    totals row; each cell is then at most one printed unit from its own rounding."""
    from apps.usage.figures import TENTH, apportion_places, as_shown
    from apps.usage.money import CENT

    unit, places = ("usd", CENT) if kind == "usd" else ("gpuh", TENTH)
    cells = [format_cell(v, kind) for v in apportion_places(values, as_shown(total, unit), places)]
    assert sum(Decimal(c.replace(",", "").replace("$", "")) for c in cells) == as_shown(total, unit)
    return cells


def test_a_team_lead_walks_from_sign_in_to_the_pods_of_the_workload_that_wasted_most(demo_db, browser):
    sign_in(browser, demo_db, "lead")
    assert browser.eval("location.pathname") == "/"
    browser.wait_for(f"{PLOTS} >= 2")

    # 1. Team overview: the tiles are the API's totals for the same period; only the lead's team is there.
    p = period(browser)
    by_team = api(browser, "/api/v1/usage/", start=p["start"], end=p["end"], group_by="team")
    assert {r["team"] for r in by_team["results"]} == {"research"}
    shown = tiles(browser)
    for label, (field, kind) in TILE_FIELDS.items():
        assert shown[label] == format_cell(by_team["totals"][field], kind), label
    text = browser.eval("document.body.innerText")
    assert "Idle in allocations" in text and "Unallocated capacity" not in text  # a lead never sees capacity
    by_workload = api(browser, "/api/v1/usage/", start=p["start"], end=p["end"], group_by="workload")
    top = max(by_workload["results"], key=lambda r: (money(r["idle_cost"]), money(r["cost"])))
    assert table(browser, "top-idle")[0][0] == top["workload"]

    # 2. Workloads, sorted by idle cost (largest first): every row and the totals are the API's.
    click(browser, "p.more a", "/workloads/")
    assert browser.eval("document.querySelector('th[aria-sort=descending]').textContent").startswith("Idle cost")
    rows = table(browser, "workloads")
    api_rows = {(r["namespace"], r["workload"]): r for r in by_workload["results"]}
    assert len(rows) == len(api_rows)
    idle_costs = []
    ordered = [api_rows[(row[3], row[0])] for row in rows]
    for col, (field, kind) in WORKLOAD_NUMBERS.items():
        expected = printed_column([r[field] for r in ordered], by_workload["totals"][field], kind)
        assert [row[col] for row in rows] == expected, field
    for row, r in zip(rows, ordered, strict=True):
        assert row[4] == "research"
        idle_costs.append(money(r["idle_cost"]))
    assert idle_costs == sorted(idle_costs, reverse=True)
    foot = table(browser, "workloads", "tfoot")[0]
    for col, (field, kind) in WORKLOAD_NUMBERS.items():
        assert foot[col] == format_cell(by_workload["totals"][field], kind), field

    # 3. The workload that wasted most: its figures are the API's for that workload.
    click(browser, "#workloads tbody th a", "/workloads/sim-demo/")
    browser.wait_for(f"{PLOTS} >= 3")
    assert browser.eval("document.querySelector('h1').textContent").endswith(top["workload"])
    crumbs = browser.eval("Array.from(document.querySelectorAll('.crumbs li')).map(li => li.textContent.trim())")
    assert crumbs[:2] == ["Overview", "Workloads"] and crumbs[-1] == top["workload"]
    filters = {"cluster": "sim-demo", "namespace": top["namespace"], "workload": top["workload"]}
    one = api(browser, "/api/v1/usage/", start=p["start"], end=p["end"], group_by="team", **filters)
    shown = tiles(browser)
    for label, (field, kind) in TILE_FIELDS.items():
        assert shown[label] == format_cell(one["totals"][field], kind), label

    # 4. Its pods: one row each, the API's `group_by=pod` figures.
    pods = api(browser, "/api/v1/usage/", start=p["start"], end=p["end"], group_by="pod", **filters)
    cols = headers(browser, "pods")
    rows = table(browser, "pods")
    assert len(rows) == len(pods["results"]) > 0
    by_pod = {r["pod"]: r for r in pods["results"]}
    ordered = [by_pod[row[0]] for row in rows]
    for row, r in zip(rows, ordered, strict=True):
        assert row[cols.index("Node")] == r["node"]
    for label, field, kind in (("Allocated (GPU-h)", "allocated_gpu_hours", "gpuh"), ("Cost (USD)", "cost", "usd"),
                               ("Idle cost (USD)", "idle_cost", "usd"),
                               ("Idle in allocations (GPU-h)", "idle_gpu_hours", "gpuh")):
        expected = printed_column([r[field] for r in ordered], pods["totals"][field], kind)
        assert [row[cols.index(label)] for row in rows] == expected, label
    # The activity chart draws the four signals.
    names = browser.eval("Array.from(document.querySelectorAll('#chart-activity .legendtext')).map(t => t.textContent)")
    assert names == ["SM active", "GR engine active", "Tensor active", "GPU_UTIL (naive)"]


def test_the_workloads_page_shows_the_oracles_figures_for_the_final_hours(demo_db, browser):
    """Over the demo's final hours (a custom range on the hour), the page's workload figures are the API's and the
    API's are the simulator oracle's (allocated exactly; working to the sampling of the simulated Prometheus)."""
    from devtools.simulator.scenarios import build_scenario
    from tests import oracle

    sign_in(browser, demo_db, "fin")
    end = demo_db.newest  # the newest bucket is the provisional current hour: left out
    start = end - timedelta(hours=12)
    query = {"start": start.strftime("%Y-%m-%dT%H:%MZ"), "end": end.strftime("%Y-%m-%dT%H:%MZ")}
    browser.goto(demo_db.url + "/workloads/?" + urlencode(query))
    by_workload = api(browser, "/api/v1/usage/", start=query["start"], end=query["end"], group_by="team,workload")
    got = {(r["team"], r["namespace"], r["workload"]): r for r in by_workload["results"]}
    rows = table(browser, "workloads")
    assert len(rows) == len(got) > 3
    ordered = [got[(row[4], row[3], row[0])] for row in rows]
    for col, (field, kind) in WORKLOAD_NUMBERS.items():
        expected = printed_column([r[field] for r in ordered], by_workload["totals"][field], kind)
        assert [row[col] for row in rows] == expected, field

    scenario = build_scenario("demo", seed=0, end=demo_db.end, days=2, with_dra=False)  # as seeded
    truth: dict[tuple, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (team, namespace, workload, _hour), v in oracle.expected_usage_by_workload(scenario, start, end).items():
        for k, x in v.items():
            truth[(team, namespace, workload)][k] += x
    truth = {k: v for k, v in truth.items() if v["allocated"] > 0}
    assert set(truth) == set(got)
    for key, e in truth.items():
        g = got[key]
        assert g["allocated_gpu_hours"] == pytest.approx(e["allocated"], abs=1e-5), key
        assert g["unmeasured_gpu_hours"] == pytest.approx(e["unmeasured"], abs=1e-5), key
        assert g["working_gpu_hours"] == pytest.approx(e["working"], rel=0.01, abs=1e-3), key


def test_it_draws_every_page_with_its_charts_for_finance(demo_db, browser):
    sign_in(browser, demo_db, "fin")
    for path, charts in (("/", 2), ("/fleet/", 3), ("/teams/", 1), ("/queues/", 2), ("/capacity/", 1)):
        browser.goto(demo_db.url + path)
        browser.wait_for(f"{PLOTS} >= {charts}")
        assert browser.eval("document.querySelectorAll('.crumbs li').length") >= 1, path
    browser.goto(demo_db.url + "/fleet/")
    text = browser.eval("document.body.innerText")
    assert "Unallocated capacity" in text and "Idle in allocations" in text and "reconciles" in text
    # Legends name both kinds of idle, and the chart patterns tell them apart without colour.
    patterns = browser.eval("JSON.parse(document.getElementById('figures').textContent)['chart-split'].data"
                            ".map(t => [t.name, (t.marker.pattern || {}).shape || ''])")
    assert dict(patterns) == {"Working": "", "Idle in allocations": "/", "Unmeasured": ".",
                              "Unallocated capacity": "x"}


def test_the_sign_in_form_refuses_a_wrong_password_and_accepts_the_right_one(demo_db, browser):
    sign_in(browser, demo_db, "lead", password="wrong-password")
    assert browser.eval("location.pathname") == "/accounts/login/"
    assert "didn't match" in browser.eval("document.body.innerText")
    sign_in(browser, demo_db, "lead")
    assert browser.eval("location.pathname") == "/"
    assert "lead" in browser.eval("document.querySelector('.nav-user').textContent")


def test_sortable_headers_are_links_reachable_by_keyboard(demo_db, browser):
    sign_in(browser, demo_db, "lead")
    browser.goto(demo_db.url + "/workloads/")
    # Tab until the "Cost (USD)" header link has focus, then press Enter: the table is sorted by cost.
    for _ in range(80):
        browser.send("Input.dispatchKeyEvent", type="keyDown", key="Tab", code="Tab", windowsVirtualKeyCode=9)
        browser.send("Input.dispatchKeyEvent", type="keyUp", key="Tab", code="Tab", windowsVirtualKeyCode=9)
        if browser.eval("(document.activeElement.textContent || '').trim().startsWith('Cost (USD)')"):
            break
    else:
        pytest.fail("the Cost header is not reachable with Tab")
    browser.send("Input.dispatchKeyEvent", type="keyDown", key="Enter", code="Enter", windowsVirtualKeyCode=13)
    browser.send("Input.dispatchKeyEvent", type="keyUp", key="Enter", code="Enter", windowsVirtualKeyCode=13)
    browser.wait_for("location.search.includes('sort=cost') && document.readyState === 'complete'")
    browser.wait_for("!!document.querySelector('th[aria-sort=descending]')")
    assert browser.eval("document.querySelector('th[aria-sort=descending]').textContent").startswith("Cost (USD)")


HOSTILE_TEAM = '<a href="https://evil.example/login">Re-authenticate here</a>'


def test_a_hostile_team_name_is_shown_as_text_not_a_link_under_the_csp(demo_db, browser):
    """Rows written before team names were validated (or by any other path): the chart and the table show the
    name as typed, and nothing on the page links to the attacker."""
    from decimal import Decimal

    from django.utils import timezone

    from apps.inventory.models import Cluster
    from apps.usage.models import UsageHour
    from apps.usage.services import rollup_day

    cluster = Cluster.objects.create(name="prod-hostile")
    try:
        hour = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
        UsageHour.objects.create(cluster=cluster, hour=hour, team=HOSTILE_TEAM, namespace="ns", node_group="g",
                                 gpu_model="NVIDIA-L4", allocated_gpu_hours=4, working_sm_active=1,
                                 idle_sm_active=3, cost=Decimal("3.2"))
        rollup_day(cluster, hour.date())
        sign_in(browser, demo_db, "ops")
        browser.goto(demo_db.url + "/teams/?days=2")
        browser.wait_for(f"{PLOTS} >= 1")
        # Rows link down with the name as a query parameter (our own host); nothing points at the attacker's.
        assert browser.eval("Array.from(document.links).filter(a => a.hostname !== location.hostname).length") == 0
        assert browser.eval("document.querySelectorAll('svg a').length") == 0
        ticks = browser.eval("Array.from(document.querySelectorAll('#chart-showback .ytick text'))"
                             ".map(t => t.textContent)")
        assert HOSTILE_TEAM in ticks  # shown exactly as written
        assert HOSTILE_TEAM in browser.eval("document.body.innerText")
    finally:
        cluster.delete()


def test_the_api_docs_render_offline(demo_db, browser):
    sign_in(browser, demo_db, "ops")
    browser.goto(demo_db.url + "/api/v1/docs/")
    browser.wait_for("document.querySelectorAll('.opblock').length > 5", timeout=30)
    assert "/api/v1/usage/" in browser.eval("document.body.innerText")


# Every page with tables, as finance (who sees the most columns); the workload page is reached from the workloads table.
FIT_PAGES = ("/", "/workloads/", "workload", "/queues/", "/teams/", "/fleet/", "/capacity/", "/data-status/",
             "/findings/", "/findings/?group=workload", "/reports/")
# Each table wider than the box it sits in (its scrolling wrapper, or its parent): "which table, how wide, in what".
CLIPPED = """Array.from(document.querySelectorAll('table')).map(t => {
  const box = t.closest('.table-wrap') || t.parentElement;
  const name = (t.closest('section[id]') || {}).id || box.getAttribute('aria-label')
    || (t.closest('section') && t.closest('section').querySelector('h2') || {}).textContent || '?';
  return [name.trim(), t.scrollWidth, box.clientWidth, box.scrollWidth];
}).filter(([, w, c, s]) => w > c || s > c)"""


@pytest.mark.services
def test_no_table_is_clipped_at_1280_px(demo_db, browser):
    """Issue 21, "tables that fit": at 1,280 px every table of every page fits its box, so the sort key and the
    money are never behind a horizontal scrollbar (secondary columns fold behind a toggle)."""
    browser.send("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
    sign_in(browser, demo_db, "fin")
    clipped = {}
    for path in FIT_PAGES:
        if path == "workload":
            browser.goto(demo_db.url + "/workloads/")
            path = browser.eval("document.querySelector('#workloads tbody th a').getAttribute('href')")
        browser.goto(demo_db.url + path)
        # /findings/' groups fold their findings: open every group, so their tables are measured too.
        browser.eval("document.querySelectorAll('details.finding-group').forEach(d => { d.open = true; })")
        assert browser.eval("window.innerWidth") == 1280  # (the page less its vertical scrollbar)
        assert browser.eval("document.querySelectorAll('table').length") > 0, path
        if found := browser.eval(CLIPPED):
            clipped[path] = found
    assert clipped == {}, f"clipped tables at 1280 px ([block, table width, box width, box scroll]): {clipped}"


def test_a_team_lead_finds_which_job_wasted_most_and_why_in_two_clicks(demo_db, browser):
    """Issue 21: from the overview, the job that wasted most (top of "Top workloads by idle cost", click 1) and why
    (its "Why" block's costliest row, click 2) lands on the throttled node's findings: the infra loss of that job's
    GPUs on that node, shown (its group open), not behind another click."""
    sign_in(browser, demo_db, "lead")
    assert browser.eval("location.pathname") == "/"
    p = period(browser)
    by_workload = api(browser, "/api/v1/usage/", start=p["start"], end=p["end"], group_by="workload")
    top = max(by_workload["results"], key=lambda r: (money(r["idle_cost"]), money(r["cost"])))
    # The truth, from the findings API for the same period: the node where that job lost most to unhealthy GPUs.
    unhealthy = api(browser, "/api/v1/findings/", start=p["start"], end=p["end"], kind="unhealthy_gpu",
                    namespace=top["namespace"], workload=top["workload"], page_size=500)["results"]
    loss: dict[str, Decimal] = defaultdict(Decimal)
    for f in unhealthy:
        loss[f["node"]] += money(f["allocated_cost"])
    assert loss, "the job that wasted most has infra loss in the demo"
    node = max(loss, key=loss.get)
    clicks = 0

    # Click 1: the overview's top idle workload; its row says why already (a finding badge).
    row = browser.eval("Array.from(document.querySelector('#top-idle tbody tr').children)"
                       ".map(c => c.textContent.trim())")
    assert row[0] == top["workload"] and "infra loss" in row[-1]
    click(browser, "#top-idle tbody th a", "/workloads/")
    clicks += 1
    assert browser.eval("document.querySelector('h1').textContent").endswith(top["workload"])
    assert "infra loss" in browser.eval("document.querySelector('.why-badges').textContent")
    why = table(browser, "why")
    assert why and why[0][0].startswith("infra loss")
    assert f"node {node}" in why[0][headers(browser, "why").index("Where")]

    # Click 2: the costliest reason, the throttled node's finding.
    browser.eval("document.querySelector('#why tbody th a').click()")
    browser.wait_for("location.pathname === '/findings/' && document.readyState === 'complete'")
    clicks += 1
    target = browser.eval("""(() => { const r = document.querySelector(location.hash);
      const box = r.getBoundingClientRect();
      return {kind: r.dataset.kind, node: r.dataset.node, open: r.closest('details').open, height: box.height,
              text: r.textContent.replace(/\\s+/g, ' ')}; })()""")
    assert target["kind"] == "unhealthy_gpu" and target["node"] == node
    assert target["open"] and target["height"] > 0  # shown, not folded
    assert "throttled" in target["text"] and top["workload"] in target["text"]
    groups = browser.eval("Array.from(document.querySelectorAll('details.finding-group summary .name strong'))"
                          ".map(s => s.textContent)")
    assert groups == [f"node {node}"]
    assert clicks <= 2

    # The same link without the filters (a findings e-mail's): many groups, folded, and the linked one opens.
    fragment = browser.eval("location.hash")
    browser.goto(f"{demo_db.url}/findings/?start={p['start']}&end={p['end']}{fragment}")
    browser.wait_for("document.querySelectorAll('details.finding-group').length > 1")
    browser.wait_for("document.querySelector(location.hash).closest('details').open")
    assert browser.eval("document.querySelectorAll('details.finding-group[open]').length") == 1
