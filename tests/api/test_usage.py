"""/api/v1/usage/: the ledger's numbers, grouped every way, from the right rollup."""

from __future__ import annotations

import csv
import io
import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache

from apps.usage.models import PodHour
from apps.usage.selectors import GROUP_KEYS, expand_group_by, usage_report
from tests.api.conftest import A100

URL = "/api/v1/usage/"
DAY_RANGE = "start=2026-11-23&end=2026-11-24"
FIELDS = [
    "allocated_gpu_hours", "working_gpu_hours", "idle_gpu_hours", "unmeasured_gpu_hours", "cost", "idle_cost",
    "unpriced_gpu_hours",
]  # fmt: skip
VISION = dict(zip(FIELDS, [24, 10, 12, 2, 48, 24, 0], strict=True))
NLP = dict(zip(FIELDS, [16, 4, 12, 0, 48, 36, 0], strict=True))
UNASSIGNED = dict(zip(FIELDS, [2, 0, 0, 2, 4, 0, 0], strict=True))
TOTALS = dict(zip(FIELDS, [42, 14, 24, 4, 100, 60, 0], strict=True))


MONEY = {"cost", "idle_cost", "capacity_cost", "unallocated_cost"}


def _figures(row):
    """The row's figures, money read from its decimal string (money is never a JSON number)."""
    return _money({name: row[name] for name in FIELDS})


def _money(figures):
    for name in MONEY & set(figures):
        assert isinstance(figures[name], str), f"{name} must be a decimal string"
    return {k: Decimal(v) if k in MONEY else v for k, v in figures.items()}


def test_it_reports_allocated_working_idle_unmeasured_and_cost_per_team(clients):
    body = clients["root"].get(f"{URL}?{DAY_RANGE}&group_by=team").json()
    assert body["start"] == "2026-11-23T00:00:00Z" and body["end"] == "2026-11-24T00:00:00Z"
    assert body["group_by"] == ["team"] and body["signal"] == "sm_active" and body["currency"] == "USD"
    by_team = {row["team"]: _figures(row) for row in body["results"]}
    assert by_team == {"nlp": NLP, "unassigned": UNASSIGNED, "vision": VISION}
    assert _money(body["totals"]) == TOTALS
    assert _money(body["capacity"]) == {
        "capacity_gpu_hours": 48,
        "unallocated_gpu_hours": 6,
        "unavailable_gpu_hours": 2,
        "unpriced_gpu_hours": 0,
        "capacity_cost": 112,
        "unallocated_cost": 12,
    }
    # Charged to teams + unallocated = what the capacity cost (ledger.md "Money").
    totals, capacity = _money(body["totals"]), _money(body["capacity"])
    assert totals["cost"] + capacity["unallocated_cost"] == capacity["capacity_cost"]
    assert body["coverage"] == pytest.approx(1 - 4 / 42, abs=1e-6)
    assert body["provisional"] is False


def test_it_defaults_to_the_pages_last_seven_days_today_included_by_team(clients):
    body = clients["root"].get(URL).json()
    assert body["group_by"] == ["team"]
    start = datetime.fromisoformat(body["start"])
    end = datetime.fromisoformat(body["end"])
    assert (end - start).days == 7
    assert end == datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)


def test_it_reads_the_pages_period_syntax(clients):
    week = clients["root"].get(f"{URL}?period=2026-W48").json()
    assert (week["start"], week["end"]) == ("2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z")
    month = clients["root"].get(f"{URL}?period=2026-11").json()
    assert (month["start"], month["end"]) == ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")
    custom = clients["root"].get(f"{URL}?start=2026-11-23&end=2026-11-30").json()
    assert _money(week["totals"]) == _money(custom["totals"]) and week["totals"]["cost"] == custom["totals"]["cost"]
    bad = clients["root"].get(f"{URL}?period=2026-W60")
    assert bad.status_code == 400 and "period" in bad.json()["errors"]
    both = clients["root"].get(f"{URL}?period=2026-W48&start=2026-11-23")
    assert both.status_code == 400 and "period" in both.json()["errors"]


