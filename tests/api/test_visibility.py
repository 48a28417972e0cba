"""Object-level authorization: a team's token sees nothing of another team, on every list and detail."""

from __future__ import annotations

import pytest

DAY = "start=2026-11-23&end=2026-11-25"
OWN = {"alice": ("vision", "alpha"), "bob": ("nlp", "beta")}
OTHER = {"alice": ("nlp", "beta"), "bob": ("vision", "alpha")}


def _text(response) -> str:
    return response.content.decode()


def _refused(response, query: str) -> None:
    """Another team's (or cluster's) name in a filter: a 400 naming the parameter, worded as for a name that does
    not exist (nothing about the other team leaks), never an empty 200."""
    name, value = query.split("&")[-1].split("=")
    assert response.status_code == 400, query
    assert response.json()["errors"] == {name: [f"Unknown {name}, or not one you may see: {value!r}."]}


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_it_shows_a_team_only_its_own_usage(clients, who):
    team, _ = OWN[who]
    other, _ = OTHER[who]
    for group_by in ["team", "team,namespace,cluster,node_group,gpu_model,day,hour", "cluster", "namespace"]:
        response = clients[who].get(f"/api/v1/usage/?{DAY}&group_by={group_by}")
        body = response.json()
        assert "capacity" not in body
        assert f'"{other}"' not in _text(response) and '"unassigned"' not in _text(response)
        if "team" in group_by:
            assert {r["team"] for r in body["results"]} == {team}
    for query in (f"team={other}", f"cluster={OTHER[who][1]}", "team=unassigned"):
        _refused(clients[who].get(f"/api/v1/usage/?{DAY}&{query}"), query)
    csv_text = _text(clients[who].get(f"/api/v1/usage/?{DAY}&group_by=team&format=csv"))
    assert team in csv_text and other not in csv_text


def test_it_gives_alice_exactly_the_vision_numbers(clients):
    body = clients["alice"].get("/api/v1/usage/?start=2026-11-23&end=2026-11-24").json()
    assert body["totals"] == {
        "allocated_gpu_hours": 24,
        "working_gpu_hours": 10,
        "idle_gpu_hours": 12,
        "unmeasured_gpu_hours": 2,
        "cost": "48.000000",
        "idle_cost": "24.000000",
        "unpriced_gpu_hours": 0,
    }


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_it_lists_only_a_teams_own_teams_clusters_and_idle_allocations(clients, who):
    team, cluster = OWN[who]
    other, other_cluster = OTHER[who]
    teams = clients[who].get("/api/v1/teams/").json()
    assert [t["name"] for t in teams["results"]] == [team] and teams["count"] == 1
    clusters = clients[who].get("/api/v1/clusters/").json()
    assert [c["name"] for c in clusters["results"]] == [cluster]
    idle = clients[who].get("/api/v1/idle-allocations/").json()
    assert {r["team"] for r in idle["results"]} == {team}
    for query in (f"team={other}", f"cluster={other_cluster}", "team=unassigned"):
        _refused(clients[who].get(f"/api/v1/idle-allocations/?{query}"), query)


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_it_answers_404_for_another_teams_details(clients, who):
    other, other_cluster = OTHER[who]
    team, cluster = OWN[who]
    assert clients[who].get(f"/api/v1/teams/{team}/").status_code == 200
    assert clients[who].get(f"/api/v1/clusters/{cluster}/").status_code == 200
    for url in (
        f"/api/v1/teams/{other}/",
        "/api/v1/teams/unassigned/",
        "/api/v1/teams/does-not-exist/",
        f"/api/v1/clusters/{other_cluster}/",
        "/api/v1/clusters/does-not-exist/",
        "/api/v1/clusters/a%00b/",
        "/api/v1/teams/a%00b/",
        f"/api/v1/teams/{'x' * 300}/",
    ):
        response = clients[who].get(url)
        assert response.status_code == 404
        assert response.json() == {"detail": "Not found.", "errors": {}}


