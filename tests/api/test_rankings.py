"""/api/v1/rankings/: workloads, namespaces and pods ranked in the database, paged with offset and limit, each caller
seeing only the teams they may (the small ledger of tests/api/conftest.py; the ranking itself is checked against a
brute force over pod-hours in tests/usage/test_ranking.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

URL = "/api/v1/rankings/"
WEEK = {"start": "2026-11-23", "end": "2026-11-30"}


def _get(client, **params):
    response = client.get(URL, {**WEEK, **params})
    assert response.status_code == 200, response.content
    return response.json()


def test_workloads_by_idle_cost_paged_with_next_and_previous(clients):
    everything = _get(clients["root"], limit=1000)
    usage = clients["root"].get("/api/v1/usage/", {**WEEK, "group_by": "team,cluster,workload"}).json()
    assert everything["count"] == len(usage["results"]) == len(everything["results"]) > 4
    idle = [Decimal(r["idle_cost"]) for r in everything["results"]]
    assert idle == sorted(idle, reverse=True)
    by_key = {(r["team"], r["cluster"], r["namespace"], r["workload"]): r for r in usage["results"]}
    for row in everything["results"]:
        same = by_key[(row["team"], row["cluster"], row["namespace"], row["workload"])]
        assert (row["cost"], row["idle_cost"]) == (same["cost"], same["idle_cost"])
        assert row["allocated_gpu_hours"] == pytest.approx(same["allocated_gpu_hours"], abs=1e-6)
    assert everything["totals"]["cost"] == usage["totals"]["cost"]
    assert [r["rank"] for r in everything["results"]] == list(range(1, everything["count"] + 1))

    second = _get(clients["root"], limit=2, offset=2)
    assert second["results"] == everything["results"][2:4]
    assert second["totals"] == everything["totals"] and second["count"] == everything["count"]
    assert "offset=4" in second["next"] and "offset=0" in second["previous"]
    last = _get(clients["root"], limit=2, offset=everything["count"] - 1)
    assert last["next"] is None and len(last["results"]) == 1


def test_ordering_by_name_and_figure_and_the_other_levels(clients):
    asc = _get(clients["root"], ordering="cost")["results"]
    assert [Decimal(r["cost"]) for r in asc] == sorted(Decimal(r["cost"]) for r in asc)
    names = _get(clients["root"], ordering="-namespace")["results"]
    assert [r["namespace"] for r in names] == sorted((r["namespace"] for r in names), reverse=True)
    namespaces = _get(clients["root"], by="namespace", ordering="-allocated_gpu_hours")
    usage = clients["root"].get("/api/v1/usage/", {**WEEK, "group_by": "team,cluster,namespace"}).json()["results"]
    assert namespaces["count"] == len(usage) and "workload" not in namespaces["results"][0]
    assert [r["allocated_gpu_hours"] for r in namespaces["results"]] == sorted(
        (r["allocated_gpu_hours"] for r in usage), reverse=True)
    pods = _get(clients["root"], by="pod", ordering="-idle_gpu_hours", limit=3)
    assert {"pod", "pod_uid", "workload"} <= set(pods["results"][0]) and len(pods["results"]) == 3


def test_a_team_lead_sees_only_their_teams(clients):
    alice = _get(clients["alice"], limit=1000)
    assert alice["results"] and {r["team"] for r in alice["results"]} == {"vision"}
    root = _get(clients["root"], limit=1000, team="vision")
    assert alice["results"] == root["results"] and alice["totals"] == root["totals"]
    assert _get(clients["dave"])["count"] == 0
    assert clients["alice"].get(URL, {**WEEK, "team": "nlp"}).status_code == 400


@pytest.mark.parametrize(("params", "bad"), [
    ({"ordering": "-price"}, "ordering"),
    ({"by": "pod", "ordering": "node"}, "ordering"),
    ({"by": "node"}, "by"),
    ({"limit": "0"}, "limit"),
    ({"limit": "5000"}, "limit"),
    ({"offset": "-1"}, "offset"),
    ({"by": "pod", "start": "2026-09-01", "end": "2026-11-30"}, "end"),  # pod rows: the hour-level bound
])
def test_bad_parameters_are_a_400_naming_them(clients, params, bad):
    response = clients["carol"].get(URL, {**WEEK, **params})
    assert response.status_code == 400, response.content
    assert bad in response.json()["errors"]