@pytest.mark.parametrize(
    "combo", [*(c for n in (1, 2, 3) for c in itertools.combinations(GROUP_KEYS, n)), GROUP_KEYS]
)
def test_it_groups_by_every_combination_and_the_groups_add_up(clients, combo):
    """Every combination of up to three keys (and all of them): the rows add up to the same totals, whichever
    rollup answers (usage, workload or pod rows)."""
    body = clients["root"].get(f"{URL}?{DAY_RANGE}&group_by={','.join(combo)}").json()
    expanded = expand_group_by(combo)  # workload comes with namespace; pod with namespace, workload, node
    assert body["group_by"] == expanded
    assert _money(body["totals"]) == TOTALS
    for name in FIELDS:
        assert sum(_money(row)[name] for row in body["results"]) == pytest.approx(TOTALS[name])
    keys = [tuple(row[k] for k in expanded) for row in body["results"]]
    assert len(keys) == len(set(keys))
    for row in body["results"]:
        assert set(row) == set(expanded) | set(FIELDS) | {"coverage"}


def test_workloads_and_pods_add_up_to_each_team(clients):
    by_team = {r["team"]: r for r in clients["root"].get(f"{URL}?{DAY_RANGE}&group_by=team").json()["results"]}
    for key in ("workload", "pod"):
        rows = clients["root"].get(f"{URL}?{DAY_RANGE}&group_by=team,{key}").json()["results"]
        for team, total in by_team.items():
            mine = [r for r in rows if r["team"] == team]
            for name in FIELDS:
                assert sum(_money(r)[name] for r in mine) == pytest.approx(_money(total)[name]), (key, team, name)
    pods = clients["root"].get(f"{URL}?{DAY_RANGE}&group_by=pod&team=vision").json()["results"]
    assert {(r["namespace"], r["pod"], r["workload"], r["node"]) for r in pods} == {
        ("train", "resnet-0", "Job/resnet", "alpha-node-1"),
        ("serve", "detector-0", "Deployment/detector", "alpha-node-1"),
    }
    # a pod row says how its GPUs were handed out (interfaces.md); these were the device plugin's
    assert {r["allocation_mode"] for r in pods} == {"device_plugin"}
    PodHour.objects.filter(pod="resnet-0").update(allocation_mode="dra")
    cache.clear()  # the ledger changed without a bucket write: drop the cached answers
    pods = clients["root"].get(f"{URL}?{DAY_RANGE}&group_by=pod&team=vision").json()["results"]
    assert {r["pod"]: r["allocation_mode"] for r in pods} == {"resnet-0": "dra", "detector-0": "device_plugin"}


def test_a_team_member_sees_only_their_teams_workloads_and_pods(clients):
    for key in ("workload", "pod"):
        rows = clients["alice"].get(f"{URL}?{DAY_RANGE}&group_by=team,{key}").json()["results"]
        assert {r["team"] for r in rows} == {"vision"}
    assert clients["alice"].get(f"{URL}?{DAY_RANGE}&group_by=pod&workload=PyTorchJob/llama").json()["results"] == []


def test_filters_are_repeatable(clients):
    body = clients["root"].get(f"{URL}?{DAY_RANGE}&group_by=workload&namespace=train&namespace=llm").json()
    assert {r["workload"] for r in body["results"]} == {"Job/resnet", "PyTorchJob/llama"}
    body = clients["root"].get(f"{URL}?{DAY_RANGE}&group_by=team&cluster=alpha&cluster=beta&gpu_model={A100}").json()
    assert [r["team"] for r in body["results"]] == ["nlp"]


def test_it_labels_days_hours_and_clusters(clients):
    body = clients["root"].get(f"{URL}?{DAY_RANGE}&group_by=cluster,day,hour").json()
    assert [(r["cluster"], r["day"], r["hour"]) for r in body["results"]] == [
        ("alpha", "2026-11-23", "2026-11-23T00:00:00Z"),
        ("alpha", "2026-11-23", "2026-11-23T01:00:00Z"),
        ("beta", "2026-11-23", "2026-11-23T00:00:00Z"),
        ("beta", "2026-11-23", "2026-11-23T01:00:00Z"),
    ]