def test_it_shows_nothing_to_a_user_without_teams(clients):
    client = clients["dave"]
    assert client.get("/api/v1/teams/").json()["results"] == []
    assert client.get("/api/v1/clusters/").json()["results"] == []
    assert client.get("/api/v1/idle-allocations/").json()["results"] == []
    body = client.get(f"/api/v1/usage/?{DAY}").json()
    assert body["results"] == [] and "capacity" not in body
    assert client.get("/api/v1/teams/vision/").status_code == 404


@pytest.mark.parametrize("who", ["carol", "root"])
def test_it_shows_finance_and_staff_every_team_with_capacity(clients, who):
    client = clients[who]
    body = client.get(f"/api/v1/usage/?{DAY}").json()
    assert {r["team"] for r in body["results"]} == {"nlp", "unassigned", "vision"}
    assert body["capacity"]["capacity_gpu_hours"] == 48
    assert [t["name"] for t in client.get("/api/v1/teams/").json()["results"]] == ["nlp", "unassigned", "vision"]
    assert [c["name"] for c in client.get("/api/v1/clusters/").json()["results"]] == ["alpha", "beta"]
    assert {r["team"] for r in client.get("/api/v1/idle-allocations/").json()["results"]} == {
        "nlp",
        "unassigned",
        "vision",
    }
    for url in ("/api/v1/teams/nlp/", "/api/v1/teams/unassigned/", "/api/v1/clusters/beta/"):
        assert client.get(url).status_code == 200


def test_it_never_exposes_cluster_connection_settings(clients):
    text = _text(clients["root"].get("/api/v1/clusters/alpha/"))
    assert "prom-alpha" not in text


def test_it_details_a_team_and_a_cluster(clients):
    assert clients["alice"].get("/api/v1/teams/vision/").json() == {
        "name": "vision",
        "display_name": "Computer Vision",
        "namespaces": ["vision-legacy"],
        "clusters": ["alpha"],
    }
    assert clients["alice"].get("/api/v1/clusters/alpha/").json() == {
        "name": "alpha",
        "source": "kubernetes",
        "last_collected_hour": "2026-11-24T02:00:00Z",
        "node_groups": ["h100"],
    }


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_it_lists_and_details_only_a_teams_own_findings(clients, who):
    """The findings (here the idle allocations the ledger determines) obey the same rule as every other list."""
    from apps.findings.models import Finding

    team, _ = OWN[who]
    other, other_cluster = OTHER[who]
    body = clients[who].get("/api/v1/findings/").json()
    assert body["results"] and {r["team"] for r in body["results"]} == {team}
    for query in (f"team={other}", f"cluster={other_cluster}", "team=unassigned", f"team={team}&team={other}"):
        _refused(clients[who].get(f"/api/v1/findings/?{query}"), query)
    own = body["results"][0]["id"]
    listed = clients["carol"].get("/api/v1/findings/?page_size=500").json()["results"]
    foreign = [r["id"] for r in listed if r["team"] != team]
    unlisted = Finding.objects.exclude(pk__in=[r["id"] for r in listed]).filter(team=team).first()
    assert foreign
    assert clients[who].get(f"/api/v1/findings/{own}/").json()["team"] == team
    for pk in [*foreign, *([unlisted.pk] if unlisted else [])]:  # others', and runs too short to be findings
        response = clients[who].get(f"/api/v1/findings/{pk}/")
        assert response.status_code == 404 and other not in _text(response)


def test_it_shows_no_findings_to_a_user_without_teams_and_all_to_finance(clients):
    from apps.findings.models import Finding

    assert clients["dave"].get("/api/v1/findings/").json()["results"] == []
    every = {r["team"] for r in clients["carol"].get("/api/v1/findings/?page_size=500").json()["results"]}
    assert every == set(Finding.objects.values_list("team", flat=True)) and len(every) >= 2