def test_it_reads_day_rollups_for_whole_days_and_hour_rollups_otherwise(ledger):
    start, end = datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 24, tzinfo=UTC)
    by_day = usage_report(start=start, end=end, group_by=["team"], visible_teams=None)
    by_hour = usage_report(start=start, end=end, group_by=["team", "hour"], visible_teams=None)
    partial = usage_report(start=start, end=start.replace(hour=1), group_by=["team"], visible_teams=None)
    assert (by_day.source, by_hour.source, partial.source) == ("day", "hour", "hour")
    assert by_day.totals.as_dict() == by_hour.totals.as_dict() == TOTALS
    assert partial.totals.as_dict() == {name: value / 2 for name, value in TOTALS.items()}


def test_without_group_keys_it_answers_one_row_of_the_sums(ledger):
    """What the pages ask for their totals (group_by=[]): one row, the totals, whichever rollup answers; no row
    where nothing matched."""
    start, end = datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 24, tzinfo=UTC)
    for stop in (end, start.replace(hour=1)):  # the day rollup, the hour rollup
        report = usage_report(start=start, end=stop, group_by=[], visible_teams=None)
        [row] = report.results
        assert row.group == {} and row.figures == report.totals and row.coverage == report.coverage
    expected = {name: value / 2 for name, value in TOTALS.items()}
    assert usage_report(start=start, end=start.replace(hour=1), group_by=[], visible_teams=None).totals.as_dict() == (
        expected)
    assert usage_report(start=start, end=end, group_by=[], visible_teams={"nobody"}).results == []


def test_it_selects_the_activity_signal(clients):
    body = clients["root"].get(f"{URL}?{DAY_RANGE}&signal=gpu_util&team=vision").json()
    assert body["signal"] == "gpu_util"
    [row] = body["results"]
    assert _figures(row) == {**VISION, "working_gpu_hours": 16.5, "idle_gpu_hours": 5.5, "idle_cost": 11}
    assert row["allocated_gpu_hours"] == row["working_gpu_hours"] + row["idle_gpu_hours"] + row["unmeasured_gpu_hours"]


def test_it_filters_by_cluster_and_team(clients):
    body = clients["root"].get(f"{URL}?{DAY_RANGE}&cluster=beta").json()
    assert [r["team"] for r in body["results"]] == ["nlp"]
    assert body["capacity"]["capacity_gpu_hours"] == 16
    body = clients["root"].get(f"{URL}?{DAY_RANGE}&team=unassigned&group_by=namespace").json()
    assert [(r["namespace"], r["allocated_gpu_hours"], r["coverage"]) for r in body["results"]] == [("misc", 2, 0)]
    unknown = clients["root"].get(f"{URL}?{DAY_RANGE}&cluster=nowhere&cluster=beta&team=nope")
    assert unknown.status_code == 400
    assert unknown.json()["errors"] == {"cluster": ["Unknown cluster, or not one you may see: 'nowhere'."],
                                        "team": ["Unknown team, or not one you may see: 'nope'."]}
    assert unknown.json()["detail"] == "Bad parameter: team, cluster."


def test_it_flags_ranges_with_provisional_buckets(clients):
    body = clients["root"].get(f"{URL}?start=2026-11-24&end=2026-11-25").json()
    assert body["provisional"] is True
    assert 0 < body["coverage"] < 1  # the idle-allocation pods of that day, one of them unmeasured


def test_it_returns_the_same_rows_as_csv(clients):
    response = clients["root"].get(f"{URL}?{DAY_RANGE}&group_by=team,cluster&format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="gpufinops-usage-2026-11-23_2026-11-24.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert list(rows[0]) == ["team", "cluster", *FIELDS, "coverage"]
    assert [(r["team"], r["cluster"], float(r["cost"])) for r in rows] == [
        ("nlp", "beta", 48.0),
        ("unassigned", "alpha", 4.0),
        ("vision", "alpha", 48.0),
    ]


def test_it_answers_csv_errors_as_json(clients):
    response = clients["root"].get(f"{URL}?format=csv&signal=nope")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert "signal" in response.json()["errors"]
